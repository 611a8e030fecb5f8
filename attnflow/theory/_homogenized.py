r"""Closed forms of the homogenised limit of deep random attention (arXiv:2604.01978), two tokens.

The SDE (H) of :mod:`attnflow.models._homogenized` with n = 2 and Q = K = I: ρ = ⟨x_1, x_2⟩ is a
diffusion on [−1, 1] by itself (derivation in that module's docstring and docs/maths.md). These
are NumPy functions of (β, d): its coefficients, the growth rate at the antipodal pair, the
critical β above which clustering is mitigated, and the collapse probability from the scale
function.
"""

import equinox as eqx
import numpy as np

from .._check import (
    MAX_GRID_POINTS,
    check_beta,
    check_budget,
    check_formula_count,
    check_int,
    check_real_values,
    check_size,
    model_parameters_keyword_only,
)


def _check_dimension(d) -> float:
    """A real dimension d >= 2 (the closed forms are analytic in d; figures plot them on a fine
    grid of d)."""
    if np.ndim(d) != 0:
        raise ValueError(f"d: expected a token dimension d >= 2, got {d}")
    if not float(check_real_values(d, "d")) >= 2:
        raise ValueError(f"d: expected a token dimension d >= 2, got {d}")
    return float(d)


def _real(x, name, **bounds):
    return np.asarray(check_real_values(x, name, **bounds), dtype=float)


@model_parameters_keyword_only("rho", "beta", "d")
def homogenized_pair_coefficients(rho, *, beta, d, value_mean=0.0, noise=1.0):
    r"""Drift b(ρ) and squared diffusion σ²(ρ) of ρ = ⟨x_1, x_2⟩ under (H), n = 2, Q = K = I:

        b = (1−ρ²)[s²(2pq(d−2) − (p²+q²)ρ)/d + 2μp],   σ² = 2 s² (1−ρ²)² (p²+q²)/d,

    p = 1/(1 + e^{β(1−ρ)}), q = 1 − p, s = ``noise`` (derived in the module docstring; at
    β = μ = 0, b = (1−ρ²)(d−2−ρ)/(2d)).

    Example:
        >>> import attnflow as af
        >>> b, s2 = af.theory.homogenized_pair_coefficients(0.0, beta=0.0, d=8)
        >>> float(b), float(s2)
        (0.375, 0.125)
    """
    rho = _real(rho, "rho", low=-1.0, high=1.0)
    d = _check_dimension(d)
    beta = _real(beta, "beta")
    p = 1.0 / (1.0 + np.exp(beta * (1.0 - rho)))
    q = 1.0 - p
    s2 = float(_real(noise, "noise", low=0.0)) ** 2  # s >= 0: the noise's standard deviation
    value_mean = _real(value_mean, "value_mean")
    one_minus = 1.0 - rho**2
    drift = one_minus * (
        s2 * (2 * p * q * (d - 2) - (p * p + q * q) * rho) / d + 2 * value_mean * p
    )
    return drift, 2 * s2 * one_minus**2 * (p * p + q * q) / d


def homogenized_antipodal_rate(beta, d):
    r"""λ_−(β, d): growth rate of log(1 + ρ) near the antipodal pair ρ = −1 under (H), n = 2,
    Q = K = I, μ = 0:

        λ_− = 2(2d w − w² − 4w − 1) / (d (w + 1)²),   w = e^{2β};   λ_−(0, d) = (d − 3)/d.

    The antipodal pair attracts with positive probability iff λ_− < 0 (clustering mitigated).
    Compare the collapsed pair, log(1 − ρ) decaying at rate −(d−1)/d for every β.

    Example:
        >>> import attnflow as af
        >>> round(float(af.theory.homogenized_antipodal_rate(0.0, 8)), 6)
        0.625
    """
    # β >= 0, as every closed form of the homogenised model (docs/conventions.md, "Domains").
    w = np.exp(2.0 * _real(beta, "beta", low=0.0))
    d = _check_dimension(d)
    return 2 * (2 * d * w - w * w - 4 * w - 1) / (d * (w + 1) ** 2)


def homogenized_critical_beta(d):
    r"""β_c(d) = ½ arccosh(d − 2): λ_−(β, d) < 0 iff β > β_c(d), i.e. iff d < 2 + cosh 2β
    (n = 2, Q = K = I, μ = 0). β_c = 0 for d ≤ 3: the antipodal pair always attracts.

    Example:
        >>> import attnflow as af
        >>> round(float(af.theory.homogenized_critical_beta(4)), 6)
        0.658479
    """
    d = _real(d, "d", low=2.0)
    return 0.5 * np.arccosh(np.maximum(d - 2.0, 1.0))


def homogenized_collapse_probability(beta, d, *, rho0=None, value_mean=0.0, num=20001):
    r"""P(ρ(t) → 1) for the two-token diffusion of :func:`homogenized_pair_coefficients`
    (μ ≥ 0, noise 1), from ρ(0) = ``rho0``, or averaged over ρ(0) = ⟨x_1, x_2⟩ of two uniform
    tokens (density ∝ (1 − ρ²)^{(d−3)/2}) when ``rho0`` is None.

    With the scale function S, S'(ρ) = exp(−∫ 2b/σ²), P = (S(ρ0) − S(−1))/(S(1) − S(−1)) when
    S(−1) is finite, i.e. when λ_− < 0; otherwise P = 1. Computed in y = artanh ρ, where
    2b/σ² dρ/dy = [2pq(d−2) − (p²+q²)ρ + 2dμp]/(p²+q²) is bounded, by the trapezoid rule on
    ``num`` points.

    Example:
        >>> import attnflow as af
        >>> float(af.theory.homogenized_collapse_probability(0.5, 8))
        1.0
        >>> 0 < float(af.theory.homogenized_collapse_probability(3.0, 4)) < 1
        True
    """
    d = _check_dimension(d)
    beta = float(_real(beta, "beta"))
    num = check_size(num, "num", low=3, limit=2**24, what="quadrature points")
    mu = float(_real(value_mean, "value_mean"))
    if not mu >= 0:
        raise ValueError(f"value_mean: expected μ >= 0 (the ρ = 1 end stays attracting), got {mu}")

    def g(y):
        rho = np.tanh(y)
        one_minus = 2.0 / (1.0 + np.exp(2.0 * y))  # 1 − ρ without cancellation
        p = 1.0 / (1.0 + np.exp(beta * one_minus))
        q = 1.0 - p
        s2 = p * p + q * q
        return (2 * p * q * (d - 2) - s2 * rho + 2 * d * mu * p) / s2

    # Tails: the y-integrand of S decays like e^{(2 − g(−∞))y} and e^{−(2 + g(+∞))y}.
    decay_left = 2.0 - float(g(-60.0))
    if decay_left <= 0:
        return np.ones_like(np.asarray(rho0, dtype=float)) if rho0 is not None else 1.0
    y = np.linspace(-min(60.0 / decay_left, 1e4), 40.0, int(num))
    gy = g(y)
    G = np.concatenate([[0.0], np.cumsum(0.5 * (gy[1:] + gy[:-1]) * np.diff(y))])
    log_sech2 = 2.0 * (np.log(2.0) - np.abs(y) - np.log1p(np.exp(-2.0 * np.abs(y))))
    log_dS = -G + log_sech2
    dS = np.exp(log_dS - log_dS.max())
    S = np.concatenate([[0.0], np.cumsum(0.5 * (dS[1:] + dS[:-1]) * np.diff(y))])
    P = S / S[-1]
    if rho0 is not None:
        r = np.clip(np.asarray(rho0, dtype=float), -1.0, 1.0)
        return np.interp(np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15)), y, P)
    log_w = (d - 1.0) * 0.5 * log_sech2
    w = np.exp(log_w - log_w.max())
    return float(np.trapezoid(w * P, y) / np.trapezoid(w, y))


def attention_concentration(beta, n, *, nodes: int = 80, points: int = 4000) -> float:
    r"""κ(β, n) = E Σ_l a_l², a = softmax(β z), z ∈ R^n i.i.d. N(0, 1): the mean participation
    of one query's attention over n keys with i.i.d. Gaussian logits (1/n at β = 0, → 1 as
    β → ∞; ≈ e^{β²}/n while n ≫ e^{β²}).

    Computed from 1/S² = ∫_0^∞ u e^{−uS} du with S = Σ_l e^{βz_l} and independence:

        κ = n ∫_0^∞ u E[e^{2βz − u e^{βz}}] (E[e^{−u e^{βz}}])^{n−1} du,

    the z-expectations by Gauss–Hermite (``nodes``), the u-integral by the trapezoid rule in
    log u (``points``).

    Example:
        >>> import attnflow.theory as th
        >>> round(th.attention_concentration(0.0, 8), 6)
        0.125
    """
    beta = float(check_beta(beta))
    n = check_formula_count(n, "n", what="a number of keys")  # a number in the formula only
    nodes = check_int(nodes, "nodes", low=1)
    points = check_int(points, "points", low=2)
    check_budget(
        "points",
        nodes * points,
        MAX_GRID_POINTS,
        what="kernel evaluations (nodes × points)",
        factors={"nodes": nodes, "points": points},
    )
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    # κ is invariant under a common factor in the weights: scale e^{βz} by e^{−β z_max}.
    e = np.exp(beta * (z - z.max()))
    # S ∈ [n e^{β(z_min − z_max)}, n]: u spans the reciprocal range with margins.
    log_u = np.linspace(-np.log(n) - 8, -np.log(n) + beta * (z.max() - z.min()) + 12, points)
    u = np.exp(log_u)[:, None]
    phi0 = np.sum(w * np.exp(-u * e), axis=1)
    phi2 = np.sum(w * e * e * np.exp(-u * e), axis=1)
    tiny = np.finfo(float).tiny
    log_terms = (
        2 * log_u + np.log(np.maximum(phi2, tiny)) + (n - 1) * np.log(np.maximum(phi0, tiny))
    )
    integrand = n * np.exp(log_terms)  # du = u d log u
    return float(np.trapezoid(integrand, log_u))


class OrthogonalTradeoff(eqx.Module):
    r"""The linearisation of (HR) at orthonormal tokens (:func:`homogenized_orthogonal_tradeoff`):
    dρ̄/dt = growth + rate · ρ̄. ``plateau`` = growth/|rate| where rate < 0 (mitigated, else inf);
    ``collapse_time`` = log(1 + rate/growth)/rate (the time at which the linearised ρ̄ reaches 1;
    1/growth at rate = 0; inf where rate ≤ −growth); ``concentration`` = κ(β, n)."""

    growth: float
    rate: float
    plateau: float
    collapse_time: float
    concentration: float


def homogenized_orthogonal_tradeoff(beta, n, d) -> OrthogonalTradeoff:
    r"""Dimension / context length / temperature trade-off of the random-Q, K homogenised limit
    (HR) of :mod:`attnflow.models._homogenized` (the model of arXiv:2604.01978 with centred
    Gaussian values, whose tangential drift vanishes). Derived here, not transcribed: the paper's
    statement could not be retrieved.

    Under (HR) the inner products ρ_ij = ⟨x_i, x_j⟩ have the Itô drift

        [C_ij (d − 2 + ρ_ij²) − (d − 1)(C_ii + C_jj) ρ_ij / 2] / d

    (the cross-variation tr(P_i C_ij P_j)/d = C_ij(d − 2 + ρ²)/d and the two Itô corrections).
    Near orthonormal tokens with all overlaps ρ_ll' ≈ ρ̄ and head dimension k → ∞ the logits
    of one query are i.i.d. N(0, β²) and the rows independent, so C_ij = 1/n + ρ̄(1 − 1/n)
    (i ≠ j) and C_ii = κ + ρ̄(1 − κ), κ = :func:`attention_concentration` (β, n), up to
    O(β²ρ̄/n). Linearising, dρ̄/dt = g + λ ρ̄ with

        g = (d − 2)/(d n),      λ = [(d − 2)(1 − 1/n) − (d − 1) κ(β, n)] / d.

    The orthonormal configuration is unstable (tokens collapse, in a time ≈ log(1 + λ/g)/λ)
    iff λ > 0, i.e. iff κ(β, n) < (d − 2)(n − 1)/((d − 1) n); otherwise ρ̄ settles near the
    plateau g/|λ| and clustering is mitigated. Since κ ≈ e^{β²}/n for n ≫ e^{β²}, long
    contexts need β² ≳ log n to stay mitigated, and larger d makes it harder.

    Example:
        >>> import attnflow.theory as th
        >>> r = th.homogenized_orthogonal_tradeoff(0.0, 64, 8)
        >>> round(r.rate, 6), round(r.collapse_time, 3)
        (0.724609, 5.714)
    """
    beta = float(check_beta(beta))
    n = check_size(n, "n", low=2)  # tokens
    d = float(check_size(d, "d", low=3))  # token dimension d > 2
    kappa = attention_concentration(beta, n)
    growth = (d - 2) / (d * n)
    rate = ((d - 2) * (1 - 1 / n) - (d - 1) * kappa) / d
    plateau = growth / -rate if rate < 0 else np.inf
    if rate == 0:
        time = 1 / growth
    elif rate > -growth:
        time = np.log1p(rate / growth) / rate
    else:
        time = np.inf
    return OrthogonalTradeoff(
        growth=float(growth),
        rate=float(rate),
        plateau=float(plateau),
        collapse_time=float(time),
        concentration=kappa,
    )
