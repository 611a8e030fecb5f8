"""Integrating a field: adaptive solves with diffrax, and the discrete Transformer (layers)."""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._check import check_tokens
from ._sphere import normalize


class _OnSphere(eqx.Module):
    """Evaluate ``field`` at y/|y|: the flow then conserves |y_i| exactly (MATH.md §1.12).

    A module rather than a closure so that the field's arrays are leaves of the diffrax term,
    which ``BacksolveAdjoint`` needs in order to differentiate with respect to them.
    """

    field: Callable

    def __call__(self, t, y, args):
        x = y / jnp.linalg.norm(y, axis=-1, keepdims=True)
        return self.field(t, x, args)


def _save_normalized(t, y, args):
    return y / jnp.linalg.norm(y, axis=-1, keepdims=True)


def solve(
    field: Callable,
    x0: Float[Array, "n d"],
    t1,
    *,
    t0=0.0,
    ts=None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    dt0=None,
    max_steps: int | None = 4096,
    adjoint: diffrax.AbstractAdjoint | None = None,
    args=None,
    throw: bool = True,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    differentiable_twice: bool = False,
) -> diffrax.Solution:
    """Solve ẋ = field(t, x, args) on (S^{d-1})^n from x(t0) = x0 with diffrax.

    **Main arguments**
        field: a vector field ``field(t, x, args) -> (n, d)`` tangent at x (any attnflow field,
            or any callable with diffrax's signature).
        x0: (n, d) initial tokens on the unit sphere (checked; see :func:`attnflow.normalize`).
        t1: final time (layers are time).
        ts: optional increasing save times in [t0, t1]; ``sol.ys`` then has shape
            (len(ts), n, d). Without ``ts`` only t1 is saved: ``sol.ys`` has shape (1, n, d).

    **Other arguments**
        solver: any diffrax solver; default ``Tsit5()`` (order 5) with a PID controller.
        rtol, atol: tolerances of the default PID controller. Float32 tokens get
            atol ≥ 1e-6 and rtol ≥ 1e-5, the tightest tolerances float32 can honour.
        dt0: initial step; ``None`` lets diffrax choose it.
        stepsize_controller: overrides the PID controller (e.g. ``ConstantStepSize()``, with dt0).
            When it is not given and ``field`` has a ``jump_times`` attribute (e.g.
            :class:`attnflow.PiecewiseConstant`), the PID controller steps exactly to those times.
        max_steps: diffrax's step cap; keep it tight under ``vmap``.
        adjoint: diffrax adjoint; default ``RecursiveCheckpointAdjoint()`` (exact reverse mode).
        args: passed to ``field``.
        throw: raise if the solve fails; set False under ``vmap`` and inspect ``sol.result``.
        differentiable_twice: make second and mixed derivatives work. The default solver
            becomes ``Tsit5(scan_kind="bounded")`` and the default adjoint ``DirectAdjoint()``,
            which together support every composition of ``jax.grad``, ``jax.jvp``,
            ``jax.jacfwd``, ``jax.jacrev`` and ``jax.hessian`` (measured with diffrax 0.7.2).
            Cheaper alternatives for one composition: ``adjoint=RecursiveCheckpointAdjoint()``
            (with the bounded Tsit5) supports forward-over-reverse only (``jax.hessian``,
            ``jacfwd(grad)``), and ``adjoint=ForwardMode()`` forward-over-forward only.

    **Differentiation.** The default adjoint gives exact reverse-mode derivatives
    (``jax.grad``, ``jax.jacrev``) of ``sol.ys`` with respect to ``x0``, ``t1`` and every array
    inside ``field`` and ``args``; ``adjoint=diffrax.ForwardMode()`` gives forward mode
    (``jax.jvp``, ``jax.jacfwd``); ``diffrax.BacksolveAdjoint`` is an approximate
    (continuous-adjoint) alternative with O(1) memory. Avoid it for clustering at long horizons:
    it re-integrates x(t) backwards from a clustered state, which is exponentially unstable
    (measured: at t1 = 10 in float32 its gradient was 59× the exact one; benchmarks/RESULTS.md).
    For exact gradients in bounded memory pass
    ``adjoint=diffrax.RecursiveCheckpointAdjoint(checkpoints=k)``.

    The right-hand side is evaluated at y/|y| (so |x_i| is an exact invariant of the ODE even in
    the repulsive case V = −I, MATH.md §1.12) and saved values are normalised, so ``sol.ys`` lies
    on the sphere to rounding.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 8, 3)
        >>> sol = af.solve(af.SelfAttention(1.0), x0, 5.0)
        >>> sol.ys.shape
        (1, 8, 3)
    """
    x0 = check_tokens(x0, "x0")
    dtype = jnp.result_type(x0)
    if jnp.finfo(dtype).bits < 64:
        rtol, atol = max(rtol, 1e-5), max(atol, 1e-6)
    # As arrays the tolerances are traced, not static: another tolerance reuses the compiled solve.
    rtol, atol = jnp.asarray(rtol, dtype), jnp.asarray(atol, dtype)
    # diffrax promotes y to the time dtype: keep times in the tokens' precision.
    t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    if dt0 is not None:
        dt0 = jnp.asarray(dt0, dtype)
    if solver is None:
        # The default scan over Runge-Kutta stages has a custom VJP that forward mode cannot enter.
        solver = diffrax.Tsit5(scan_kind="bounded") if differentiable_twice else diffrax.Tsit5()
    if adjoint is None and differentiable_twice:
        adjoint = diffrax.DirectAdjoint()
    if stepsize_controller is None:
        stepsize_controller = diffrax.PIDController(rtol=rtol, atol=atol)
        jump_ts = getattr(field, "jump_times", None)
        if jump_ts is not None and jnp.size(jump_ts) > 0:
            # Step exactly to each discontinuity in t instead of letting the error estimate find it.
            stepsize_controller = diffrax.ClipStepSizeController(
                stepsize_controller, jump_ts=jnp.asarray(jump_ts, dtype)
            )
    # BacksolveAdjoint rejects SaveAt(fn=...): normalise its saved values afterwards instead.
    backsolve = isinstance(adjoint, diffrax.BacksolveAdjoint)
    save_fn = {} if backsolve else {"fn": _save_normalized}
    if ts is None:
        saveat = diffrax.SaveAt(t1=True, **save_fn)
    else:
        ts = jnp.asarray(ts, dtype=dtype)
        if ts.ndim != 1:
            raise ValueError(f"ts: expected a 1-d array of save times, got shape {ts.shape}")
        saveat = diffrax.SaveAt(ts=ts, **save_fn)
    kwargs = {} if adjoint is None else {"adjoint": adjoint}
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_OnSphere(field)),
        solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=x0,
        args=args,
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        max_steps=max_steps,
        throw=throw,
        **kwargs,
    )
    if backsolve:
        sol = eqx.tree_at(lambda s: s.ys, sol, _save_normalized(None, sol.ys, None))
    return sol


def layers(
    field: Callable, x0: Float[Array, "n d"], num_layers: int, step, *, args=None, t0=0.0
) -> Float[Array, "layers n d"]:
    """The discrete Transformer with layer normalisation (post-LN), MATH.md §1.12:

        x_{k+1} = normalize(x_k + step · field(t0 + k·step, x_k, args)),   k = 0 … num_layers − 1.

    A first-order retraction of the flow: ``layers(f, x0, T/h, h)[-1]`` → ``solve(f, x0, T)``
    with error O(h).

    Returns:
        (num_layers + 1, n, d): every layer's tokens, x0 first.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 8, 3)
        >>> af.layers(af.SelfAttention(1.0), x0, 10, 0.1).shape
        (11, 8, 3)
    """
    x0 = check_tokens(x0, "x0")
    if int(num_layers) < 0:
        raise ValueError(f"num_layers: expected a non-negative integer, got {num_layers}")

    def one_layer(x, k):
        x_next = normalize(x + step * field(t0 + k * step, x, args))
        return x_next, x_next

    _, xs = jax.lax.scan(one_layer, x0, jnp.arange(int(num_layers)))
    return jnp.concatenate([x0[None], xs], axis=0)
