"""The one continuity-equation solver: ∂_t ρ + div(ρ X[ρ]) = κ⁻¹Δρ on a spectral grid, by diffrax.

The resolution check (the criterion, documented in :func:`solve_density`): with L the grid's
largest degree, the spectral tail of a state is τ(ρ) = ‖P_{>3L/4} ρ‖ / ‖ρ‖ (L²(σ) norms, by the
grid's quadrature), and a state is *resolved* when τ ≤ tol and min_nodes ρ ≥ −tol ‖ρ‖. A diffrax
event stops the solve at the end of the first step whose state is not resolved. The number of
degrees it needs is estimated from the decay of the tail: with r = ‖P_{>L/2}ρ‖ / ‖P_{>3L/4}ρ‖
the spectrum decays like e^{−sℓ}, s = 4 ln(r)/L, and the tail falls to tol at
L' = L + (4/3) ln(τ/tol)/s (reported as −1 when the spectrum does not decay).
"""

import typing
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Bool, Float, Int

from .._check import (
    as_array,
    check_bool,
    check_finite_scalar,
    check_positive_scalar,
    check_real,
    check_sa_normalization,
    check_save_times,
    check_static,
    expected,
    is_traced,
    public_names,
)
from .._solve import _check_solution, _check_solve_arguments, _scalar_array
from ._grid import AbstractDensityGrid, check_grid_coefficients

# ---------------------------------------------------------------------------------------------
# Diagnostics of a state.


def _norm2(grid, coefficients):
    values = grid.to_values(coefficients)
    return jnp.sum(grid.quadrature_weights().astype(values.dtype) * values * values)


def _band(grid, coefficients, cut):
    # 4·degree > 4·cut in integers: exact, and no int/float promotion.
    return jnp.where(4 * grid.degrees() > round(4 * cut), coefficients, 0)


def spectral_tail(grid: AbstractDensityGrid, coefficients: Array) -> Float[Array, ""]:
    """τ(ρ) = ‖P_{ℓ > 3L/4} ρ‖ / ‖ρ‖, the relative L²(σ) norm of the top quarter of the degrees.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(8)
        >>> c = jnp.zeros(17).at[0].set(1.0).at[8].set(1e-3)   # 1 + 1e-3 cos 8θ
        >>> round(float(mf.spectral_tail(grid, c)), 8)
        0.00070711
    """
    grid, coefficients = check_grid_coefficients(grid, coefficients)
    total = _norm2(grid, coefficients)
    if not is_traced(total) and not float(total) > 0:
        expected("coefficients", "a non-zero density (its tail is relative to its norm)", "= zero")
    return _tail(grid, coefficients)


def _tail(grid, coefficients):
    L = grid.max_degree()
    top = _norm2(grid, _band(grid, coefficients, 0.75 * L))
    return jnp.sqrt(top / _norm2(grid, coefficients))


def _tail_and_decay(grid, coefficients):
    L = grid.max_degree()
    total = _norm2(grid, coefficients)
    half = _norm2(grid, _band(grid, coefficients, 0.5 * L))
    top = _norm2(grid, _band(grid, coefficients, 0.75 * L))
    tail = jnp.sqrt(top / total)
    ratio = jnp.sqrt(half / jnp.maximum(top, jnp.finfo(total.dtype).tiny))
    return tail, 4 * jnp.log(ratio) / L


def _modes_needed(grid, coefficients, tol):
    """The degree L' at which the tail would fall to tol (see the module docstring)."""
    L = grid.max_degree()
    tail, decay = _tail_and_decay(grid, coefficients)
    needed = L + (4 / 3) * jnp.log(jnp.maximum(tail, tol) / tol) / jnp.maximum(decay, 1e-300)
    needed = jnp.where(decay > 0.05 / L, jnp.ceil(needed), -1.0)
    return jnp.minimum(needed, 10**6).astype(jnp.int32)


def _unresolved(grid, coefficients, tol):
    values = grid.to_values(coefficients)
    norm = jnp.sqrt(jnp.sum(grid.quadrature_weights().astype(values.dtype) * values * values))
    return (
        (_tail(grid, coefficients) > tol)
        | (jnp.min(values) < -tol * norm)
        | ~(jnp.all(jnp.isfinite(coefficients)))
    )


class _Unresolved(eqx.Module):
    """The event's condition: the state is not resolved (a module, so that the compiled solve
    is reused across calls)."""

    grid: AbstractDensityGrid
    tol: Array

    def __call__(self, t, y, args, **kwargs):
        return _unresolved(self.grid, y, self.tol)


class _Steady(eqx.Module):
    """The steady-state event's condition: ‖∂_tρ‖ ≤ tol·‖ρ‖ (L²(σ) norms), one more evaluation
    of the right-hand side per step."""

    grid: AbstractDensityGrid
    rate: eqx.Module
    tol: Array

    def __call__(self, t, y, args, **kwargs):
        rate = self.rate(t, y, args)
        return _norm2(self.grid, rate) <= self.tol**2 * _norm2(self.grid, y)


# ---------------------------------------------------------------------------------------------
# The terms.


class _Transport(eqx.Module):
    """−div(ρ λX[ρ]): the explicit (non-stiff) part."""

    grid: AbstractDensityGrid
    beta: Array
    value_scale: Array
    normalization: str = eqx.field(static=True)

    def __call__(self, t, y, args):
        rho = self.grid.to_values(y)
        velocity = self.grid.velocity(y, self.beta, self.normalization)
        return -self.value_scale * self.grid.divergence(rho[:, None] * velocity)


class _Diffusion(eqx.Module):
    """κ⁻¹Δρ, diagonal in the coefficients: the stiff part."""

    eigenvalues: Array
    inverse_kappa: Array

    def __call__(self, t, y, args):
        return self.inverse_kappa * self.eigenvalues * y


class _Both(eqx.Module):
    transport: _Transport
    diffusion: _Diffusion | None

    def __call__(self, t, y, args):
        out = self.transport(t, y, args)
        return out if self.diffusion is None else out + self.diffusion(t, y, args)


class _DiagonalJacobian(lx.AbstractLinearSolver):
    """Solve A u = v for the Newton matrix A = I − γh κ⁻¹Λ of the implicit stages, which is
    diagonal in the coefficients: its diagonal is A·1, one matrix–vector product (diffrax would
    otherwise materialise and factor a dense (N, N) Jacobian, N the number of coefficients)."""

    def init(self, operator, options):
        ones = jax.tree.map(lambda s: jnp.ones(s.shape, s.dtype), operator.in_structure())
        return operator.mv(ones)

    def compute(self, state, vector, options):
        return jax.tree.map(jnp.divide, vector, state), lx.RESULTS.successful, {}

    def transpose(self, state, options):
        return state, options

    def conj(self, state, options):
        return state, options

    def assume_full_rank(self):
        return True

    def allow_dependent_columns(self, operator):
        return False

    def allow_dependent_rows(self, operator):
        return False


def _imex(solver) -> bool:
    return typing.get_origin(solver.term_structure) is diffrax.MultiTerm


# ---------------------------------------------------------------------------------------------
# The result.


class DensitySolution(eqx.Module):
    """The result of :func:`solve_density`.

    Attributes:
        ts: (T,) save times.
        coefficients: (T, …) the density's coefficients at ``ts`` (the grid's layout); entries
            after an early stop (an unresolved state) are inf, as diffrax fills them.
        grid: the grid.
        mass: (T,) ∫ρ dσ at ``ts`` (conserved to rounding).
        min_density: (T,) the minimum of ρ over the quadrature nodes.
        spectral_tail: (T,) τ(ρ) = ‖P_{>3L/4}ρ‖/‖ρ‖ (:func:`spectral_tail`).
        resolved: whether every accepted state was resolved (the solve reached t1, or stopped
            at a steady state).
        steady: whether the solve stopped at a steady state before t1 (``steady_tol``); the
            saved states after ``t_stop`` are then the final one, held.
        t_stop: the time the solve ended (t1, the end of the first unresolved step, or of the
            first steady one).
        modes_needed: the largest degree the state at ``t_stop`` needs for its tail to fall
            to the tolerance (the grid's own L when resolved; −1 when the spectrum does not
            decay at all, i.e. the density is near-singular).
        result: diffrax's result code (``diffrax.RESULTS.event_occurred`` for an early stop).
        stats: diffrax's statistics (``num_steps``, ``num_accepted_steps``, ...).

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(32)
        >>> rho0 = grid.from_values(1 + 0.5 * jnp.cos(grid.angles()))
        >>> sol = mf.solve_density(grid, rho0, 1.0, beta=1.0, normalization="n", ts=[0.0, 1.0])
        >>> sol.coefficients.shape, sol.values().shape, bool(sol.resolved)
        ((2, 65), (2, 97), True)
    """

    ts: Float[Array, " T"]
    coefficients: Array
    grid: AbstractDensityGrid
    mass: Float[Array, " T"]
    min_density: Float[Array, " T"]
    spectral_tail: Float[Array, " T"]
    resolved: Bool[Array, ""]
    steady: Bool[Array, ""]
    t_stop: Float[Array, ""]
    modes_needed: Int[Array, ""]
    result: diffrax.RESULTS
    stats: dict

    def values(self) -> Float[Array, "T m"]:
        """ρ at the grid's nodes at each save time, shape (T, m)."""
        return jax.vmap(self.grid.to_values)(self.coefficients)


# ---------------------------------------------------------------------------------------------
# Checks of the inputs.


def default_resolution_tol(dtype) -> float:
    return 1e-6 if jnp.finfo(dtype).bits >= 64 else 1e-4


def check_density(grid, density, name: str, tol):
    """Coefficients of a density on ``grid``: the grid's shape, real, finite, a positive mass,
    non-negative at the nodes and resolved (spectral tail ≤ tol); traced: ``eqx.error_if``."""
    if not isinstance(grid, AbstractDensityGrid):
        expected("grid", "an attnflow.meanfield grid (e.g. CircleGrid(modes))", grid)
    density = as_array(density, name)
    check_real(density, name)
    shape = jnp.shape(grid.degrees())
    if jnp.shape(density) != shape:
        raise ValueError(
            f"{name}: expected coefficients of shape {shape} (the grid's layout), got "
            f"{jnp.shape(density)}; build them with grid.from_values(rho_at_grid_nodes)"
        )
    kind = jnp.result_type(density)
    if not jnp.issubdtype(kind, jnp.floating) or jnp.finfo(kind).bits < 32:
        raise ValueError(f"{name}: expected float32 or float64 coefficients, got dtype {kind}")
    if not is_traced(density) and not bool(jnp.all(jnp.isfinite(density))):
        raise ValueError(f"{name}: expected finite coefficients, got NaN or inf")
    with public_names({"coefficients": name}):
        values = grid.to_values(density)
    weights = grid.quadrature_weights().astype(values.dtype)
    mass = jnp.sum(weights * values)
    norm = jnp.sqrt(jnp.sum(weights * values * values))
    tail = _tail(grid, density)
    finite = jnp.all(jnp.isfinite(density))
    messages = [
        f"{name}: expected finite coefficients, got NaN or inf",
        f"{name}: expected a density with a positive mass ∫ρ dσ",
        f"{name}: expected a non-negative density, got min ρ < −{tol:g}·‖ρ‖ at the grid's nodes",
        f"{name}: the density is not resolved by the grid: spectral tail ‖P_(>3L/4) ρ‖/‖ρ‖ > "
        f"{tol:g} (L = {grid.max_degree()}); use more modes",
    ]
    bad = [~finite, ~(mass > 0), jnp.min(values) < -tol * norm, tail > tol]
    if any(is_traced(b) for b in bad):
        index = jnp.argmax(jnp.stack(bad))
        return eqx.branched_error_if(density, jnp.any(jnp.stack(bad)), index, messages)
    for b, message in zip(bad, messages, strict=True):
        if bool(b):
            detail = ""
            if message is messages[2]:
                detail = f"; min ρ = {float(jnp.min(values)):.3g}, ‖ρ‖ = {float(norm):.3g}"
            elif message is messages[3]:
                needed = int(_modes_needed(grid, density, tol))
                more = f" (about {needed})" if needed > 0 else ""
                detail = (
                    f"; got tail {float(tail):.3g}: it needs more modes{more}. A random start "
                    "built from values at the nodes (noise) has every degree: perturb only low "
                    "degrees with attnflow.meanfield.random_perturbation(grid, key, "
                    "max_degree=..., amplitude=...)"
                )
            elif message is messages[1]:
                detail = f"; got {float(mass):.3g}"
            raise ValueError(message + detail)
    return density


def _unresolved_message(t_stop, tail, min_rho, needed, L, tol) -> str:
    need = (
        f"it needs about L = {needed} (the grid has L = {L})"
        if needed > 0
        else f"its spectrum does not decay at all at L = {L}: the density is near-singular "
        "(clusters collapsed towards points), which no spectral grid resolves; stop earlier, or "
        "add noise (kappa)"
    )
    return (
        f"solve_density: the density is no longer resolved at t = {t_stop:.6g}: spectral tail "
        f"‖P_(>3L/4) ρ‖/‖ρ‖ = {tail:.3g} (tolerance {tol:g}), min ρ = {min_rho:.3g}; {need}. "
        "Rerun with more modes, or with throw=False for the flagged result up to that time"
    )


# ---------------------------------------------------------------------------------------------
# The driver.


def solve_density(
    grid: AbstractDensityGrid,
    density0: Array,
    t1,
    *,
    beta,
    normalization: Literal["n", "softmax"] = "softmax",
    value_scale=1.0,
    kappa=None,
    t0=0.0,
    ts=None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    dt0=None,
    max_steps: int | None | Literal["auto"] = "auto",
    adjoint: diffrax.AbstractAdjoint | None = None,
    throw: bool = True,
    resolution_tol: float | None = None,
    steady_tol: float | None = None,
) -> DensitySolution:
    r"""Solve the mean-field (continuity) equation of self-attention for a density on a grid:

        ∂_t ρ + div(ρ λX[ρ]) = κ⁻¹ Δρ,
        X[ρ](x) = P_x ∫ e^{β⟨x,y⟩} y ρ(y) dσ(y) / Z,   Z = 1 (USA) or ∫ e^{β⟨x,y⟩} ρ dσ (SA),

    arXiv:2312.10794 eq. (3.4) with V = λI (λ = ``value_scale``), the density taken w.r.t. the
    uniform probability measure σ (ρ ≡ 1 uniform), so that n particles with weights 1/n follow
    the same field (:func:`attnflow.SelfAttention`); with ``kappa`` the noisy model of the
    particles dx = X dt + √(2/κ) dB (Kuramoto at β = 0: stationary order parameter
    r = I₁(κr)/I₀(κr)). USA is the Wasserstein gradient ascent of E_β
    (:func:`density_energy`). Time stepping is diffrax's with an adaptive PID controller:
    ``Tsit5`` without noise; with noise the IMEX ``KenCarp4`` takes the transport explicitly
    and the stiff diffusion implicitly (its Newton matrix is diagonal in the coefficients and
    solved as such), so the diffusion does not cap the step.

    **Honest resolution.** After every step the state is checked: the spectral tail
    τ = ‖P_{ℓ>3L/4}ρ‖/‖ρ‖ must stay ≤ ``resolution_tol`` and min ρ at the nodes ≥
    −``resolution_tol``·‖ρ‖. The first step that breaks either ends the solve (a diffrax event):
    with ``throw=True`` an error says when, and how many modes the state needs (estimated from
    the decay of the spectrum); with ``throw=False`` the result is flagged
    (``resolved = False``, ``t_stop``, ``modes_needed``). The solver never returns a ringing
    density as if it were resolved (under ``jax.jit``/``jax.grad`` the error comes from
    ``eqx.error_if`` with a fixed message; ``throw=False`` gives the numbers there too). The mass
    ∫ρ dσ is conserved to rounding (the divergence and the Laplacian have no degree-0 part).

    **Stopping at a steady state.** With ``steady_tol`` the solve also ends at the end of the
    first step whose state satisfies ‖∂_tρ‖ ≤ ``steady_tol``·‖ρ‖ (L²(σ) norms; ∂_tρ the whole
    right-hand side, one more evaluation of it per step), as diffrax's ``steady_state_event``
    does: ``steady`` is then True, ``t_stop`` is when, and the saved states after ``t_stop`` are
    the final one, held (within ``steady_tol``·(t − t_stop) of the state the solve would have
    reached if the rate stays as small; an unstable steady state would eventually leave).

    **Compiled once** per grid, shapes, dtype, ``normalization``, solver, adjoint,
    ``max_steps`` and noise-or-not: β, λ, κ, ``density0``, the times and every tolerance are
    traced arguments, so a new value of any of them reuses the compiled solve (the inputs are
    checked before it, in Python).

    Args:
        grid: the spectral grid (:class:`CircleGrid`, or the S² grid).
        density0: the initial density's coefficients (``grid.from_values(rho_at_nodes)``);
            checked: finite, positive mass, non-negative at the nodes, resolved.
        t1: final time.
        beta: β (any real; β < 0 is the repulsive-kernel variant, β = 0 Kuramoto);
            differentiable.
        normalization: ``"softmax"`` (SA, default) or ``"n"`` (USA).
        value_scale: λ of V = λI (λ < 0: repulsive), default 1.
        kappa: κ > 0 of the noise κ⁻¹Δρ (inverse temperature), or None (no noise).
        t0: initial time.
        ts: save times (default: t1 only).
        solver: a diffrax solver; an IMEX solver (``KenCarp3/4/5``) receives
            ``MultiTerm(transport, diffusion)``, any other solver their sum.
        rtol, atol: tolerances of the PID controller (float32 floors as in
            :func:`attnflow.solve`).
        dt0: initial step (default: diffrax's choice).
        max_steps: diffrax's step cap (``"auto"`` as in :func:`attnflow.solve`).
        adjoint: diffrax adjoint (default ``RecursiveCheckpointAdjoint()``: exact gradients
            with respect to β, λ, κ and ``density0``).
        throw: raise when the solve fails or the state stops being resolved; with False,
            inspect ``result`` and ``resolved``.
        resolution_tol: the tolerance of the resolution check (default 1e-6 in float64,
            1e-4 in float32).
        steady_tol: stop once ‖∂_tρ‖ ≤ steady_tol·‖ρ‖ (a rate per unit time; default None:
            never stop early at a steady state).

    Returns:
        A :class:`DensitySolution`.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(32)
        >>> rho0 = grid.from_values(1 + 0.01 * jnp.cos(3 * grid.angles()))
        >>> sol = mf.solve_density(grid, rho0, 0.05, beta=5.0, normalization="n", ts=[0.0, 0.05])
        >>> growth = sol.coefficients[1, 3] / sol.coefficients[0, 3]   # e^{0.05 λ_3}
        >>> bool(sol.resolved), round(float(sol.mass[-1]), 12), round(float(growth), 2)
        (True, 1.0, 2.53)
    """
    if not isinstance(grid, AbstractDensityGrid):
        expected("grid", "an attnflow.meanfield grid (e.g. CircleGrid(modes))", grid)
    throw = check_bool(throw, "throw")
    normalization = check_sa_normalization(normalization)
    beta = grid.check_kernel(check_finite_scalar(beta, "beta"))
    value_scale = check_finite_scalar(value_scale, "value_scale")
    if kappa is not None:
        kappa = check_positive_scalar(kappa, "kappa", what="noise parameter κ")
    density0 = as_array(density0, "density0")
    dtype = jnp.result_type(density0)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
        density0 = jnp.asarray(density0, dtype)
    if resolution_tol is None:
        resolution_tol = default_resolution_tol(dtype)
    check_static(resolution_tol, "resolution_tol", "it sets the resolution event's threshold")
    resolution_tol = float(
        check_positive_scalar(resolution_tol, "resolution_tol", what="tolerance")
    )
    if steady_tol is not None:
        check_static(steady_tol, "steady_tol", "it switches the steady-state event on")
        steady_tol = float(check_positive_scalar(steady_tol, "steady_tol", what="rate"))
    density0 = check_density(grid, density0, "density0", resolution_tol)
    t0, t1, t1_value, rtol, atol, max_steps, dt0 = _check_solve_arguments(
        t0, t1, rtol, atol, max_steps, dt0, dtype
    )

    if ts is not None:
        ts = check_save_times(jnp.asarray(as_array(ts, "ts"), dtype), t0, t1)
    if solver is None:
        solver = _default_solver(kappa is not None)
    elif not isinstance(solver, diffrax.AbstractSolver):
        expected("solver", "a diffrax solver (e.g. diffrax.Tsit5())", solver)
    if adjoint is not None and not isinstance(adjoint, diffrax.AbstractAdjoint):
        expected(
            "adjoint", "a diffrax adjoint (e.g. diffrax.RecursiveCheckpointAdjoint())", adjoint
        )
    beta = _scalar_array(beta, dtype)
    value_scale = _scalar_array(value_scale, dtype)
    inverse_kappa = None if kappa is None else _scalar_array(1 / kappa, dtype)
    # One compiled program per (grid, shapes, dtype, normalization, solver, adjoint, max_steps,
    # noise or not): β, λ, κ, the density, the times and all tolerances (resolution_tol too)
    # are traced arguments, so a new value of any of them reuses it.
    model = (beta, value_scale, inverse_kappa)
    out, final_tail, final_min = _solve_core(
        grid,
        density0,
        model,
        (t0, t1, ts, dt0),
        (
            rtol,
            atol,
            _scalar_array(resolution_tol, dtype),
            None if steady_tol is None else _scalar_array(steady_tol, dtype),
        ),
        normalization=normalization,
        solver=solver,
        adjoint=adjoint,
        max_steps=max_steps,
    )
    if throw:
        field = _Both(*_transport_and_diffusion(grid, model, normalization, dtype))
        out = _check_solution(out, field, t0, density0, None, max_steps, t1_value)
        out = _raise_if_unresolved(
            out, final_tail, final_min, resolution_tol, steady_tol is not None
        )
    return out


_CORE_TRACES = 0  # how many times _solve_core was traced (compiled): read by the tests


def _default_solver(noisy: bool):
    if not noisy:
        return diffrax.Tsit5()
    # The implicit part is linear and its Newton matrix exact, so the first chord step solves
    # the stage; tight root tolerances would only make the convergence test read the rounding
    # of the second step as divergence (measured: 58% of steps rejected).
    root_finder = diffrax.VeryChord(rtol=1e-3, atol=1e-6, linear_solver=_DiagonalJacobian())
    return diffrax.KenCarp4(root_finder=root_finder)


def _transport_and_diffusion(grid, model, normalization, dtype):
    """The two parts of the right-hand side for ``model = (β, λ, 1/κ)``: the transport, and the
    diffusion (None without noise, 1/κ None)."""
    beta, value_scale, inverse_kappa = model
    transport = _Transport(grid, beta, value_scale, normalization)
    if inverse_kappa is None:
        return transport, None
    return transport, _Diffusion(grid.laplacian().astype(dtype), inverse_kappa)


def density_rate(grid, coefficients, model, normalization: str):
    """∂_t ρ = −div(ρ λX[ρ]) + κ⁻¹Δρ at a state (its coefficients), for ``model = (β, λ, 1/κ)``
    (1/κ None: no noise): the right-hand side :func:`solve_density` integrates, e.g. for the
    residual of the stationary equation."""
    dtype = jnp.result_type(coefficients)
    return _Both(*_transport_and_diffusion(grid, model, normalization, dtype))(
        0.0, coefficients, None
    )


@eqx.filter_jit
def _solve_core(
    grid, density0, model, times, tolerances, *, normalization, solver, adjoint, max_steps
):
    """One compiled solve. ``model = (β, λ, 1/κ)``, ``times = (t0, t1, ts, dt0)`` and
    ``tolerances = (rtol, atol, resolution_tol, steady_tol)`` are traced (ts, 1/κ and
    steady_tol may be None)."""
    global _CORE_TRACES
    _CORE_TRACES += 1
    t0, t1, ts, dt0 = times
    rtol, atol, tol, steady_tol = tolerances
    dtype = density0.dtype
    transport, diffusion = _transport_and_diffusion(grid, model, normalization, dtype)
    if _imex(solver):
        if diffusion is None:
            diffusion = _Diffusion(jnp.zeros_like(density0), jnp.zeros((), dtype))
        terms = diffrax.MultiTerm(diffrax.ODETerm(transport), diffrax.ODETerm(diffusion))
    else:
        terms = diffrax.ODETerm(_Both(transport, diffusion))
    if ts is None:
        saveat = diffrax.SaveAt(t1=True)
    else:
        saveat = diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts), diffrax.SubSaveAt(t1=True)])
    kwargs = {} if adjoint is None else {"adjoint": adjoint}
    conditions = _Unresolved(grid, tol)
    if steady_tol is not None:
        conditions = (conditions, _Steady(grid, _Both(transport, diffusion), steady_tol))
    sol = diffrax.diffeqsolve(
        terms,
        solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=density0,
        saveat=saveat,
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        event=diffrax.Event(conditions),
        throw=False,
        **kwargs,
    )
    if ts is None:
        saved_ts, saved, t_stop, final = sol.ts, sol.ys, sol.ts[-1], sol.ys[-1]
    else:
        (saved_ts, t_stop), (saved, final) = sol.ts, sol.ys
        t_stop, final = t_stop[-1], final[-1]
    event = sol.result == diffrax.RESULTS.event_occurred
    if steady_tol is None:
        stopped, steady = event, jnp.zeros((), bool)
    else:
        unresolved_stop, steady_stop = sol.event_mask
        stopped = event & unresolved_stop
        steady = event & steady_stop & ~unresolved_stop
        if ts is not None:
            # after a steady stop the saved states are the final one, held
            after = steady & (ts > t_stop)
            saved = jnp.where(after.reshape(after.shape + (1,) * final.ndim), final, saved)
            saved_ts = jnp.where(after, ts, saved_ts)
    needed = jnp.where(stopped, _modes_needed(grid, final, tol), grid.max_degree())

    def one(c):
        values = grid.to_values(c)
        weights = grid.quadrature_weights().astype(values.dtype)
        return jnp.sum(weights * values), jnp.min(values), _tail(grid, c)

    mass, min_density, tail = jax.vmap(one)(saved)
    _, final_min, final_tail = one(final)
    out = DensitySolution(
        ts=saved_ts,
        coefficients=saved,
        grid=grid,
        mass=mass,
        min_density=min_density,
        spectral_tail=tail,
        resolved=~stopped & diffrax.is_okay(sol.result),
        steady=steady,
        t_stop=t_stop,
        modes_needed=needed,
        result=sol.result,
        stats=sol.stats,
    )
    return out, final_tail, final_min


def _concrete(value):
    """A Python number for a concrete value, None for a traced one (under jit or grad)."""
    return None if is_traced(value) else value.item()


def _raise_if_unresolved(out, final_tail, final_min, tol, steady_on):
    """Raise when the solve stopped on an unresolved state: eagerly with the numbers (when,
    the tail, min ρ, the modes needed); under tracing with ``eqx.error_if`` and a message that
    says where to read them."""
    stopped = out.result == diffrax.RESULTS.event_occurred
    if steady_on:  # a steady stop is a success (static: no ops without steady_tol)
        stopped = stopped & ~out.steady
    L = out.grid.max_degree()
    values = [_concrete(v) for v in (stopped, out.t_stop, final_tail, final_min, out.modes_needed)]
    if all(v is not None for v in values):
        if values[0]:
            raise eqx.EquinoxRuntimeError(_unresolved_message(*values[1:], L, tol))
        return out
    # Under jax.jit / jax.grad the numbers are not known when the program is built: the message
    # is fixed, and points to the flagged result.
    message = (
        f"solve_density: the density is no longer resolved by the grid before t1: spectral tail "
        f"‖P_(>3L/4) ρ‖/‖ρ‖ or negative values beyond resolution_tol = {tol:g}; it needs more "
        f"than the grid's L = {L} (how many is estimated in sol.modes_needed, which cannot be "
        "printed under jax.jit/jax.grad: rerun with throw=False and read sol.t_stop and "
        "sol.modes_needed, or call solve_density outside the transformation for the full "
        "message). Rerun with more modes"
    )
    return eqx.error_if(out, stopped, message)
