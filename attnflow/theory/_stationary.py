r"""Stationary states of noisy attention: the self-consistency equation and its branches
(survey arXiv:2512.01868 §7; Shalova–Schlichting; Balasubramanian–Banerjee–Rigollet
arXiv:2510.20094).

The noisy model is :func:`attnflow.solve_sde` with σ = 1/κ (noise √(2/κ) dW, generator Δ/κ on
the sphere) and the field ``SelfAttention(β, normalization=...)`` with Q = K = V = I. Its
mean-field limit is the McKean–Vlasov equation ∂_t ρ = −div(ρ 𝒳[ρ]) + κ^{-1} Δρ, and both drifts
are sphere gradients of a potential of the measure, frozen at ρ:

    (USA)  𝒳[ρ](x) = P_x ∫ e^{β⟨x,y⟩} y dρ(y)             = ∇ψ[ρ](x),  ψ = ∫ φ_β(⟨x,y⟩) dρ(y),
    (SA)   𝒳[ρ](x) = P_x ∫ e^{β⟨x,y⟩} y dρ / ∫ e^{β⟨x,y⟩} dρ = ∇ψ[ρ](x),  ψ = β^{-1} log(1 + βΦ),

with φ_β(s) = (e^{βs} − 1)/β (→ s at β = 0) and Φ = ∫ φ_β(⟨x,y⟩) dρ(y) (constants dropped).
A positive stationary density has zero flux (multiply div(ρ∇g) = 0 by g = κψ − log ρ and
integrate: ∫ρ|∇g|² = 0), hence the **self-consistency equation**

    ρ = e^{κ ψ[ρ]} / ∫ e^{κ ψ[ρ]} dσ        (σ the uniform probability measure on S^{d−1}),

for both SA and USA (USA is also the Gibbs state of the free energy −E + κ^{-1}∫ρ log ρ; SA's
equation is not a free-energy condition, but it is the same fixed-point equation). Covered here:
Q = K = V = I, β ≥ 0, and states symmetric about an axis e (ρ a function of u = ⟨x, e⟩), which
include the uniform state and the branch bifurcating from it along degree-1 harmonics. The order
parameter is r = |∫ x dρ| = ∫ u dρ.

At β = 0 (noisy Kuramoto, both models) ψ = ⟨x, m⟩ with m = ∫ y dρ, ρ is von Mises–Fisher with
concentration κr, and the equation is the scalar r = A_d(κr), A_d = I_{d/2}/I_{d/2−1}
(A_2 = I₁/I₀): solved by bisection of A_d(κr)/r − 1, which is decreasing in r.

For β > 0 the axisymmetric equation is solved on a Gauss–Jacobi grid in u (the kernel
averaged over the azimuth by a second Gauss–Jacobi rule), by Picard iteration at a **fixed**
order parameter r, with κ found at each step by bisection (the mean of u under e^{κψ} increases
with κ). This parametrises the whole branch as κ(r), 0 < r < 1, stable and unstable parts alike,
including subcritical (first-order) transitions, where κ(r) first decreases. Linearising at the
uniform state gives the critical κ_c (:func:`stationary_critical_kappa`) as the r → 0 limit.
"""

import functools
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jaxtyping import Array, ArrayLike, Bool, Float

from .._check import (
    MAX_PYTHON_LOOP,
    check_budget,
    check_real_values,
    check_sa_normalization,
    check_size,
    expected,
    model_parameters_keyword_only,
)

NODES = 64
"""Gauss–Jacobi nodes in u = ⟨x, e⟩ (κ(r) converged to ~1e-12 for r ≤ 0.995, β ≤ 10)."""
AZIMUTH_NODES = 48
"""Gauss–Jacobi nodes for the average over the azimuth (d ≥ 3)."""
RATIO_TERMS = 512
"""Backward-recurrence depth of I_ν/I_{ν−1}: relative error below 1e-13 for x ≤ 1e4."""
PICARD_STEPS = 200
KAPPA_STEPS = 30
KAPPA_STEPS_COLD = 60
PICARD_TOL = 1e-14
SECANT_STEPS = 20
BISECTION_STEPS = 60
BRANCH_POINTS = 32
R_MAX = 0.995
"""The largest order parameter the β > 0 solver resolves on its grid (κ(0.995) ≈ 100 at β = 0,
d = 2)."""


def _bessel_ratio(nu: float, x):
    """I_ν(x)/I_{ν−1}(x) for x ≥ 0, ν > 0 (static): the backward recurrence
    r_μ = x/(2μ + x r_{μ+1}) from μ = ν + RATIO_TERMS, started at Amos' lower bound
    x/(μ − 1/2 + √((μ + 1/2)² + x²)). Finite at x = 0 (value 0) and for every finite x (the
    root as a hypot: x² overflows past 1e154, which sent r*(κ = 1e300) to 0, issue 44 item 5)."""
    top = nu + RATIO_TERMS
    r = x / (top - 0.5 + jnp.hypot(top + 0.5, x))

    def step(k, r):
        mu = nu + (RATIO_TERMS - 1 - k)
        return x / (2 * mu + x * r)

    return jax.lax.fori_loop(0, RATIO_TERMS, step, r)


def _mean_cosine(x, d: int):
    """A_d(x) = I_{d/2}(x)/I_{d/2−1}(x): the mean of ⟨y, e⟩ under vMF(e, x) on S^{d−1}."""
    return _bessel_ratio(d / 2, x)


def _log_uniform_potential(beta, d: int):
    """log μ₀(β), μ₀ = ∫ e^{β⟨x,y⟩} dσ(y) = Γ(d/2)(2/β)^{d/2−1} I_{d/2−1}(β), β > 0: I_{d/2−1}
    as I₀ (d even) or I_{−1/2} = √(2/(πβ)) cosh β (d odd) times the ratios up to order d/2−1."""
    nu = d / 2 - 1
    if d % 2 == 0:
        log_i, start = jnp.log(jax.scipy.special.i0e(beta)) + beta, 1.0
    else:
        log_cosh = beta + jnp.log1p(jnp.exp(-2 * beta)) - math.log(2)
        log_i, start = 0.5 * jnp.log(2 / (math.pi * beta)) + log_cosh, 0.5
    order = start
    while order <= nu:
        log_i = log_i + jnp.log(_bessel_ratio(order, beta))
        order += 1.0
    return math.lgamma(d / 2) + nu * jnp.log(2 / beta) + log_i


def _check_model(beta, d, normalization):
    beta = check_real_values(beta, "beta", low=0)
    if beta.ndim != 0:
        raise ValueError(f"beta: expected a scalar β >= 0, got shape {beta.shape}")
    # The Bessel orders up to d/2 are stepped one by one (a Python loop): bounded before any work.
    d = check_size(d, "d", low=2, limit=2 * MAX_PYTHON_LOOP, what="dimensions (d/2 Bessel orders)")
    check_sa_normalization(normalization)
    return jnp.asarray(beta, float), d


def stationary_critical_kappa(
    beta=0.0, d: int = 2, *, normalization: Literal["softmax", "n"] = "softmax"
) -> Float[Array, ""]:
    r"""κ_c: the noise level 1/κ below which the uniform state of the noisy flow is unstable.

    Linearising the self-consistency equation (module docstring) at ρ = 1 along a degree-1
    harmonic (Funk–Hecke: the kernel e^{β⟨x,y⟩} acts on it by μ₁(β) = μ₀(β) A_d(β), with
    μ₀ = Γ(d/2)(2/β)^{d/2−1} I_{d/2−1}(β) and A_d = I_{d/2}/I_{d/2−1}):

        (USA)  κ_c = β / μ₁(β) = β / (μ₀(β) A_d(β)),      (SA)  κ_c = β / A_d(β),

    both equal to d at β = 0 (noisy Kuramoto: κ_c = 2 on the circle). Higher harmonics ℓ
    bifurcate at larger κ (I_{ℓ+d/2−1} decreases in ℓ), so κ_c is the first bifurcation. For
    (USA) κ_c falls like β^{(d+1)/2} e^{−β}: the drift grows like e^β.

    Args:
        beta: β ≥ 0.
        d: the sphere S^{d−1} (d ≥ 2).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).

    Example:
        >>> from attnflow import theory
        >>> float(theory.stationary_critical_kappa(0.0, 2))
        2.0
        >>> round(float(theory.stationary_critical_kappa(1.0, 2, normalization="n")), 6)  # 1/I₁(1)
        1.769413
    """
    beta, d = _check_model(beta, d, normalization)
    safe = jnp.where(beta > 0, beta, 1.0)
    log_ratio = jnp.log(safe) - jnp.log(_mean_cosine(safe, d))
    if normalization == "n":
        log_ratio = log_ratio - _log_uniform_potential(safe, d)
    return jnp.where(beta > 0, jnp.exp(log_ratio), float(d))


@functools.cache
def _grid(d: int):
    """Nodes u, weights ω (Σω = 1) of ∫ g(⟨x, e⟩) dσ(x), and the azimuth rule (t, τ) for the
    law of ⟨x', y'⟩ on S^{d−2} (t = ±1 when d = 2)."""
    a = (d - 3) / 2
    u, w = scipy.special.roots_jacobi(NODES, a, a)
    if d == 2:
        t, tw = np.array([-1.0, 1.0]), np.array([1.0, 1.0])
    else:
        b = (d - 4) / 2
        t, tw = scipy.special.roots_jacobi(AZIMUTH_NODES, b, b)
    return u, w / w.sum(), t, tw / tw.sum()


def _kernel(beta, ua, ub, d: int):
    """K_ab = ∫ φ_β(⟨x, y⟩) over the azimuth, ⟨x, e⟩ = ua, ⟨y, e⟩ = ub (φ_β(s) = expm1(βs)/β)."""
    _, _, t, tw = _grid(d)
    sa, sb = jnp.sqrt(1 - ua**2), jnp.sqrt(1 - ub**2)
    t = jnp.asarray(t)[None, None, :]
    s = ua[:, None, None] * ub[None, :, None] + (sa[:, None] * sb[None, :])[..., None] * t
    safe = jnp.where(beta > 0, beta, 1.0)
    phi = jnp.where(beta > 0, jnp.expm1(safe * s) / safe, s)
    return phi @ jnp.asarray(tw)


def _potential(beta, kernel_times_density, normalization):
    """ψ from Φ = ∫ φ_β dρ: Φ (USA), log(1 + βΦ)/β (SA; Φ at β = 0)."""
    if normalization == "n":
        return kernel_times_density
    safe = jnp.where(beta > 0, beta, 1.0)
    return jnp.where(beta > 0, jnp.log1p(safe * kernel_times_density) / safe, kernel_times_density)


def _gibbs(log_weight, w):
    """log f with f = e^{log_weight}/Σ ω e^{log_weight}, overflow-free."""
    top = jnp.max(log_weight)
    return log_weight - top - jnp.log(jnp.sum(w * jnp.exp(log_weight - top)))


def _kappa_for(psi, r, u, w, start, steps):
    """κ with ∫ u e^{κψ} dσ / ∫ e^{κψ} dσ = r, from the guess ``start``: Newton in log κ on the
    rescaled ψ ∈ [0, 1] (the mean increases with κ, with slope κ Cov(u, ψ)), safeguarded by
    the bracket [−25, 25] that it keeps (bisection when a step leaves it)."""
    span = jnp.maximum(jnp.max(psi) - jnp.min(psi), jnp.finfo(psi.dtype).tiny)
    scaled = (psi - jnp.min(psi)) / span
    log_start = jnp.log(start * span)

    def step(_, carry):
        log_k, lo, hi = carry
        k = jnp.exp(log_k)
        p = w * jnp.exp(_gibbs(k * scaled, w))
        mean = jnp.sum(p * u)
        slope = k * (jnp.sum(p * u * scaled) - mean * jnp.sum(p * scaled))
        below = mean < r
        lo, hi = jnp.where(below, log_k, lo), jnp.where(below, hi, log_k)
        newton = log_k - (mean - r) / slope
        inside = (newton > lo) & (newton < hi) & jnp.isfinite(newton)
        return jnp.where(inside, newton, (lo + hi) / 2), lo, hi

    bracket = (jnp.clip(log_start, -24.0, 24.0), jnp.asarray(-25.0), jnp.asarray(25.0))
    log_k, _, _ = jax.lax.fori_loop(0, steps, step, bracket)
    return jnp.exp(log_k) / span


def _fixed_r(r, beta, d, normalization):
    """(κ, log f) of the axisymmetric stationary state with order parameter r (Picard at fixed
    r, started at the β = 0 solution, the von Mises–Fisher state with mean r)."""
    u, w, _, _ = _grid(d)
    u, w = jnp.asarray(u), jnp.asarray(w)
    K = _kernel(beta, u, u, d)

    def psi_of(log_f):
        return _potential(beta, K @ (w * jnp.exp(log_f)), normalization)

    kappa = _kappa_for(u, r, u, w, jnp.asarray(1.0), KAPPA_STEPS_COLD)
    log_f = _gibbs(kappa * u, w)

    def cond(carry):
        k, _, _, change = carry
        return (k < PICARD_STEPS) & (change > PICARD_TOL)

    def body(carry):
        k, log_f, kappa, _ = carry
        psi = psi_of(log_f)
        kappa = _kappa_for(psi, r, u, w, kappa, KAPPA_STEPS)
        new = _gibbs(kappa * psi, w)
        return k + 1, new, kappa, jnp.max(jnp.abs(new - log_f))

    carry = (0, log_f, kappa, jnp.asarray(jnp.inf))
    _, log_f, kappa, _ = jax.lax.while_loop(cond, body, carry)
    return _kappa_for(psi_of(log_f), r, u, w, kappa, KAPPA_STEPS_COLD), log_f


class StationaryState(eqx.Module):
    r"""An axisymmetric stationary state ρ(x) = f(⟨x, e⟩) of the noisy flow (density f with
    respect to the uniform probability measure σ on S^{d−1}): ρ = e^{κψ[ρ]}/∫e^{κψ[ρ]}dσ.

    Fields: ``kappa``, ``beta``, ``order_parameter`` r = ∫ u dρ (0: the uniform state),
    ``nodes`` u_k and ``weights`` ω_k of the grid (Σ ω_k g(u_k) ≈ ∫ g(⟨x, e⟩) dσ), and
    ``log_density`` log f(u_k), and ``log_normalizer`` log ∫e^{κψ}dσ (so that
    f = e^{κψ − log_normalizer}). :meth:`potential` and :meth:`density` extend the grid
    solution to any u (Nyström).
    """

    kappa: Float[Array, ""]
    beta: Float[Array, ""]
    order_parameter: Float[Array, ""]
    nodes: Float[Array, " nodes"]
    weights: Float[Array, " nodes"]
    log_density: Float[Array, " nodes"]
    log_normalizer: Float[Array, ""]
    d: int = eqx.field(static=True)
    normalization: str = eqx.field(static=True)

    def potential(self, u: Float[ArrayLike, " m"]) -> Float[Array, " m"]:
        """ψ[ρ](u) (up to an additive constant common to all u), u = ⟨x, e⟩ ∈ [−1, 1]."""
        u = check_real_values(u, "u", low=-1.0, high=1.0)  # u = ⟨x, e⟩: outside [−1, 1] no point
        u = jnp.atleast_1d(jnp.asarray(u, self.nodes.dtype))
        K = _kernel(self.beta, u, self.nodes, self.d)
        return _potential(
            self.beta, K @ (self.weights * jnp.exp(self.log_density)), self.normalization
        )

    def density(self, u: Float[ArrayLike, " m"]) -> Float[Array, " m"]:
        """f(u) = e^{κψ(u)}/∫e^{κψ}dσ (the integral by the grid's rule)."""
        return jnp.exp(self.kappa * self.potential(u) - self.log_normalizer)


@eqx.filter_jit
def _state(kappa, r, beta, d, normalization):
    u, w, _, _ = _grid(d)
    _, log_f = _fixed_r(jnp.maximum(r, 1e-12), beta, d, normalization)
    log_f = jnp.where(r > 0, log_f, 0.0)
    state = StationaryState(
        kappa=kappa,
        beta=beta,
        order_parameter=r,
        nodes=jnp.asarray(u),
        weights=jnp.asarray(w),
        log_density=log_f,
        log_normalizer=jnp.zeros(()),
        d=d,
        normalization=normalization,
    )
    exponent = kappa * state.potential(state.nodes)
    normalizer = jax.scipy.special.logsumexp(exponent, b=state.weights)
    return eqx.tree_at(lambda s: s.log_normalizer, state, normalizer)


def _branch_grid():
    """Order parameters of the branch curve: denser near 0 and R_MAX."""
    j = np.arange(1, BRANCH_POINTS + 1)
    return R_MAX * np.sin(np.pi * j / (2 * BRANCH_POINTS)) ** 2


def _curve(beta, d, normalization):
    rs = jnp.asarray(_branch_grid())
    kappas = jax.vmap(lambda r: _fixed_r(r, beta, d, normalization)[0])(rs)
    return rs, kappas


@eqx.filter_jit
def _order_parameter_beta0(kappa, d):
    """The root of A_d(κr) = r in (0, 1) (0 when κ ≤ d): bisection of A_d(κr)/r − 1."""

    def step(_, bracket):
        lo, hi = bracket
        mid = (lo + hi) / 2
        above = _mean_cosine(kappa * mid, d) > mid
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

    lo, hi = jax.lax.fori_loop(0, BISECTION_STEPS, step, (jnp.zeros(()), jnp.ones(())))
    return jnp.where(kappa > d, (lo + hi) / 2, 0.0)


def _order_parameter(kappa, beta, d, normalization, curve, critical):
    """The largest r with κ(r) = κ: the last cell of the curve (prefixed by (0, κ_c)) where
    κ(r) crosses κ upwards, refined by bisection; 0 when κ < min κ(r); NaN past R_MAX."""
    rs, ks = curve
    rs = jnp.concatenate([jnp.zeros(1), rs])
    ks = jnp.concatenate([critical[None], ks])
    below = ks < kappa
    last = jnp.max(jnp.where(below, jnp.arange(rs.shape[0]), -1))
    cell = jnp.clip(last, 0, rs.shape[0] - 2)

    def converged(bracket):
        # |κ(r) − κ| at the better end at rounding level: the remaining steps would not move r
        _, _, f_lo, f_hi, _, k = bracket
        close = jnp.minimum(jnp.abs(f_lo), jnp.abs(f_hi)) <= 1e-14 * jnp.maximum(kappa, 1.0)
        return (k < SECANT_STEPS) & ~close

    def step(bracket):
        # Illinois (bracketed regula falsi): the cell keeps a sign change of κ(r) − κ
        lo, hi, f_lo, f_hi, side, k = bracket
        mid = jnp.clip((lo * f_hi - hi * f_lo) / (f_hi - f_lo), lo, hi)
        f_mid = _fixed_r(mid, beta, d, normalization)[0] - kappa
        left = f_mid < 0
        f_hi = jnp.where(left & (side == 1), f_hi / 2, f_hi)
        f_lo = jnp.where(~left & (side == -1), f_lo / 2, f_lo)
        return (
            jnp.where(left, mid, lo),
            jnp.where(left, hi, mid),
            jnp.where(left, f_mid, f_lo),
            jnp.where(left, f_hi, f_mid),
            jnp.where(left, 1, -1),
            k + 1,
        )

    bracket = (rs[cell], rs[cell + 1], ks[cell] - kappa, ks[cell + 1] - kappa, 0, 0)
    # Stops early once κ(r) − κ is at rounding level (241 κ at β = 3: 5.5 s -> 3.0 s, load 11).
    lo, hi, f_lo, f_hi, _, _ = jax.lax.while_loop(converged, step, bracket)
    r = jnp.where(-f_lo < f_hi, lo, hi)
    r = jnp.where(last < 0, 0.0, r)
    return jnp.where(last == rs.shape[0] - 1, jnp.nan, r)


def _check_kappas(kappas):
    kappas = jnp.asarray(check_real_values(kappas, "kappa", low=0), float)
    if kappas.size == 0:
        expected("kappa", "at least one κ", "= an empty array")
    # One solve per κ (a Python loop): refused before any work past the loop budget.
    check_budget("kappa", kappas.size, MAX_PYTHON_LOOP, what="κ values (one solve each)")
    return kappas


@model_parameters_keyword_only("kappa", "beta", "d")
def stationary_order_parameter(
    kappa, *, beta=0.0, d: int = 2, normalization: Literal["softmax", "n"] = "softmax"
) -> Float[Array, "*shape"]:
    r"""r*(κ): the order parameter r = |∫ x dρ| of the non-uniform stationary state of the noisy
    flow (noise √(2/κ) dW, Q = K = V = I), 0 where only the uniform state exists.

    At β = 0 (noisy Kuramoto) the root of r = A_d(κr), A_d = I_{d/2}/I_{d/2−1} (r = I₁(κr)/I₀(κr)
    on the circle), positive exactly for κ > κ_c = d. For β > 0 the largest r on the branch
    κ(r) of :func:`stationary_branches`: where the transition is first order (USA at larger β,
    κ(r) first decreasing), this is the upper state (the one that noisy runs started
    concentrated settle on, tests/test_stationary.py), which exists from the saddle-node
    ``kappa_saddle_node`` < κ_c on, beside the (linearly stable) uniform state. NaN beyond the
    resolved range r ≤ 0.995 when β > 0 (κ ≳ 100 at β = 0, d = 2; the β = 0 path has no such limit).

    Args:
        kappa: κ ≥ 0, a scalar or an array (broadcast).
        beta: β ≥ 0 (keyword-only).
        d: the sphere S^{d−1} (keyword-only).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).

    Example:
        >>> from attnflow import theory
        >>> [round(float(theory.stationary_order_parameter(k)), 4) for k in (1.5, 2.5, 4.0)]
        [0.0, 0.5897, 0.8315]
    """
    kappa = _check_kappas(kappa)
    beta, d = _check_model(beta, d, normalization)
    flat = kappa.reshape(-1)
    if not isinstance(beta, jax.core.Tracer) and float(beta) == 0.0:
        out = jnp.stack([_order_parameter_beta0(k, d) for k in flat])
    else:
        out = _solve_branches(flat, beta, d, normalization)[0]
    return out.reshape(kappa.shape)


@eqx.filter_jit
def _branch_curve(beta, d, normalization):
    critical = stationary_critical_kappa(beta, d, normalization=normalization)
    return _curve(beta, d, normalization), critical


@eqx.filter_jit
def _upper_branch(kappa, beta, d, normalization, curve, critical):
    return _order_parameter(kappa, beta, d, normalization, curve, critical)


def _solve_branches(kappas, beta, d, normalization):
    """r*(κ) for each κ of a 1-d array, the branch curve and κ_c; one compiled program per
    (d, normalisation) for the curve and one for a single κ, whatever the grid."""
    curve, critical = _branch_curve(beta, d, normalization)
    r = jnp.stack([_upper_branch(k, beta, d, normalization, curve, critical) for k in kappas])
    return r, curve, critical


class StationaryBranches(eqx.Module):
    r"""The bifurcation diagram of the noisy flow's axisymmetric stationary states over κ.

    ``kappas``, ``order_parameter`` r*(κ) (:func:`stationary_order_parameter`; 0: uniform only),
    ``kappa_critical`` κ_c (:func:`stationary_critical_kappa`: the uniform state is linearly
    unstable for κ > κ_c), ``kappa_saddle_node`` = min over the branch of κ(r), sampled on the
    curve's grid (= κ_c when the bifurcation is supercritical, < κ_c when it is subcritical:
    a first-order transition; ``subcritical`` says which), and
    the branch itself as the curve (``curve_kappa``[k], ``curve_order_parameter``[k]), stable
    and unstable parts, for r on a grid of (0, 0.995].
    """

    kappas: Float[Array, " kappas"]
    order_parameter: Float[Array, " kappas"]
    kappa_critical: Float[Array, ""]
    kappa_saddle_node: Float[Array, ""]
    curve_order_parameter: Float[Array, " points"]
    curve_kappa: Float[Array, " points"]
    subcritical: Bool[Array, ""]


@model_parameters_keyword_only("kappas", "beta", "d")
def stationary_branches(
    kappas, *, beta=0.0, d: int = 2, normalization: Literal["softmax", "n"] = "softmax"
) -> StationaryBranches:
    r"""Branches of stationary states over a κ grid (see :class:`StationaryBranches`).

    The branch is parametrised by its order parameter: for each r on a grid of (0, 0.995] the
    axisymmetric solution of the self-consistency equation with ∫u dρ = r and its κ(r) (module
    docstring of ``attnflow/theory/_stationary.py``); κ(r) → κ_c as r → 0. At β = 0,
    κ(r) = A_d^{-1}(r)/r, increasing (supercritical pitchfork at κ_c = d).

    Args:
        kappas: 1-d grid of κ ≥ 0.
        beta: β ≥ 0 (keyword-only).
        d: the sphere S^{d−1} (keyword-only).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).

    Example:
        >>> from attnflow import theory
        >>> b = theory.stationary_branches([1.0, 3.0], beta=3.0, d=2, normalization="n")
        >>> bool(b.subcritical), round(float(b.kappa_critical), 4)  # first order at β = 3
        (True, 0.7588)
        >>> [round(float(r), 4) for r in b.order_parameter]
        [0.9116, 0.99]
    """
    kappas = _check_kappas(kappas)
    if kappas.ndim != 1:
        raise ValueError(f"kappas: expected a 1-d grid of κ values, got shape {kappas.shape}")
    beta, d = _check_model(beta, d, normalization)
    r, (curve_r, curve_k), critical = _solve_branches(kappas, beta, d, normalization)
    saddle = jnp.minimum(jnp.min(curve_k), critical)
    return StationaryBranches(
        kappas=kappas,
        order_parameter=r,
        kappa_critical=critical,
        kappa_saddle_node=saddle,
        curve_order_parameter=curve_r,
        curve_kappa=curve_k,
        subcritical=saddle < critical * (1 - 1e-9),
    )


@model_parameters_keyword_only("kappa", "beta", "d")
def stationary_state(
    kappa, *, beta=0.0, d: int = 2, normalization: Literal["softmax", "n"] = "softmax"
) -> StationaryState:
    r"""The stationary state with order parameter :func:`stationary_order_parameter`
    (κ, beta=β, d=d): its density on the grid and, through :meth:`StationaryState.potential`,
    the potential ψ[ρ] at any u, e.g. to check ρ = e^{κψ[ρ]}/Z by an independent quadrature.
    The uniform state (f = 1) where r* = 0; NaN past the resolved range (r > 0.995, β > 0).

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow import theory
        >>> s = theory.stationary_state(4.0)  # β = 0: von Mises–Fisher, concentration κr
        >>> u = jnp.array([-0.5, 0.5])
        >>> round(float(jnp.diff(jnp.log(s.density(u)))[0] / (4.0 * s.order_parameter)), 10)
        1.0
    """
    kappa = _check_kappas(kappa)
    if kappa.ndim != 0:
        raise ValueError(f"kappa: expected a scalar κ >= 0, got shape {kappa.shape}")
    r = stationary_order_parameter(kappa, beta=beta, d=d, normalization=normalization)
    beta, d = _check_model(beta, d, normalization)
    state = _state(kappa, jnp.nan_to_num(r, nan=R_MAX), beta, d, normalization)
    # past the resolved range: NaN, not the state at r = R_MAX
    unresolved = jnp.isnan(r)
    return eqx.tree_at(
        lambda s: (s.order_parameter, s.log_density),
        state,
        (r, jnp.where(unresolved, jnp.nan, state.log_density)),
    )


__all__ = [
    "StationaryBranches",
    "StationaryState",
    "stationary_branches",
    "stationary_critical_kappa",
    "stationary_order_parameter",
    "stationary_state",
]
