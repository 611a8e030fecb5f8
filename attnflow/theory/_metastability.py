"""Closed forms of dynamic metastability on the circle: two-body merge times, the number of
metastable clusters and the staircase bounds."""

import math
from typing import Literal

import numpy as np
import scipy.special

from .._check import (
    check_beta,
    check_budget,
    check_int,
    check_positive_scalar,
    check_size,
    expected,
)

# The harmonics whose growth rates are computed: ~√β are needed; a million is far past that.
MAX_DEGREE = 2**20


def two_body_log_time(gap: float, mass: float, beta: float) -> float:
    """log T for two point clusters of total mass m = m_a + m_b at gap u under (USA):
    u̇ = −m e^{β cos u} sin u, T = time for u to fall from ``gap`` to β^{-1/2}/10, in units where
    the shifted rate e^{β(cos u − 1)} is used (T_phys = e^{−β} T). By quadrature of
    ∫ e^{β(1 − cos v)} / (m sin v) dv, carried in the log domain."""
    from scipy.integrate import quad

    gap = float(check_positive_scalar(gap, "gap", what="gap"))
    if gap > math.pi:
        expected("gap", "a gap 0 < gap <= π between two clusters on the circle", gap)
    mass = float(check_positive_scalar(mass, "mass", what="mass"))
    beta = float(check_beta(beta, positive=True))
    end = min(gap, 0.1 / math.sqrt(beta))
    peak = beta * 2 * math.sin(gap / 2) ** 2
    value, _ = quad(
        lambda v: math.exp(beta * 2 * math.sin(v / 2) ** 2 - peak) / math.sin(v),
        end,
        gap,
        limit=200,
    )
    return peak + math.log(max(value, 1e-300)) - math.log(mass)


def _check_beta_d(beta, d, normalization):
    beta = float(check_beta(beta, positive=True))
    d = check_size(d, "d", low=2)  # tokens on S^(d-1)
    if normalization not in ("n", "softmax"):
        raise ValueError(
            f"normalization: expected 'n' (USA) or 'softmax' (SA), got {normalization!r}"
        )
    return beta, d


def _log_growth_rates(beta, d, normalization, max_degree):
    """log λ_ℓ for ℓ = 1, …, max_degree (see :func:`attnflow.theory.metastable_growth_rates`),
    overflow-free."""
    ell = np.arange(1, max_degree + 1, dtype=float)
    nu = d / 2 - 1
    # log I_ν(β) = log ive(ν, β) + β; ive underflows to 0 only far past the maximum.
    with np.errstate(divide="ignore"):
        log_i = np.log(scipy.special.ive(ell + nu, beta)) + beta
    out = np.log(ell * (ell + d - 2)) + log_i - math.log(beta)
    if normalization == "softmax":
        return out - (math.log(scipy.special.ive(nu, beta)) + beta)
    return out + (nu * math.log(2) + math.lgamma(d / 2) - nu * math.log(beta))


def _default_degree(beta):
    # λ_ℓ ∝ ℓ² e^{−ℓ²/(2β)} for large β: the maximum sits near √(2β).
    degree = math.ceil(4 * math.sqrt(beta)) + 8
    check_budget(
        "beta",
        degree,
        MAX_DEGREE,
        what="harmonic degrees (about 4√β are computed)",
        hint="the maximum sits near √(2β); use a smaller β",
    )
    return int(degree)


def metastable_growth_rates(
    beta: float,
    d: int = 2,
    *,
    normalization: Literal["n", "softmax"] = "n",
    max_degree: int | None = None,
) -> np.ndarray:
    r"""Growth rates λ_ℓ of the mean-field equation linearised around the uniform measure on
    S^{d−1}, for the spherical harmonics of degree ℓ = 0, 1, …, ``max_degree``
    (Bruno–Pasqualotto–Agazzi, arXiv:2410.23228, §4, the linear phase; Fourier modes e^{ikθ}
    on the circle).

    The mean-field (USA) equation ∂_t ρ + div(ρ ∇(W∗ρ)/β) = 0, W∗ρ(x) = ∫ e^{β⟨x,y⟩} ρ(y) dσ(y),
    linearised at ρ₀ = 1/|S^{d−1}| gives ∂_t ρ₁ = −(ρ₀/β) Δ(W∗ρ₁). By Funk–Hecke,
    W∗Y_ℓ = (2π)^{d/2} β^{1−d/2} I_{ℓ+d/2−1}(β) Y_ℓ and −ΔY_ℓ = ℓ(ℓ+d−2) Y_ℓ, so

        λ_ℓ = ℓ(ℓ+d−2) 2^{d/2−1} Γ(d/2) β^{−d/2} I_{ℓ+d/2−1}(β)             (USA),
        λ_ℓ = ℓ(ℓ+d−2) I_{ℓ+d/2−1}(β) / (β I_{d/2−1}(β))                   (SA),

    the latter since (SA) divides the field by Z = ρ₀ W∗1 and W∗ρ₀ is constant. On the circle
    (d = 2) λ_k = k² I_k(β)/β (USA), k² I_k(β)/(β I_0(β)) (SA). λ_0 = 0 (mass is conserved).
    Rates overflow to inf for β ≳ 700; :func:`fastest_growing_degree` works in logs.

    Args:
        beta: β > 0.
        d: ambient dimension, tokens on S^{d−1} (d ≥ 2).
        normalization: ``"n"`` (USA, default) or ``"softmax"`` (SA).
        max_degree: the largest ℓ (default ⌈4√β⌉ + 8, past the maximum near √(2β)).

    Returns:
        (max_degree + 1,) float64 array, entry ℓ the rate of degree ℓ.

    Example:
        >>> import attnflow.theory as th
        >>> rates = th.metastable_growth_rates(5.0)
        >>> [round(float(r), 2) for r in rates[:5]]
        [0.0, 4.87, 14.0, 18.6, 16.35]
    """
    beta, d = _check_beta_d(beta, d, normalization)
    if max_degree is None:
        max_degree = _default_degree(beta)
    max_degree = check_int(max_degree, "max_degree", low=1)
    check_budget("max_degree", max_degree, MAX_DEGREE, what="harmonic degrees")
    rates = np.exp(_log_growth_rates(beta, d, normalization, max_degree))
    return np.concatenate([[0.0], rates])


def fastest_growing_degree(beta: float, d: int = 2) -> int:
    r"""The degree ℓ* ≥ 1 of the spherical harmonics whose linearised growth rate λ_ℓ
    (:func:`attnflow.theory.metastable_growth_rates`) is largest: the mode that the mean-field
    (USA) equation linearised at the uniform measure on S^{d−1} amplifies fastest
    (Bruno–Pasqualotto–Agazzi, arXiv:2410.23228, §4: Theorem 4.3 on the circle, and the same
    Funk–Hecke computation on S^{d−1}).

    ℓ* = argmax_ℓ ℓ(ℓ+d−2) I_{ℓ+d/2−1}(β) (the same argmax for (USA) and (SA)); for large β,
    ℓ* ≈ √(2β). On the circle (d = 2) the mode is cos(ℓ*θ + c): ℓ* equally spaced clusters
    (BPA's k_max; :func:`attnflow.theory.metastable_cluster_count`). For d ≥ 3, ℓ* is a
    *degree*, not a number of clusters: the harmonics of degree ℓ* span a space of dimension
    (2ℓ*+d−2)(ℓ*+d−3)!/(ℓ*!(d−2)!), and which combination the initial fluctuation selects, hence
    how many clusters form, is not fixed by the linear theory.

    Args:
        beta: β > 0.
        d: ambient dimension, tokens on S^{d−1} (d ≥ 2).

    Returns:
        ℓ*, a Python int.

    Example:
        >>> import attnflow.theory as th
        >>> th.fastest_growing_degree(5.0), th.fastest_growing_degree(100.0, d=3)
        (3, 14)
    """
    beta, d = _check_beta_d(beta, d, "n")
    log_rates = _log_growth_rates(beta, d, "n", _default_degree(beta))
    return int(np.argmax(log_rates)) + 1


def metastable_cluster_count(beta: float, d: int = 2) -> int:
    r"""The fastest-growing degree ℓ* of :func:`attnflow.theory.fastest_growing_degree`
    (same value, same arguments), under the name of its meaning on the circle.

    On the circle (d = 2), ℓ* = argmax_k k² I_k(β) is the number of equally spaced clusters the
    tokens first form from (nearly) uniform initial data: BPA's k_max (Bruno–Pasqualotto–Agazzi,
    arXiv:2410.23228, Theorem 4.3; β = 5 gives 3, the paper's Fig. 4). For d ≥ 3 the returned
    value is the *degree* of the fastest-growing spherical harmonics, not a number of clusters
    (see :func:`attnflow.theory.fastest_growing_degree`); the name is kept for the callers of
    the circle case.

    Args:
        beta: β > 0.
        d: ambient dimension (d ≥ 2).

    Example:
        >>> import attnflow.theory as th
        >>> th.metastable_cluster_count(5.0), th.metastable_cluster_count(100.0)
        (3, 14)
    """
    return fastest_growing_degree(beta, d)


def uniform_circle_mode_count(beta) -> np.ndarray:
    r"""Expected number of modes of the von Mises kernel density f(θ) = Σ_j e^{β cos(θ − θ_j)} of
    many i.i.d. uniform angles on the circle, by the Rice formula for the Gaussian limit of f:

        E[#modes] = √(λ₄/λ₂),   λ_{2m} = Σ_{k ≥ 1} k^{2m} I_k(β)²,

    the variances of f'' and f' (f = Σ_k I_k(β) e^{ik(θ − θ_j)} summed over j: the Fourier modes
    are uncorrelated, of variance ∝ I_k(β)²). As β → ∞, I_k(β)² ∝ e^{−k²/β} and the count tends to
    √(3β/2). This is the scale for uniform angles on the circle; √(β log β) (Geshkovski–Rigollet–
    Sun, arXiv:2412.09080, the main result of §1.1) is the one for Gaussian samples on the line.

    Args:
        beta: β > 0, scalar or array.

    Returns:
        An array of the shape of ``beta``.

    Example:
        >>> import attnflow.theory as th
        >>> [round(float(th.uniform_circle_mode_count(b)), 2) for b in (4.0, 16.0, 64.0)]
        [2.43, 4.89, 9.79]
    """
    from .._check import check_real_values

    beta = np.asarray(check_real_values(beta, "beta"), dtype=float)
    if np.any(beta <= 0):
        expected("beta", "values > 0", beta)
    flat = beta.reshape(-1)
    out = np.empty_like(flat)
    for i, b in enumerate(flat):
        k = np.arange(1, int(np.ceil(12 * math.sqrt(b))) + 40, dtype=float)
        weight = scipy.special.ive(k, b) ** 2  # e^{−2β} I_k², the scale cancels in the ratio
        out[i] = math.sqrt(np.sum(k**4 * weight) / np.sum(k**2 * weight))
    return out.reshape(beta.shape)
