"""Noisy self-attention: the SDE on (S^{d-1})^n of docs/maths.md §1.10 (GLPR Problem 7)."""

from collections.abc import Callable
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float, PRNGKeyArray

from ._check import (
    check_beta,
    check_bool,
    check_key,
    check_tokens,
    inside_engine,
    is_traced,
)
from ._integrators._sde import solve_fixed_step_sde
from ._solve import check_solve_objects
from ._sphere import project_tangent, unit_rows


def _projector(y, scale):
    """w ↦ scale · P_y w with P_y = I − y yᵀ/|y|² row-wise; w is (n, d) or a common (d,)."""

    def apply(w):
        w = jnp.broadcast_to(w, y.shape)
        return scale * project_tangent(y, w)

    return apply


def _check_sde_arguments(field, x0, sigma, key, form, common_noise, normalize):
    """Validate solve_sde's own arguments (times, step, save times, max_steps and throw are
    checked by the driver, :func:`solve_fixed_step_sde`); returns them checked."""
    key = None if key is None else check_key(key)
    x0 = check_tokens(x0, "x0")
    sigma = check_beta(sigma, name="sigma")
    common_noise = check_bool(common_noise, "common_noise")
    normalize = check_bool(normalize, "normalize")
    if form not in ("stratonovich", "ito"):
        raise ValueError(f"form: expected 'stratonovich' or 'ito', got {form!r}")
    if field is not None and not callable(field):
        raise ValueError(f"field: expected a vector field or None, got {type(field).__name__}")
    return key, x0, sigma, common_noise, normalize


def _check_field_at_start(field, t0, x0, args):
    """Eagerly, before compiling the SDE solve: the drift at (t0, x0) must be finite (an
    overflowing e^(β⟨x, y⟩) or NaN parameters would otherwise fail only after compilation).
    One field evaluation; skipped when anything is traced, and under ``jit`` (where the
    evaluation itself is staged: its result is a tracer even for concrete inputs, issue 44 item
    8; the unused evaluation is then dropped from the program)."""
    if field is None or any(is_traced(leaf) for leaf in jax.tree.leaves((field, t0, x0, args))):
        return
    with inside_engine():  # under jit: no traced check of x0 added (checked by check_tokens)
        finite = jnp.all(jnp.isfinite(field(t0, x0, args)))
    if is_traced(finite):
        return
    if not bool(finite):
        raise ValueError(
            "field: the drift is not finite at the initial state (t0, x0), so no step can "
            "succeed. Likely causes: exp(β⟨x_i, x_j⟩) overflowing (normalization='n' overflows "
            "for β > 88 in float32 and β > 709 in float64: use float64 or the softmax "
            "normalisation), or NaN/inf in the field's parameters (β, Q, K, V) or in args"
        )


def _check_state_kept(sol):
    # The raw state overflows (or underflows to 0) when dt is far too large for σ: a step
    # multiplies |y_i| by about 1 + O(σ dt). Checked once on the saved values, not per step.
    ok = sol.result == diffrax.RESULTS.successful
    lost = ok & ~jnp.all(jnp.isfinite(unit_rows(sol.ys)))
    message = (
        "solve_sde: the solver's state overflowed or collapsed to 0 (|y_i| changes by a "
        "factor of about 1 + σ·dt per step): dt is too large for sigma; lower dt"
    )
    if is_traced(lost):
        sol = eqx.error_if(sol, lost, message)
    elif bool(lost):
        raise eqx.EquinoxRuntimeError(message)
    return sol


def solve_sde(
    field: Callable | None,
    x0: Float[Array, "n d"],
    t1,
    *,
    sigma,
    key: PRNGKeyArray,
    t0=0.0,
    ts=None,
    common_noise: bool = False,
    form: Literal["stratonovich", "ito"] = "stratonovich",
    solver: diffrax.AbstractSolver | None = None,
    dt=1e-2,
    brownian: Literal["tree", "fast"] = "tree",
    max_steps: int | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    args=None,
    throw: bool = True,
    normalize: bool = True,
) -> diffrax.Solution:
    r"""Solve noisy self-attention on (S^{d-1})^n (docs/maths.md §1.10), fixed step ``dt``.

    Stratonovich form (default)::

        dx_i = F_i(x) dt + √(2σ) P^⊥_{x_i} ∘ dW_i,

    Itô form (``form="ito"``), the same process::

        dx_i = [F_i(x) − σ(d−1) x_i] dt + √(2σ) P^⊥_{x_i} dW_i.

    A single token without interaction (F = 0) is Brownian motion on S^{d-1} with generator σΔ,
    so E⟨x(t), e⟩ = e^{−σ(d−1)t}⟨x(0), e⟩. The paper only poses the question (Problem 7,
    §9.4); this SDE is the natural one derived in docs/maths.md §1.10.

    **Main arguments**
        field: the interaction F (any attnflow field), or ``None`` for no interaction.
        x0: (n, d) tokens on the unit sphere.
        t1: final time.
        sigma: noise strength σ ≥ 0 (differentiable).
        key: PRNG key of the ``VirtualBrownianTree``; the solution is a deterministic,
            differentiable function of (x0, field, σ) for a fixed key.
        common_noise: ``False``: independent Brownian motions W_i ∈ R^d per token (shape (n, d));
            ``True``: one Brownian motion W ∈ R^d shared by all tokens (dW_i = dW).
        ts: save times (on the ``dt`` grid: diffrax interpolates SDE paths linearly); default t1
            only. ``sol.ys`` has shape (len(ts), n, d).

    **Other arguments**
        form: ``"stratonovich"`` (default solver ``SlowRK``) or ``"ito"`` (default ``Euler``,
            i.e. Euler–Maruyama). SlowRK keeps the raw state close to the sphere, with a small
            bias in the mean; Euler–Maruyama is unbiased in the mean but lets |y_i| wander by
            O(√(σ dt)) along single paths (measurements: docs/benchmarks.md#bench-noise).
        solver: any diffrax SDE solver consistent with ``form``.
        dt: the constant step.
        brownian: ``"tree"`` (default): a ``diffrax.VirtualBrownianTree`` (tolerance dt/4):
            deterministic given ``key`` and differentiable. ``"fast"``: a
            ``diffrax.UnsafeBrownianPath``, a fresh Gaussian increment per step, ~100× cheaper
            for per-token noise (n·d Brownian coordinates; measured in
            docs/benchmarks.md#bench-noise), but not bit-reproducible and not
            reverse-mode differentiable (it runs with ``adjoint=diffrax.ForwardMode()``): for
            forward Monte Carlo.
        max_steps: default ⌈(t1 − t0)/dt⌉ + 1 (needs concrete t0, t1; pass it otherwise).
        adjoint: default ``RecursiveCheckpointAdjoint()`` (exact reverse mode) with the tree.
        args: passed to ``field``.
        normalize: return the saved states projected on the sphere (default, as
            :func:`attnflow.solve` does); ``False`` returns the solver's raw state y, whose norm
            measures the scheme's error.

    The sphere: the solver's state y is allowed off the sphere and both coefficients are
    evaluated at x = y/|y| and scaled by |y| (homogeneous of degree 1):
    dy_i = |y_i| F_i(x) dt + |y_i| √(2σ) P_{x_i} ∘ dW_i (Itô: the drift gains −σ(d−1) y_i).
    Then |y_i| is an exact invariant of both forms, and x = y/|y| follows the SDE on the sphere
    above whatever |y_i| a numerical scheme drifts to: with a step too large for σ the raw state
    can leave the sphere far, but the saved directions keep the right dynamics, to the scheme's
    accuracy. See ``form`` for the measured deviations of the raw state.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 6, 3)
        >>> sol = af.solve_sde(af.SelfAttention(1.0), x0, 1.0, sigma=0.1, key=jr.key(1))
        >>> sol.ys.shape, bool(jnp.abs(jnp.linalg.norm(sol.ys, axis=-1) - 1).max() < 1e-2)
        ((1, 6, 3), True)
    """
    check_solve_objects(field, solver, adjoint, field_optional=True)
    key, x0, sigma, common_noise, normalize = _check_sde_arguments(
        field, x0, sigma, key, form, common_noise, normalize
    )
    n, d = x0.shape
    dtype = jnp.result_type(x0)
    _check_field_at_start(field, t0, x0, args)
    if solver is None:
        solver = diffrax.SlowRK() if form == "stratonovich" else diffrax.Euler()
    sigma = jnp.asarray(sigma, dtype=dtype)
    scale = jnp.sqrt(2 * sigma)

    def drift(t, y, args):
        r = jnp.linalg.norm(y, axis=-1, keepdims=True)
        value = jnp.zeros_like(y) if field is None else r * field(t, y / r, args)
        if form == "ito":
            value = value - sigma * (d - 1) * y
        return value

    noise = jax.ShapeDtypeStruct((d,) if common_noise else (n, d), dtype)

    def diffusion(t, y, args):
        r = jnp.linalg.norm(y, axis=-1, keepdims=True)
        return lx.FunctionLinearOperator(_projector(y, scale * r), noise)

    # BacksolveAdjoint rejects SaveAt(fn=...): normalise its saved values afterwards instead.
    backsolve = isinstance(adjoint, diffrax.BacksolveAdjoint)
    sol = solve_fixed_step_sde(
        drift,
        diffusion,
        noise,
        x0,
        t0,
        t1,
        dt=dt,
        key=key,
        solver=solver,
        brownian=brownian,
        ts=ts,
        max_steps=max_steps,
        adjoint=adjoint,
        args=args,
        throw=throw,
        save_fn=(lambda t, y, args: unit_rows(y)) if normalize and not backsolve else None,
    )
    if throw:
        sol = _check_state_kept(sol)
    if normalize and backsolve:
        sol = eqx.tree_at(lambda s: s.ys, sol, unit_rows(sol.ys))
    return sol
