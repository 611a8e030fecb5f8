r"""The one fixed-step SDE driver: dy = f(t, y) dt + g(t, y) dW on a constant step.

Used by :func:`attnflow.solve_sde` (noisy self-attention, docs/maths.md §1.10) and by the
homogenised limits of deep random attention (:func:`attnflow.solve_homogenized`, arXiv:2604.01978).
Each caller supplies its drift f, its diffusion g (a ``lineax`` operator from the noise space to
the state space) and the shape of the noise; the driver owns the Brownian path (a reproducible
``VirtualBrownianTree`` or a fast ``UnsafeBrownianPath``), the step count, the save times and the
call to ``diffrax.diffeqsolve``.
"""

import math
from collections.abc import Callable
from typing import Literal

import diffrax
import jax
import jax.numpy as jnp

from .._check import (
    MAX_STEPS_LIMIT,
    as_array,
    check_bool,
    check_budget,
    check_finite_scalar,
    check_max_steps,
    check_positive_scalar,
    check_save_times,
    inside_engine,
    is_traced,
)

# Stochastic Runge–Kutta solvers (SlowRK, SPaRK, ...) also need the Lévy area of each increment.
_LEVY_AREA = {
    diffrax.AbstractBrownianIncrement: diffrax.BrownianIncrement,
    diffrax.AbstractSpaceTimeLevyArea: diffrax.SpaceTimeLevyArea,
    diffrax.AbstractSpaceTimeTimeLevyArea: diffrax.SpaceTimeTimeLevyArea,
}


def check_sde_options(dt, brownian):
    """``brownian`` is ``"tree"`` or ``"fast"``; ``dt`` a finite step > 0. Returns ``dt``
    (wrapped with ``eqx.error_if`` when traced; use the returned value)."""
    if brownian not in ("tree", "fast"):
        raise ValueError(f"brownian: expected 'tree' or 'fast', got {brownian!r}")
    return check_positive_scalar(dt, "dt", what="step")


def default_max_steps(t0, t1, dt) -> int:
    """⌈(t1 − t0)/dt⌉ + 1 for concrete times (the last step may be partial), refused past
    ``MAX_STEPS_LIMIT`` before anything is compiled."""
    if is_traced(t0) or is_traced(t1) or is_traced(dt):
        raise ValueError("max_steps: required when t0, t1 or dt are traced")
    steps = math.ceil((float(t1) - float(t0)) / float(dt) * (1 + 1e-9)) + 1
    check_budget(
        "dt",
        steps,
        MAX_STEPS_LIMIT,
        what="solver steps ((t1 - t0)/dt + 1)",
        hint="raise dt, shorten the horizon, or pass max_steps explicitly if you mean it",
    )
    return steps


def check_sde_arguments(t0, t1, dt, brownian, ts, max_steps, throw, dtype):
    """The arguments every fixed-step SDE solve shares (:func:`attnflow.solve_sde`, the
    homogenised limits), checked in one place: finite times t0 <= t1, a finite step dt > 0,
    save times from t0 to t1, an integer ``max_steps`` >= 1 (default from the horizon), a bool
    ``throw``. Returns (t0, t1, dt, ts, max_steps, throw), checked."""
    t0, t1 = check_finite_scalar(t0, "t0"), check_finite_scalar(t1, "t1")
    if not (is_traced(t0) or is_traced(t1)) and float(t1) < float(t0):
        raise ValueError(
            f"t1: expected a final time t1 >= t0 = {float(t0)} (the SDE runs forward in time), "
            f"got {float(t1)}"
        )
    dt = check_sde_options(dt, brownian)
    if ts is not None:
        ts = check_save_times(jnp.asarray(as_array(ts, "ts"), dtype=dtype), t0, t1)
    max_steps = check_max_steps(max_steps)
    if max_steps is None:
        max_steps = default_max_steps(t0, t1, dt)
    return t0, t1, dt, ts, max_steps, check_bool(throw, "throw")


def brownian_path(key, t0, t1, dt, noise: jax.ShapeDtypeStruct, brownian: str, solver=None):
    """The Brownian motion W of shape ``noise.shape`` on [t0, t1].

    ``"tree"``: ``diffrax.VirtualBrownianTree(t0, t1, tol=dt/4, shape=noise, key=key)``, a
    deterministic function of ``key`` resolving every step and stage time; ``"fast"``:
    ``diffrax.UnsafeBrownianPath``. The Lévy area is the one ``solver`` needs (none for Euler).
    """
    minimal = getattr(solver, "minimal_levy_area", None)
    levy = _LEVY_AREA.get(minimal, diffrax.BrownianIncrement)
    if brownian == "fast":
        return diffrax.UnsafeBrownianPath(shape=noise, key=key, levy_area=levy)
    return diffrax.VirtualBrownianTree(t0, t1, tol=dt / 4, shape=noise, key=key, levy_area=levy)


def _save_at(ts, fn) -> diffrax.SaveAt:
    kwargs = {} if fn is None else {"fn": fn}
    if ts is None:
        return diffrax.SaveAt(t1=True, **kwargs)
    return diffrax.SaveAt(ts=ts, **kwargs)


@inside_engine()  # the fields' traced checks are left out of the loop (x0 checked once)
def solve_fixed_step_sde(
    drift: Callable,
    diffusion: Callable | None,
    noise: jax.ShapeDtypeStruct | None,
    y0,
    t0,
    t1,
    *,
    dt,
    key=None,
    solver: diffrax.AbstractSolver | None = None,
    brownian: Literal["tree", "fast"] = "tree",
    ts=None,
    max_steps: int | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    args=None,
    throw: bool = True,
    save_fn: Callable | None = None,
) -> diffrax.Solution:
    r"""Solve dy = drift(t, y, args) dt + diffusion(t, y, args) dW on a constant step ``dt``.

    Args:
        drift: (t, y, args) ↦ an array of y's shape.
        diffusion: (t, y, args) ↦ a ``lineax`` linear operator from the noise space (``noise``)
            to y's space; ``None`` for an ODE (then ``noise`` and ``key`` are unused).
        noise: shape and dtype of the Brownian motion W.
        y0, t0, t1: initial state and time interval (t0, t1, dt are cast to y0's dtype so that
            float32 states stay float32).
        dt: the constant step.
        key: PRNG key of W (required with a diffusion).
        solver: default ``diffrax.Euler()`` (Euler–Maruyama, Itô).
        brownian: ``"tree"`` or ``"fast"`` (:func:`brownian_path`); ``"fast"`` runs with
            ``adjoint=diffrax.ForwardMode()`` unless one is given (diffrax refuses reverse mode
            through it).
        ts: save times (default t1 only); max_steps: default :func:`default_max_steps`.
        adjoint, args, throw: passed to ``diffrax.diffeqsolve``.
        save_fn: (t, y, args) ↦ saved value (``diffrax.SaveAt(fn=...)``); ``None`` saves y.

    Example:
        >>> import jax, jax.numpy as jnp, jax.random as jr, lineax as lx
        >>> from attnflow._integrators._sde import solve_fixed_step_sde
        >>> noise = jax.ShapeDtypeStruct((1,), jnp.float32)
        >>> g = lambda t, y, a: lx.DiagonalLinearOperator(jnp.ones(1, jnp.float32))
        >>> sol = solve_fixed_step_sde(lambda t, y, a: -y, g, noise, jnp.ones(1, jnp.float32),
        ...                            0.0, 1.0, dt=0.1, key=jr.key(0))
        >>> sol.ys.shape, sol.ys.dtype
        ((1, 1), dtype('float32'))
    """
    dtype = jnp.result_type(y0)
    t0, t1, dt, ts, max_steps, throw = check_sde_arguments(
        t0, t1, dt, brownian, ts, max_steps, throw, dtype
    )
    # Times in the state's dtype: float64 times would silently promote float32 states.
    t0, t1, dt = (jnp.asarray(v, dtype=dtype) for v in (t0, t1, dt))
    solver = diffrax.Euler() if solver is None else solver
    terms = diffrax.ODETerm(drift)
    if diffusion is not None:
        if key is None:
            raise ValueError("key: required for a stochastic equation, got None")
        path = brownian_path(key, t0, t1, dt, noise, brownian, solver)
        terms = diffrax.MultiTerm(terms, diffrax.ControlTerm(diffusion, path))
        if adjoint is None and brownian == "fast":
            adjoint = diffrax.ForwardMode()
    kwargs = {} if adjoint is None else {"adjoint": adjoint}
    return diffrax.diffeqsolve(
        terms,
        solver,
        t0=t0,
        t1=t1,
        dt0=dt,
        y0=y0,
        args=args,
        saveat=_save_at(ts, save_fn),
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=max_steps,
        throw=throw,
        **kwargs,
    )
