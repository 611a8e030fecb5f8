r"""The phase diagram of noisy attention in (β, κ): the long-time order parameter of the
Fokker–Planck equation from two starts, and the theory's curves (survey arXiv:2512.01868 §7, the
open problem of charting it).

The noisy flow dx = X[ρ](x) dt + √(2/κ) dB (:func:`attnflow.solve_sde` with σ = 1/κ) has the
mean-field (Fokker–Planck) equation ∂_t ρ = −div(ρ X[ρ]) + κ⁻¹Δρ, solved by
:func:`solve_density`. It is solved here in the **diffusion time** τ = t/κ, in which it reads

    ∂_τ ρ = −div(ρ κX[ρ]) + Δρ          (``solve_density(..., value_scale=κ, kappa=1)``),

so that one horizon fits every κ: the degree-1 perturbation of the uniform state grows at the rate
(d − 1)(κ/κ_c − 1) in τ (linearisation; κ_c = :func:`attnflow.theory.stationary_critical_kappa`),
for SA and USA alike, whatever β. Each point of the diagram is solved twice: from a slightly
perturbed uniform density, 1 + ε·(random degrees 1…``perturbed_modes``), and from a
concentrated one, the von Mises–Fisher density e^{a(⟨x, e⟩ − 1)} normalised. Where the transition
is first order (USA for β above the tricritical point) both the uniform and the concentrated
state are stable between the saddle-node κ_sn and κ_c: the two starts end apart (hysteresis).
"""

import concurrent.futures
import math
import os
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._check import (
    check_bool,
    check_int,
    check_key,
    check_positive_scalar,
    check_range,
    check_real_values,
    check_sa_normalization,
    expected,
)
from .._progress import Progress
from ..theory._stationary import stationary_branches, stationary_critical_kappa
from ._bumps import count_bumps
from ._circle import CircleGrid
from ._solve import check_density, default_resolution_tol, density_rate, solve_density
from ._sphere import SphereGrid

KENCARP4_STAGES = 6
"""Stages of diffrax's KenCarp4 (an ESDIRK pair with an explicit companion): each step evaluates
the transport 6 times and solves 5 diagonal implicit stages (one chord iteration each)."""


class NoisyPhaseDiagram(eqx.Module):
    r"""The result of :func:`noisy_phase_diagram`: one model (SA or USA) on one sphere.

    Arrays indexed ``[start, b, k]`` have ``start`` 0 = near uniform, 1 = concentrated, ``b`` the
    β index and ``k`` the κ index.

    Attributes:
        betas: (B,) β.
        kappa_ratios: (K,) κ/κ_c(β), the grid's vertical coordinate.
        kappas: (B, K) κ = κ_c(β)·ratio.
        times: (T,) the save times in diffusion time τ = t/κ (the physical time is κτ).
        order_parameter: (2, B, K) r = |∫ x dρ| at the horizon (NaN where unresolved).
        order_parameter_history: (2, B, K, T) r at ``times`` (NaN after an unresolved stop).
        final_density: (2, B, K, N) the coefficients of ρ at the horizon (the grid's layout).
        bumps: (2, B, K) bumps of the final density (:func:`count_bumps` with ``bump_height``,
            ``bump_flat``); −1 where unresolved.
        lasted: (2, B, K) how long (in τ) r had stayed within ``settle_tol`` of its final value:
            the horizon minus the last save time at which it differed by more.
        residual: (2, B, K) ‖∂_τ ρ‖/‖ρ‖ (L²(σ)) at the horizon: the residual of the stationary
            equation −div(ρκX[ρ]) + Δρ = 0 per unit diffusion time.
        stationary: (2, B, K) ``residual ≤ stationary_tol``; a resolved state that is not is only
            slow (still moving at the horizon).
        resolved: (2, B, K) the solve reached the horizon with every state resolved.
        modes_needed: (2, B, K) the degree an unresolved state needs (:class:`DensitySolution`).
        steps: (2, B, K) accepted plus rejected steps of the solve (each ``KENCARP4_STAGES``
            transport evaluations, plus one for the steady-state check with ``steady_tol``).
        stop_time: (2, B, K) τ at which the solve ended: the horizon, or earlier at a steady
            state (``steady_tol``; the state is then held to the horizon); NaN where unresolved.
        kappa_critical: (B,) κ_c(β) (:func:`attnflow.theory.stationary_critical_kappa`).
        kappa_saddle_node: (B,) where the upper branch is born (= κ_c when the transition is
            continuous; :func:`attnflow.theory.stationary_branches`).
        theory_order_parameter: (B, K) r* of the upper branch at each κ (0: uniform only; NaN past
            the theory's resolved range r ≤ 0.995).
        tricritical_beta, tricritical_kappa: where the transition turns first order (the
            branch's curvature at r → 0 changes sign), NaN when not within the β range.
        horizon: τ at the end.
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).
        d: the ambient dimension (2: S¹, 3: S²).
    """

    betas: Float[Array, " B"]
    kappa_ratios: Float[Array, " K"]
    kappas: Float[Array, "B K"]
    times: Float[Array, " T"]
    order_parameter: Float[Array, "2 B K"]
    order_parameter_history: Float[Array, "2 B K T"]
    final_density: Float[Array, "2 B K N"]
    bumps: Int[Array, "2 B K"]
    lasted: Float[Array, "2 B K"]
    residual: Float[Array, "2 B K"]
    stationary: Bool[Array, "2 B K"]
    resolved: Bool[Array, "2 B K"]
    modes_needed: Int[Array, "2 B K"]
    steps: Int[Array, "2 B K"]
    stop_time: Float[Array, "2 B K"]
    kappa_critical: Float[Array, " B"]
    kappa_saddle_node: Float[Array, " B"]
    theory_order_parameter: Float[Array, "B K"]
    tricritical_beta: Float[Array, ""]
    tricritical_kappa: Float[Array, ""]
    horizon: float = eqx.field(static=True)
    normalization: str = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def onsets(self, threshold: float = 0.05) -> Float[Array, "2 B"]:
        """For each start and β, the smallest κ of the grid whose final r exceeds ``threshold``
        (NaN when none): from the uniform start it estimates κ_c, from the concentrated start the
        saddle-node κ_sn, each to the grid's spacing."""
        ordered = np.asarray(self.order_parameter) > threshold
        first = np.argmax(ordered, axis=-1)
        kappas = np.asarray(self.kappas)
        rows = np.arange(kappas.shape[0])
        return jnp.asarray(np.where(ordered.any(-1), kappas[rows, first], np.nan))


def _sphere_dimension(grid) -> int:
    if not isinstance(grid, CircleGrid | SphereGrid):
        expected("grid", "an attnflow.meanfield.CircleGrid (S¹) or SphereGrid (S²)", grid)
    return 2 if isinstance(grid, CircleGrid) else 3


def _axis(dimension: int):
    e = np.ones(dimension) if dimension == 3 else np.array([1.0, 0.0])
    return e / np.linalg.norm(e)


def initial_densities(grid, *, epsilon, perturbed_modes, concentration, key, dtype):
    """(2, N) coefficients: 1 + ε·p (p a random combination of degrees 1…``perturbed_modes``,
    max |p| = 1 at the nodes) and e^{a(⟨x, e⟩ − 1)}/∫… (a = ``concentration``)."""
    degrees = np.asarray(grid.degrees())
    band = (degrees >= 1) & (degrees <= perturbed_modes)
    noise = jax.random.normal(key, degrees.shape, dtype) * jnp.asarray(band, dtype)
    bump = grid.to_values(noise)
    noise = noise / jnp.max(jnp.abs(bump))
    uniform = jnp.zeros(degrees.shape, dtype).at[0].set(1.0) + epsilon * noise
    nodes = grid.nodes().astype(dtype)
    values = jnp.exp(concentration * (nodes @ jnp.asarray(_axis(nodes.shape[1]), dtype) - 1))
    values = values / jnp.sum(grid.quadrature_weights().astype(dtype) * values)
    return jnp.stack([uniform, grid.from_values(values)])


def _order_parameter(grid, coefficients):
    values = grid.to_values(coefficients)
    weights = grid.quadrature_weights().astype(values.dtype)
    return jnp.linalg.norm((weights * values) @ grid.nodes().astype(values.dtype))


def _norm(grid, coefficients):
    values = grid.to_values(coefficients)
    return jnp.sqrt(jnp.sum(grid.quadrature_weights().astype(values.dtype) * values**2))


@eqx.filter_jit
def _column(
    grid, betas, kappas, start, times, tolerances, *, normalization, max_steps, tol, steady
):
    """One start and one κ/κ_c: the solves for every β (vmap over the (β, κ) pairs), one compiled
    program per (grid, shapes, normalisation, max_steps, tol); β, κ, the start, the times, rtol
    and atol traced. Batched along β, not κ: a vmapped solve takes the largest step count of its
    batch, and the count varies far less along β than along κ (measured: 27 to 8460 steps along
    κ/κ_c ∈ [0.8, 2.5] at β = 2, at most ×7 along β ∈ [2, 6] at a fixed ratio, USA on S¹)."""
    rtol, atol = tolerances

    def one(beta, kappa):
        sol = solve_density(
            grid,
            start,
            times[-1],
            beta=beta,
            normalization=normalization,
            value_scale=kappa,
            kappa=1.0,
            ts=times,
            rtol=rtol,
            atol=atol,
            max_steps=max_steps,
            throw=False,
            resolution_tol=tol,
            steady_tol=steady,
        )
        history = jax.vmap(lambda c: _order_parameter(grid, c))(sol.coefficients)
        final = sol.coefficients[-1]
        rate = density_rate(grid, final, (beta, kappa, jnp.ones_like(kappa)), normalization)
        residual = _norm(grid, rate) / _norm(grid, final)
        steps = sol.stats["num_accepted_steps"] + sol.stats["num_rejected_steps"]
        return history, final, residual, sol.resolved, sol.modes_needed, steps, sol.t_stop

    return jax.vmap(one)(betas, kappas)


def _lasted(history, times, settle_tol):
    """τ_end − the last save time with |r − r_final| > settle_tol (the whole horizon if none)."""
    away = np.abs(history - history[..., -1:]) > settle_tol
    last = np.where(away.any(-1), times.size - 1 - np.argmax(away[..., ::-1], axis=-1), 0)
    return times[-1] - times[np.minimum(last, times.size - 1)]


def _subcritical_sign(beta, d, normalization):
    """κ(r₁) − κ_c at the first point r₁ ≈ 2.4e-3 of the branch: < 0 for a first-order
    transition (the branch bends back below κ_c)."""
    critical = stationary_critical_kappa(beta, d, normalization=normalization)
    branches = stationary_branches(
        jnp.asarray([critical]), beta=beta, d=d, normalization=normalization
    )
    return float(branches.curve_kappa[0] - critical)


def tricritical_point(
    low: float, high: float, d: int, normalization: str, *, iterations: int = 16
) -> tuple[float, float]:
    """(β_t, κ_c(β_t)): where the branch's κ(r₁) − κ_c changes sign in [low, high], by bisection
    (``iterations`` halvings); NaNs when it does not change sign there."""
    f_low = _subcritical_sign(low, d, normalization)
    f_high = _subcritical_sign(high, d, normalization)
    if not (f_low > 0 > f_high):
        return math.nan, math.nan
    for _ in range(iterations):
        mid = (low + high) / 2
        if _subcritical_sign(mid, d, normalization) > 0:
            low = mid
        else:
            high = mid
    beta = (low + high) / 2
    return beta, float(stationary_critical_kappa(beta, d, normalization=normalization))


def _sweep(
    grid,
    betas,
    kappas,
    starts,
    times,
    tolerances,
    *,
    normalization,
    max_steps,
    resolution_tol,
    steady_tol,
    batch_size,
    workers,
    progress,
):
    """Every (start, κ column, β batch) by :func:`_column`, on ``workers`` threads; the seven
    outputs as arrays [start, b, k, ...]."""
    tasks = [
        (s, k, b)
        for s in range(2)
        for k in range(kappas.shape[1])
        for b in range(0, len(betas), batch_size)
    ]
    dtype = starts.dtype

    def task(s, k, b):
        rows = slice(b, b + batch_size)
        out = _column(
            grid,
            betas[rows],
            jnp.asarray(kappas[rows, k], dtype),
            starts[s],
            times,
            tolerances,
            normalization=normalization,
            max_steps=max_steps,
            tol=resolution_tol,
            steady=steady_tol,
        )
        return jax.tree.map(np.asarray, out)

    shapes = (len(times),), starts.shape[1:], (), (), (), (), ()
    outputs = [np.empty((2, *kappas.shape, *shape)) for shape in shapes]
    unit = "solves" if batch_size == 1 else "batches"
    with (
        Progress(progress or "", len(tasks), unit, enabled=bool(progress)) as bar,
        concurrent.futures.ThreadPoolExecutor(workers) as pool,
    ):
        futures = {pool.submit(task, *t): t for t in tasks}
        for future in concurrent.futures.as_completed(futures):
            s, k, b = futures[future]
            for output, part in zip(outputs, future.result(), strict=True):
                output[s, b : b + batch_size, k] = part
            bar.update(1)
    return outputs


def noisy_phase_diagram(
    grid: CircleGrid | SphereGrid,
    betas,
    kappa_ratios,
    *,
    normalization: Literal["n", "softmax"] = "n",
    horizon: float = 100.0,
    num_saves: int = 21,
    epsilon: float = 1e-2,
    perturbed_modes: int = 4,
    concentration: float = 4.0,
    key=None,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    max_steps: int = 20_000,
    resolution_tol: float | None = None,
    bump_height: float = 0.1,
    bump_flat: float = 1e-2,
    settle_tol: float = 1e-3,
    stationary_tol: float = 1e-4,
    steady_tol: float | None = 1e-6,
    theory: bool = True,
    tricritical: bool = True,
    batch_size: int | None = None,
    workers: int | None = None,
    progress: bool = False,
) -> NoisyPhaseDiagram:
    r"""The phase diagram of the noisy flow in (β, κ) on S¹ or S², for SA or USA, by the
    Fokker–Planck equation (module docstring), with the theory's curves.

    For each β of ``betas`` and κ = κ_c(β)·ratio, ratio in ``kappa_ratios``, the equation
    ∂_τ ρ = −div(ρ κX[ρ]) + Δρ (diffusion time τ = t/κ; arXiv:2312.10794 (3.4) with noise) is
    solved to τ = ``horizon`` by :func:`solve_density` (KenCarp4, resolution check) from the
    near-uniform and the concentrated start, and the final state is described: the order
    parameter r = |∫ x dρ|, its number of bumps (:func:`count_bumps`), how long it had lasted,
    and the residual ‖∂_τρ‖/‖ρ‖ of the stationary equation (stationary, or only slow). The sweep
    is batched: one compiled program solves ``batch_size`` β at one κ/κ_c from one start (vmap),
    each solve stopping early at a steady state (``steady_tol``); ``workers`` threads run the
    batches (``progress`` shows them). With ``theory``: κ_c(β),
    the saddle-node κ_sn(β) and the upper branch r*(κ) of
    :func:`attnflow.theory.stationary_branches` at every point, and the tricritical point
    (bisection of the branch's bend in [min β, max β]).

    Args:
        grid: :class:`CircleGrid` (S¹) or :class:`SphereGrid` (S²); its dtype is the default
            float dtype.
        betas: 1-d grid of β ≥ 0.
        kappa_ratios: 1-d grid of κ/κ_c(β) > 0.
        normalization: ``"n"`` (USA, default) or ``"softmax"`` (SA).
        horizon: the final diffusion time τ (> 0).
        num_saves: save times (≥ 2), equispaced in [0, horizon].
        epsilon: the amplitude (max at the nodes) of the perturbation of the uniform start.
        perturbed_modes: the degrees 1…``perturbed_modes`` it perturbs.
        concentration: a of the concentrated start e^{a(⟨x, e⟩ − 1)}.
        key: PRNG key of the perturbation (default ``jax.random.key(0)``).
        rtol, atol, max_steps, resolution_tol: of :func:`solve_density`.
        bump_height, bump_flat: the ``height`` and ``flat`` of :func:`count_bumps`.
        settle_tol: the change of r that ends a state's lifetime (``lasted``).
        stationary_tol: the largest residual of a stationary state.
        steady_tol: stop a solve once its residual ‖∂_τρ‖/‖ρ‖ falls to ``steady_tol`` and hold
            its state to the horizon (``solve_density(steady_tol=...)``); the default 1e-6 moves
            the state by at most 1e-4 in L² over a horizon of 100 if the rate stays as small,
            below ``settle_tol``. None: every solve runs to the horizon (slower: a concentrated
            state takes its stability-limited steps to the end).
        theory: compute the theory's curves (else they are NaN; κ_c is always computed).
        tricritical: with ``theory``, locate the tricritical point (about 18 branch solves).
        batch_size: how many β one compiled solve takes at once (vmap; a batch runs as many steps
            as its slowest member). Default: every β on S¹, where a vmapped step of 12 costs
            about 4 single ones; 1 on S², where it costs 10 (measured, L = 48 and 24).
        workers: threads running the batches concurrently (default: the CPU count; each
            program is small, so XLA runs it on one core).
        progress: report the batches (stderr).

    Returns:
        A :class:`NoisyPhaseDiagram`.

    Example:
        >>> import jax, attnflow.meanfield as mf
        >>> jax.config.update("jax_enable_x64", True)
        >>> pd = mf.noisy_phase_diagram(mf.CircleGrid(16), [1.0], [0.8, 1.5], horizon=40.0,
        ...                             num_saves=3, theory=False, resolution_tol=1e-4)
        >>> pd.order_parameter.round(2).tolist()   # [start][β][κ]: 0 below κ_c, r* above
        [[[0.0, 0.81]], [[0.0, 0.81]]]
    """
    dimension = _sphere_dimension(grid)
    normalization = check_sa_normalization(normalization)
    betas = np.asarray(check_real_values(betas, "betas", low=0), float)
    ratios = np.asarray(check_real_values(kappa_ratios, "kappa_ratios", low=0), float)
    for name, grid_values in (("betas", betas), ("kappa_ratios", ratios)):
        if grid_values.ndim != 1 or grid_values.size == 0:
            raise ValueError(
                f"{name}: expected a non-empty 1-d grid, got shape {grid_values.shape}"
            )
    if not np.all(ratios > 0):
        raise ValueError(f"kappa_ratios: expected κ/κ_c > 0, got {float(ratios.min()):g}")
    horizon = float(check_positive_scalar(horizon, "horizon", what="diffusion time τ"))
    num_saves = check_int(num_saves, "num_saves", low=2)
    epsilon = float(check_positive_scalar(epsilon, "epsilon", what="perturbation amplitude"))
    perturbed_modes = check_int(perturbed_modes, "perturbed_modes", low=1, high=grid.max_degree())
    concentration = float(check_positive_scalar(concentration, "concentration", what="a > 0"))
    key = jax.random.key(0) if key is None else check_key(key)
    max_steps = check_int(max_steps, "max_steps", low=1)
    theory = check_bool(theory, "theory")
    tricritical_wanted = check_bool(tricritical, "tricritical")
    progress = check_bool(progress, "progress")
    # every tolerance before the sweep, not after its minutes
    bump_height = float(check_range(bump_height, "bump_height", 0.0, 1.0, what="relative height"))
    for name, value in (
        ("rtol", rtol),
        ("atol", atol),
        ("bump_flat", bump_flat),
        ("settle_tol", settle_tol),
        ("stationary_tol", stationary_tol),
        *((("steady_tol", steady_tol),) if steady_tol is not None else ()),
    ):
        check_positive_scalar(value, name, what="tolerance")
    dtype = jnp.result_type(float)
    if resolution_tol is None:
        resolution_tol = default_resolution_tol(dtype)
    check_positive_scalar(resolution_tol, "resolution_tol", what="tolerance")

    workers = (os.cpu_count() or 1) if workers is None else check_int(workers, "workers", low=1)
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", low=1)
    starts = initial_densities(
        grid,
        epsilon=epsilon,
        perturbed_modes=perturbed_modes,
        concentration=concentration,
        key=key,
        dtype=dtype,
    )
    for name, what, start in zip(
        ("epsilon", "concentration"), ("near-uniform", "concentrated"), starts, strict=True
    ):
        try:
            check_density(grid, start, f"the {what} start", resolution_tol)
        except ValueError as error:
            raise ValueError(
                f"{name}: the {what} start is not resolved by the grid at resolution_tol = "
                f"{resolution_tol:g}; use a smaller {name} or a larger grid ({error})"
            ) from None
    critical = np.asarray(
        [float(stationary_critical_kappa(b, dimension, normalization=normalization)) for b in betas]
    )
    kappas = critical[:, None] * ratios[None, :]
    times = jnp.linspace(0.0, horizon, num_saves, dtype=dtype)
    tolerances = tuple(jnp.asarray(v, dtype) for v in (rtol, atol))
    resolution_tol = float(resolution_tol)
    label = f"noisy phase ({'USA' if normalization == 'n' else 'SA'}, S{dimension - 1})"
    if batch_size is None:
        batch_size = 4 if dimension == 2 else 1
    outputs = _sweep(
        grid,
        jnp.asarray(betas, dtype),
        kappas,
        starts,
        times,
        tolerances,
        normalization=normalization,
        max_steps=max_steps,
        resolution_tol=resolution_tol,
        steady_tol=None if steady_tol is None else float(steady_tol),
        batch_size=min(batch_size, len(betas)),
        workers=workers,
        progress=label if progress else None,
    )
    history, final, residual, resolved, needed, steps, stop_time = outputs
    resolved, needed, steps = resolved.astype(bool), needed.astype(int), steps.astype(int)
    history = np.where(resolved[..., None], history, np.nan)
    r_final = history[..., -1]
    bumps = np.full(r_final.shape, -1)
    for index in zip(*np.nonzero(resolved), strict=True):
        bumps[index] = count_bumps(grid, final[index], height=bump_height, flat=bump_flat)
    lasted = np.where(resolved, _lasted(history, np.asarray(times), settle_tol), np.nan)

    nan_rows = np.full(len(betas), np.nan)
    saddle, r_theory = nan_rows.copy(), np.full(kappas.shape, np.nan)
    tricritical = (math.nan, math.nan)
    if theory:
        rows = len(betas) + int(tricritical_wanted)
        with Progress(f"{label}: theory", rows, "β rows", enabled=progress) as bar:
            for b, beta in enumerate(betas):
                branches = stationary_branches(
                    kappas[b], beta=float(beta), d=dimension, normalization=normalization
                )
                saddle[b] = float(branches.kappa_saddle_node)
                r_theory[b] = np.asarray(branches.order_parameter)
                bar.update(1)
            if tricritical_wanted and betas.max() > betas.min():
                tricritical = tricritical_point(
                    float(betas.min()), float(betas.max()), dimension, normalization
                )
            bar.update(int(tricritical_wanted))
    return NoisyPhaseDiagram(
        betas=jnp.asarray(betas),
        kappa_ratios=jnp.asarray(ratios),
        kappas=jnp.asarray(kappas),
        times=times,
        order_parameter=jnp.asarray(r_final),
        order_parameter_history=jnp.asarray(history),
        final_density=jnp.asarray(final),
        bumps=jnp.asarray(bumps),
        lasted=jnp.asarray(lasted),
        residual=jnp.asarray(residual),
        stationary=jnp.asarray(resolved & (residual <= stationary_tol)),
        resolved=jnp.asarray(resolved),
        modes_needed=jnp.asarray(needed),
        steps=jnp.asarray(steps),
        stop_time=jnp.asarray(np.where(resolved, stop_time, np.nan)),
        kappa_critical=jnp.asarray(critical),
        kappa_saddle_node=jnp.asarray(saddle),
        theory_order_parameter=jnp.asarray(r_theory),
        tricritical_beta=jnp.asarray(tricritical[0]),
        tricritical_kappa=jnp.asarray(tricritical[1]),
        horizon=horizon,
        normalization=normalization,
        d=dimension,
    )
