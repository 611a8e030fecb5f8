"""Integrating a field: adaptive solves with diffrax (discrete layers: :mod:`attnflow._layers`)."""

import math
from collections.abc import Callable
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float

from ._check import (
    MAX_STEPS_LIMIT,
    as_array,
    check_bool,
    check_budget,
    check_delta,
    check_field_callable,
    check_finite_scalar,
    check_instance,
    check_max_steps,
    check_positive_scalar,
    check_real,
    check_reverse_mode_only,
    check_save_times,
    check_tokens,
    inside_engine,
    is_traced,
)
from ._fields._base import AbstractField, AbstractPureField
from ._integrators._stored_adjoint import StoredStepAdjoint
from ._integrators._tolerance import floor_tolerances
from ._sphere import unit_rows

_DEFAULT_ROOT_FINDER = optx.Newton(rtol=1e-6, atol=1e-6)


class _OnSphere(eqx.Module):
    """Evaluate ``field`` at y/|y|: the flow then conserves |y_i| exactly (docs/maths.md §1.12).

    A module rather than a closure so that the field's arrays are leaves of the diffrax term,
    which ``BacksolveAdjoint`` needs in order to differentiate with respect to them.
    """

    field: Callable

    def __call__(self, t, y, args):
        x = unit_rows(y)
        return self.field(t, x, args)


def _save_normalized(t, y, args):
    return unit_rows(y)


class _SaveOnSphere(eqx.Module):
    """A user's ``SubSaveAt(fn=...)`` applied to y/|y|: saved tokens lie on the sphere to rounding.

    A module (not a closure) so that arrays inside ``fn`` stay leaves of the save structure.
    """

    fn: Callable

    def __call__(self, t, y, args):
        return self.fn(t, unit_rows(y), args)


class _DenseOnSphere(diffrax.AbstractPath):
    """diffrax's dense interpolation of y, read as y/|y| (the state the field sees).

    ``sol.evaluate(t)`` is then on the sphere to rounding; ``sol.derivative(t)`` is the
    derivative of y/|y|, P_u ẏ / |y| with u = y/|y|.
    """

    inner: diffrax.AbstractPath

    @property
    def t0(self):
        return self.inner.t0

    @property
    def t1(self):
        return self.inner.t1

    def evaluate(self, t0, t1=None, left=True):
        if t1 is not None:
            return self.evaluate(t1, left=left) - self.evaluate(t0, left=left)
        return unit_rows(self.inner.evaluate(t0, left=left))

    def derivative(self, t, left=True):
        y = self.inner.evaluate(t, left=left)
        dy = self.inner.derivative(t, left=left)
        norm = jnp.linalg.norm(y, axis=-1, keepdims=True)
        u = y / norm
        return (dy - u * jnp.sum(u * dy, axis=-1, keepdims=True)) / norm


def _is_sub(node):
    return isinstance(node, diffrax.SubSaveAt)


def _user_saveat(saveat, ts, backsolve, dtype, t0, t1):
    """The user's ``SaveAt`` with each ``fn`` reading y/|y| (not under BacksolveAdjoint, which
    rejects ``fn``: its values are normalised after the solve)."""
    if not isinstance(saveat, diffrax.SaveAt):
        check_instance(saveat, "saveat", diffrax.SaveAt, "e.g. diffrax.SaveAt(ts=[0.0, 1.0])")
    if ts is not None:
        raise ValueError("saveat, ts: pass save times either as ts or inside saveat, not both")

    def fix(sub):
        if sub.ts is not None:
            sub = eqx.tree_at(
                lambda s: s.ts, sub, check_save_times(jnp.asarray(sub.ts, dtype), t0, t1)
            )
        if backsolve:
            return sub
        return eqx.tree_at(lambda s: s.fn, sub, _SaveOnSphere(sub.fn))

    if saveat.subs is None:
        return saveat
    subs = jax.tree_util.tree_map(fix, saveat.subs, is_leaf=_is_sub)
    return eqx.tree_at(lambda s: s.subs, saveat, subs)


class _Clustered(eqx.Module, strict=True):
    """Event condition: min_{i,j} ⟨x_i, x_j⟩ − (1 − δ) at x = y/|y|, which crosses 0 upwards when
    every pair of tokens comes within 1 − δ (``clustered_fraction(x, δ) == 1``)."""

    delta: Float[Array, ""] | float

    def __call__(self, t, y, args, **kwargs):
        x = unit_rows(y)
        return jnp.min(x @ x.T) - (1 - jnp.asarray(self.delta, x.dtype))


def clustered_event(delta: float = 1e-3, *, root_finder=_DEFAULT_ROOT_FINDER) -> diffrax.Event:
    """A ``diffrax.Event`` that stops :func:`solve` once the tokens form one cluster.

    The condition is c(x) = min_{i,j} ⟨x_i, x_j⟩ − (1 − δ) on the unit tokens x = y/|y|: the
    event fires when c crosses 0 upwards, i.e. the first time every pair satisfies
    ⟨x_i, x_j⟩ ≥ 1 − δ (``clustered_fraction(x, delta) == 1``; almost surely reached for SA
    with V = I, arXiv:2312.10794 Thm 6.1/6.3; δ as in the curve Γ_∞,δ, eq. (6.12)). The solve
    then ends at that time:
    ``sol.ts`` and the ``t1`` entry of ``sol.ys`` are the event time and the tokens there, and
    ``sol.result == diffrax.RESULTS.event_occurred`` (which :func:`solve` does not treat as a
    failure). A state already clustered at t0 fires nothing (no upward crossing).

    Args:
        delta: the clustering threshold 0 < δ < 2 (as in :func:`attnflow.clustered_fraction`).
        root_finder: an ``optimistix`` root finder that locates the crossing inside the step
            (default Newton with rtol = atol = 1e-6); ``None`` stops at the end of the step
            where the crossing happened.

    Returns:
        ``diffrax.Event(cond_fn, root_finder, direction=True)``: pass it as ``solve(event=...)``.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 8, 3)
        >>> sol = af.solve(af.SelfAttention(1.0), x0, 100.0, event=af.clustered_event(1e-3))
        >>> bool(sol.ts[-1] < 100.0), float(af.clustered_fraction(sol.ys[-1], 1.01e-3))
        (True, 1.0)
    """
    delta = check_delta(delta)
    check_instance(
        root_finder,
        "root_finder",
        optx.AbstractRootFinder,
        "e.g. optimistix.Newton(rtol=1e-6, atol=1e-6), or None",
        allow_none=True,
    )
    return diffrax.Event(_Clustered(delta), root_finder, direction=True)


DEFAULT_MAX_STEPS = 4096
# Near a clustered state an explicit solver's step is capped by stability at about 3.5/λ, λ the
# contraction rate (1 for SA with V = I: measured 0.28 steps per unit time at t1 = 1e4, Tsit5).
_STEPS_PER_UNIT_TIME = 4


def auto_max_steps(t0, t1) -> int:
    """The default step cap: 4096, or 4 steps per unit of |t1 − t0| past t1 − t0 = 1024, rounded
    up to a power of two so that nearby horizons share one compiled solve. Traced times get 4096."""
    if is_traced(t0) or is_traced(t1):
        return DEFAULT_MAX_STEPS
    span = abs(float(t1) - float(t0))
    if span * _STEPS_PER_UNIT_TIME <= DEFAULT_MAX_STEPS:
        return DEFAULT_MAX_STEPS
    steps = 2 ** math.ceil(math.log2(span * _STEPS_PER_UNIT_TIME))
    check_budget(
        "t1",
        steps,
        MAX_STEPS_LIMIT,
        what="solver steps (the default cap is 4 steps per unit of |t1 - t0|)",
        hint="shorten the horizon, or pass max_steps explicitly if you mean it",
    )
    return steps


_NOT_FINITE_AT_START = (
    "solve: the field is not finite at the initial state (t0, x0), so no step could be "
    "accepted. Likely causes: exp(β⟨x_i, x_j⟩) overflowing (normalization='n' overflows for "
    "β > 88 in float32 and β > 709 in float64: use float64 or the softmax normalisation), NaN "
    "or inf in the field's parameters (β, Q, K, V) or in args, or weights that sum to 0"
)
_MOSTLY_REJECTED = (
    "solve: reached max_steps{steps} before t1 with most steps rejected: the field probably "
    "becomes non-finite along the trajectory (e.g. exp(β⟨x_i, x_j⟩) overflowing as tokens "
    "cluster, with normalization='n': use float64 or the softmax normalisation), or the "
    "problem is stiff (large β with normalization='n'); raise max_steps if it is finite"
)
_MAX_STEPS = (
    "solve: reached max_steps{steps} before t1{where}. Raise max_steps. Near a clustered "
    "state explicit solvers take steps of about 3/λ, λ the contraction rate (about 1 for SA "
    "with V = I, e^β for normalization='n'), so long horizons need about λ·(t1 − t0)/3 steps; "
    "the default max_steps='auto' allows max(4096, 4·|t1 − t0|) when t0 and t1 are concrete, "
    "and 4096 when they are traced"
)


def _check_dt0(dt0, t0, t1):
    """dt0: finite, non-zero, pointing from t0 to t1 (diffrax integrates backwards if t1 < t0)."""
    dt0 = check_finite_scalar(dt0, "dt0")
    expected = "dt0: expected a finite initial step with the sign of t1 - t0 (> 0 when t1 > t0)"
    if is_traced(dt0) or is_traced(t0) or is_traced(t1):
        bad = (dt0 == 0) | (dt0 * (t1 - t0) < 0)
        # A Python-float dt0 with traced times: thread the check through an array.
        return eqx.error_if(jnp.asarray(dt0), bad, expected)
    if float(dt0) == 0 or float(dt0) * (float(t1) - float(t0)) < 0:
        raise ValueError(
            f"{expected}, got dt0 = {float(dt0)} for t0 = {float(t0)}, t1 = {float(t1)}"
        )
    return dt0


_STIFF = (
    "solve: reached max_steps{steps} before t1{where}: the problem is stiff. The field's rate "
    "at x0 is about λ = {rate:.3g}{overflow}, so an explicit solver needs about "
    "λ·(t1 − t0)/3 = {need:.3g} steps (raising max_steps does not help past {limit:.3g}). "
    "Large β with normalization='n' does this (USA's rate grows like e^β, and overflows "
    "float32 for β > 88): use a smaller β, the softmax normalisation, or an implicit solver "
    "(e.g. solver=diffrax.Kvaerno5())"
)


def _field_rate(field, t0, x0, args) -> float:
    """|∂F/∂x| at (t0, x0), by three power iterations of JVPs: the stiffness that caps an
    explicit solver's step at about 3/λ. Run only after a failed eager solve."""
    v = jnp.ones_like(x0) + jnp.arange(x0.size, dtype=x0.dtype).reshape(x0.shape) / x0.size
    rate = 0.0
    for _ in range(3):
        v = v / jnp.linalg.norm(v)
        _, v = jax.jvp(lambda x: field(t0, unit_rows(x), args), (x0,), (v,))
        rate = float(jnp.linalg.norm(v))
        if not np.isfinite(rate) or rate == 0:
            return rate
    return rate


_OTHER_FAILURE = (
    "diffrax reported a failure other than the step cap (e.g. an implicit solver's nonlinear "
    "solve diverged); rerun with throw=False and inspect sol.result"
)


def _check_solution(sol, field, t0, x0, args, max_steps, t1_value):
    """Raise on a failed solve, telling a non-finite field from a step cap that is too low.

    Cheap: the field is evaluated once more, at (t0, x0), and only when the solve failed.
    """
    # An event ending the solve is a success (diffrax.is_okay), not a failure to diagnose.
    failed = ~diffrax.is_okay(sol.result)
    capped = sol.result == diffrax.RESULTS.max_steps_reached
    accepted = sol.stats["num_accepted_steps"]
    rejected = sol.stats["num_rejected_steps"]

    def start_not_finite():
        return ~jnp.all(jnp.isfinite(field(t0, x0, args)))

    mostly_rejected = capped & (rejected > accepted)
    if not is_traced(failed):
        if not bool(failed):
            return sol
        bad_start = start_not_finite()
        steps = f" = {max_steps} ({int(accepted)} accepted, {int(rejected)} rejected)"
        where = "" if t1_value is None else f" = {t1_value:g}"
        rate = _field_rate(field, t0, x0, args) if bool(capped) and t1_value is not None else 0.0
        need = rate * abs(t1_value - float(t0)) / 3 if t1_value is not None else 0.0
        if bool(bad_start):
            message = _NOT_FINITE_AT_START
        elif bool(capped) and not need <= MAX_STEPS_LIMIT:
            overflow = "" if np.isfinite(rate) else f" (its derivative overflows {x0.dtype})"
            message = _STIFF.format(
                steps=steps,
                where=where,
                rate=rate,
                overflow=overflow,
                need=need,
                limit=MAX_STEPS_LIMIT,
            )
        elif bool(mostly_rejected):
            message = _MOSTLY_REJECTED.format(steps=steps)
        elif bool(capped):
            message = _MAX_STEPS.format(steps=steps, where=where)
        else:
            return sol.result.error_if(sol, failed)
        raise eqx.EquinoxRuntimeError(message)
    # One conditional and one error check per solve: the field is re-evaluated at (t0, x0)
    # only on failure, and a single branched check picks the message.
    bad_start = jax.lax.cond(failed, start_not_finite, lambda: jnp.array(False))
    messages = [
        _NOT_FINITE_AT_START,
        _MOSTLY_REJECTED.format(steps=f" = {max_steps}"),
        _MAX_STEPS.format(steps=f" = {max_steps}", where=""),
        "the solve failed: " + _OTHER_FAILURE,
    ]
    index = jnp.where(bad_start, 0, jnp.where(capped, jnp.where(mostly_rejected, 1, 2), 3))
    return eqx.branched_error_if(sol, failed, index, messages)


def _check_solve_arguments(t0, t1, rtol, atol, max_steps, dt0, dtype):
    """Validate solve's times, tolerances and step options; returns them in the tokens' dtype
    (tolerances floored for float32) with the static value of t1 (None when traced)."""
    t0, t1 = check_finite_scalar(t0, "t0"), check_finite_scalar(t1, "t1")
    t1_value = None if is_traced(t1) else float(t1)
    rtol = check_positive_scalar(rtol, "rtol", what="tolerance")
    atol = check_positive_scalar(atol, "atol", what="tolerance")
    if max_steps == "auto":
        max_steps = auto_max_steps(t0, t1)
    max_steps = check_max_steps(max_steps)
    rtol, atol = floor_tolerances(rtol, atol, dtype)
    # As arrays the tolerances are traced, not static: another tolerance reuses the compiled solve.
    rtol, atol = _scalar_array(rtol, dtype), _scalar_array(atol, dtype)
    # diffrax promotes y to the time dtype: keep times in the tokens' precision.
    t0, t1 = _scalar_array(t0, dtype), _scalar_array(t1, dtype)
    if dt0 is not None:
        dt0 = _check_dt0(dt0, t0, t1)
        dt0 = _scalar_array(dt0, dtype)
    return t0, t1, t1_value, rtol, atol, max_steps, dt0


def _scalar_array(value, dtype):
    """A scalar as a 0-d array of ``dtype``: a NumPy array for Python and NumPy numbers (the
    compiled solve takes it as an argument like any array; building a device array eagerly costs
    a dispatch per scalar), a JAX array otherwise."""
    if isinstance(value, (int, float, np.number, np.ndarray)):
        return np.asarray(value, dtype)
    return jnp.asarray(value, dtype)


def check_solve_objects(
    field,
    solver=None,
    adjoint=None,
    stepsize_controller=None,
    progress_meter=None,
    *,
    field_optional=False,
):
    """The options that take an object: an instance of the right diffrax class (a class passed
    for its instance, or a name such as ``solver='tsit5'``, is refused saying what to pass)."""
    # field_optional: None means no interaction (solve_sde) or no field at all (models).
    check_field_callable(field, allow_none=field_optional)
    check_instance(
        solver, "solver", diffrax.AbstractSolver, "e.g. diffrax.Tsit5()", allow_none=True
    )
    check_instance(
        adjoint,
        "adjoint",
        diffrax.AbstractAdjoint,
        "e.g. diffrax.RecursiveCheckpointAdjoint() or attnflow.StoredStepAdjoint()",
        allow_none=True,
    )
    check_instance(
        stepsize_controller,
        "stepsize_controller",
        diffrax.AbstractStepSizeController,
        "e.g. diffrax.PIDController(rtol=1e-6, atol=1e-9)",
        allow_none=True,
    )
    check_instance(
        progress_meter,
        "progress_meter",
        diffrax.AbstractProgressMeter,
        "e.g. diffrax.TqdmProgressMeter()",
        allow_none=True,
    )


def _check_event(event):
    check_instance(
        event, "event", diffrax.Event, "e.g. attnflow.clustered_event(1e-3)", allow_none=True
    )


def solve(
    field: Callable,
    x0: Float[Array, "n d"],
    t1,
    *,
    t0=0.0,
    ts=None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dt0=None,
    max_steps: int | None | Literal["auto"] = "auto",
    adjoint: diffrax.AbstractAdjoint | None = None,
    args=None,
    throw: bool = True,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    differentiable_twice: bool = False,
    saveat: diffrax.SaveAt | None = None,
    event: diffrax.Event | None = None,
    progress_meter: diffrax.AbstractProgressMeter | None = None,
) -> diffrax.Solution:
    """Solve ẋ = field(t, x, args) on (S^{d-1})^n from x(t0) = x0 with diffrax.

    The flow of arXiv:2312.10794, eq. (2.3)–(2.5) (SA, USA) for an attnflow field, or any field
    with diffrax's signature. The right-hand side is evaluated at y/|y| (so |x_i| is an exact
    invariant of the ODE even in the repulsive case V = −I, docs/maths.md §1.12) and everything
    saved — ``sol.ys`` for the default save, the values a user's ``saveat`` function sees, and
    the dense output ``sol.evaluate(t)`` — is normalised, so it lies on the sphere to rounding.
    Beyond that the conventions are ``diffrax.diffeqsolve``'s: ``saveat``, ``event``,
    ``progress_meter`` and ``adjoint`` mean what they mean there, and the result is a
    ``diffrax.Solution``.

    Args:
        field: a vector field ``field(t, x, args) -> (n, d)`` tangent at x (any attnflow field,
            or any callable with diffrax's signature).
        x0: (n, d) initial tokens on the unit sphere (checked; see :func:`attnflow.normalize`),
            float32 or float64 (half precision is rejected: it cannot hold |x_i| = 1 to the
            accuracy the step-size controller needs); a Python list becomes an array of the
            default floating dtype.
        t1: final time (layers are time), finite. ``t1 < t0`` integrates backwards in time
            (the ODE is reversible; backwards from a clustered state it is exponentially
            unstable, so expect to lose accuracy at long horizons).
        t0: initial time, finite (default 0).
        ts: optional save times between t0 and t1, finite and monotone from t0 to t1
            (non-decreasing, or non-increasing when t1 < t0); ``sol.ys`` then has shape
            (len(ts), n, d). Without ``ts`` (and without ``saveat``) only t1 is saved:
            ``sol.ys`` has shape (1, n, d). Shorthand for ``saveat=diffrax.SaveAt(ts=ts)``.
        solver: any diffrax solver; default ``Tsit5()`` (order 5) with a PID controller.
        rtol: relative tolerance of the default PID controller, finite and > 0 (default
            1e-6). Float32 tokens get rtol ≥ 1e-5, the tightest float32 can honour. With a
            ``stepsize_controller`` the tolerances are the controller's: giving ``rtol`` or
            ``atol`` too warns that they are ignored.
        atol: absolute tolerance of the default PID controller, finite and > 0 (default
            1e-9). Float32 tokens get atol ≥ 1e-6.
        dt0: initial step, finite and non-zero with the sign of t1 − t0; ``None`` lets
            diffrax choose it.
        max_steps: diffrax's step cap, a positive integer or ``None`` (no cap; needs an
            adjoint that supports it). The default ``"auto"`` is 4096, or 4 steps per unit of
            |t1 − t0| past |t1 − t0| = 1024 (rounded up to a power of two) when t0 and t1 are
            concrete: near a clustered state an explicit solver's step is capped by stability
            at about 3/λ, λ the contraction rate (about 1 for SA with V = I, e^β for
            ``normalization="n"``), so the step count grows with the horizon. Keep it tight
            under ``vmap``.
        adjoint: diffrax adjoint; default ``RecursiveCheckpointAdjoint()`` (exact reverse
            mode; see Differentiation below).
        args: passed to ``field``.
        throw: raise if the solve fails; set False under ``vmap`` and inspect ``sol.result``.
            The error tells a field that is not finite at (t0, x0) (e.g. exp(β⟨x_i, x_j⟩)
            overflowing, NaN in Q, K, V) from a step cap that is too low; with ``throw=False``
            both are ``RESULTS.max_steps_reached``. An event ending the solve is not a failure.
        stepsize_controller: overrides the PID controller (e.g. ``ConstantStepSize()``, with
            dt0). When it is not given and ``field`` declares ``jump_times`` (an attnflow field
            whose value is not None, e.g. :class:`attnflow.PiecewiseConstant`), the PID
            controller steps exactly to those times.
        differentiable_twice: make second and mixed derivatives work. The default solver
            becomes ``Tsit5(scan_kind="bounded")`` and the default adjoint ``DirectAdjoint()``,
            which together support every composition of ``jax.grad``, ``jax.jvp``,
            ``jax.jacfwd``, ``jax.jacrev`` and ``jax.hessian`` (measured with diffrax 0.7.2).
            Cheaper alternatives for one composition: ``adjoint=RecursiveCheckpointAdjoint()``
            (with the bounded Tsit5) supports forward-over-reverse only (``jax.hessian``,
            ``jacfwd(grad)``), and ``adjoint=ForwardMode()`` forward-over-forward only.
        saveat: a ``diffrax.SaveAt``, as in ``diffeqsolve`` (``t0``, ``t1``, ``ts``,
            ``steps``, ``fn``, ``subs``, ``dense``, ...); not together with ``ts``. Each
            ``fn(t, x, args)`` receives the normalised tokens x = y/|y| (the default saves x
            itself), and with ``dense=True`` ``sol.evaluate(t)`` returns normalised tokens and
            ``sol.derivative(t)`` their time derivative. Under ``BacksolveAdjoint`` (which
            rejects ``fn``) the saved values are normalised after the solve.
        event: a ``diffrax.Event`` that ends the solve when its condition fires, e.g.
            :func:`attnflow.clustered_event` (stop once all tokens are within 1 − δ).
            ``sol.ts`` then holds the event time and ``sol.result`` is
            ``diffrax.RESULTS.event_occurred``.
        progress_meter: a ``diffrax.AbstractProgressMeter``, e.g.
            ``diffrax.TqdmProgressMeter()`` (progress in t from t0 to t1); default none.

    Returns:
        A ``diffrax.Solution``: ``sol.ts`` and ``sol.ys`` hold the saved times and tokens,
        ``sol.stats`` the step counts, ``sol.result`` the outcome.

    Raises:
        ValueError: on bad input, naming the argument (e.g. ``x0`` not on the sphere,
            ``saveat`` together with ``ts``).
        equinox.EquinoxRuntimeError: when ``throw`` and the solve fails (see ``throw``).

    **Differentiation.** The default adjoint gives exact reverse-mode derivatives
    (``jax.grad``, ``jax.jacrev``) of ``sol.ys`` with respect to ``x0``, ``t1`` and every array
    inside ``field`` and ``args``; ``adjoint=diffrax.ForwardMode()`` gives forward mode
    (``jax.jvp``, ``jax.jacfwd``); ``diffrax.BacksolveAdjoint`` is an approximate
    (continuous-adjoint) alternative with O(1) memory. Avoid it for clustering at long horizons:
    it re-integrates x(t) backwards from a clustered state, which is exponentially unstable
    (measured: at t1 = 10 in float32 its gradient was 59× the exact one;
    docs/benchmarks.md#bench-grad). For exact gradients in bounded memory pass
    ``adjoint=diffrax.RecursiveCheckpointAdjoint(checkpoints=k)``; for the same exact gradient
    at lower cost, with memory per accepted step, pass :class:`attnflow.StoredStepAdjoint`
    (no events, no forward mode; its cost against the default adjoint is measured on the
    benchmarks page, docs/benchmarks.md#bench-grad).

    **Wrap gradients in** ``eqx.filter_jit``. Outside ``jit``, each call of ``jax.grad`` of a
    function that calls ``solve`` traces and compiles the solve and its adjoint again (seconds
    per call even at n = 16). Jit the loss (or the whole training step) once with
    ``eqx.filter_jit`` (which accepts fields, i.e. modules holding arrays, as arguments) and
    every later call reuses the compiled program.

    Example:
        >>> import diffrax, equinox as eqx, jax, jax.numpy as jnp, jax.random as jr
        >>> import attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 8, 3)
        >>> saveat = diffrax.SaveAt(t1=True, dense=True)  # x(t1), and x(t) for any t in [0, t1]
        >>> sol = af.solve(af.SelfAttention(1.0), x0, 5.0, saveat=saveat)
        >>> sol.ys.shape, sol.evaluate(2.5).shape
        ((1, 8, 3), (8, 3))
        >>> @eqx.filter_jit
        ... def loss(field, x0):
        ...     x = af.solve(field, x0, 2.0).ys[-1]
        ...     return jnp.sum(x[:, 0])
        >>> grads = eqx.filter_grad(loss)(af.SelfAttention(1.0, Q=jnp.eye(3)), x0)
        >>> grads.Q.shape
        (3, 3)
    """
    if stepsize_controller is not None and (rtol is not None or atol is not None):
        import warnings

        given = " and ".join(name for name, v in (("rtol", rtol), ("atol", atol)) if v is not None)
        warnings.warn(
            f"{given}: ignored, because stepsize_controller={type(stepsize_controller).__name__}"
            "(...) is given; set the tolerances on the controller (e.g. "
            "diffrax.PIDController(rtol=..., atol=...))",
            UserWarning,
            stacklevel=2,
        )
    rtol = 1e-6 if rtol is None else rtol
    atol = 1e-9 if atol is None else atol
    return integrate(
        field,
        check_tokens(x0, "x0"),
        t1,
        on_sphere=True,
        t0=t0,
        ts=ts,
        solver=solver,
        rtol=rtol,
        atol=atol,
        dt0=dt0,
        max_steps=max_steps,
        adjoint=adjoint,
        args=args,
        throw=throw,
        stepsize_controller=stepsize_controller,
        differentiable_twice=differentiable_twice,
        saveat=saveat,
        event=event,
        progress_meter=progress_meter,
    )


@inside_engine()  # the fields' traced checks are left out of the loop (x0 checked once)
def integrate(
    field,
    x0,
    t1,
    *,
    on_sphere: bool,
    t0=0.0,
    ts=None,
    solver=None,
    rtol=1e-6,
    atol=1e-9,
    dt0=None,
    max_steps="auto",
    adjoint=None,
    args=None,
    throw=True,
    stepsize_controller=None,
    differentiable_twice=False,
    saveat=None,
    event=None,
    progress_meter=None,
):
    """:func:`solve` for checked initial states ``x0``: on the sphere (``on_sphere``: the field
    read at y/|y|, everything saved normalised) or in R^{n×d} (the residual stream of the
    off-sphere normalisation schemes). Both get solve's argument checks, step cap and diagnosis
    of a failed solve."""
    throw = check_bool(throw, "throw")
    differentiable_twice = check_bool(differentiable_twice, "differentiable_twice")
    check_solve_objects(field, solver, adjoint, stepsize_controller, progress_meter)
    if isinstance(adjoint, StoredStepAdjoint):
        check_reverse_mode_only(
            (field, x0, t1, t0, args), "adjoint", "StoredStepAdjoint (a custom reverse pass)"
        )
    dtype = jnp.result_type(x0)
    t0, t1, t1_value, rtol, atol, max_steps, dt0 = _check_solve_arguments(
        t0, t1, rtol, atol, max_steps, dt0, dtype
    )
    if solver is None:
        # The default scan over Runge-Kutta stages has a custom VJP that forward mode cannot enter.
        solver = diffrax.Tsit5(scan_kind="bounded") if differentiable_twice else diffrax.Tsit5()
    if adjoint is None and differentiable_twice:
        adjoint = diffrax.DirectAdjoint()
    if stepsize_controller is None:
        stepsize_controller = diffrax.PIDController(rtol=rtol, atol=atol)
        jump_ts = field.jump_times if isinstance(field, AbstractField | AbstractPureField) else None
        if jump_ts is not None and jnp.size(jump_ts) > 0:
            # Step exactly to each discontinuity in t instead of letting the error estimate find it.
            stepsize_controller = diffrax.ClipStepSizeController(
                stepsize_controller, jump_ts=jnp.asarray(jump_ts, dtype)
            )
    # BacksolveAdjoint rejects SaveAt(fn=...): normalise its saved values afterwards instead.
    backsolve = on_sphere and isinstance(adjoint, diffrax.BacksolveAdjoint)
    save_fn = {"fn": _save_normalized} if on_sphere and not backsolve else {}
    if saveat is not None:
        saveat = _user_saveat(saveat, ts, backsolve, dtype, t0, t1)
    elif ts is None:
        saveat = diffrax.SaveAt(t1=True, **save_fn)
    else:
        ts = check_real(as_array(ts, "ts"), "ts")  # complex times would lose their imaginary part
        ts = check_save_times(jnp.asarray(ts, dtype=dtype), t0, t1)
        saveat = diffrax.SaveAt(ts=ts, **save_fn)
    _check_event(event)
    kwargs = {} if adjoint is None else {"adjoint": adjoint}
    if progress_meter is not None:
        kwargs["progress_meter"] = progress_meter
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_OnSphere(field) if on_sphere else field),
        solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=x0,
        args=args,
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        max_steps=max_steps,
        event=event,
        # Failures are raised below, with a diagnosis diffrax cannot make.
        throw=False,
        **kwargs,
    )
    if throw:
        sol = _check_solution(sol, field, t0, x0, args, max_steps, t1_value)
    if backsolve:
        sol = eqx.tree_at(lambda s: s.ys, sol, jax.tree_util.tree_map(unit_rows, sol.ys))
    if on_sphere and sol.interpolation is not None:
        sol = eqx.tree_at(lambda s: s.interpolation, sol, _DenseOnSphere(sol.interpolation))
    return sol
