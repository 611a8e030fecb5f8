r"""Deep random multi-head attention and its homogenised limit: an SDE with common matrix noise.

The discrete model (Koubbi, Geshkovski, Rigollet, arXiv:2604.01978; seed 001 gives only the
abstract) is :func:`attnflow.random_multihead_attention` run as a post-LN Transformer with
L layers of step τ = T/L and H heads, the value matrices V_{l,h} = μ_l I + G_{l,h}/√d resampled
i.i.d. (G standard Gaussian) in every layer and head:

    x_i ← normalize(x_i + τ c Σ_h Σ_j a^h_ij V_{l,h} x_j).

**Derivation of the limit (done here).** Hold Q, K fixed (``fixed={"Q": Q, "K": K}``), write
m_i = Σ_j a_ij x_j for the attention average and C_ij = ⟨m_i, m_j⟩. In the diffusive scaling
(c = 1/√(Hτ), μ_l = μ√(τ/H)) the increment is Δ_i = τ μ m_i + √τ ξ_i with
ξ_i = H^{-1/2} Σ_h G_h m_i/√d, a centred Gaussian vector, the same G's for every token (common
noise), with E[ξ_i ξ_jᵀ] = (C_ij/d) I — for any H, since Gaussians sum to a Gaussian. Expand the
normalisation to second order, a = ⟨x_i, Δ_i⟩:

    normalize(x_i + Δ_i) = x_i + P_{x_i}Δ_i − a P_{x_i}Δ_i − ½|P_{x_i}Δ_i|² x_i + O(|Δ|³).

Taking expectations, E[a P_{x_i}Δ_i] = τ P_{x_i} E[ξ_i ξ_iᵀ] x_i + O(τ²) = O(τ²) (whether or
not the attention output is projected before the step), E|P_{x_i}ξ_i|² = (d−1)C_ii/d. So
per layer the mean increment is τ[μ P_{x_i} m_i − ((d−1)/(2d)) C_ii x_i] + O(τ^{3/2}) and the
covariance τ P_{x_i}(C_ij/d)P_{x_j}: the generator of the Itô SDE

    dx_i = μ P_{x_i} m_i dt − ((d−1)/(2d)) C_ii x_i dt + P_{x_i} dB m_i / √d,       (H)

with B a d × d matrix of independent Brownian motions shared by all tokens. The Gaussian values
contribute no drift along the sphere: the only drift besides μ is the Itô correction that keeps
|x_i| = 1 (d|x_i|² = 0). In the ``"ode"`` scaling (c = 1/H, μ_l = μ) the per-layer noise has
variance O(τ²/H) and the limit is the deterministic (SA) flow ẋ_i = μ P_{x_i} m_i. With random
Q, K the covariance would be C_ij = E_{Q,K}⟨m_i, m_j⟩, which is not of the product form above:
:func:`solve_homogenized` treats fixed Q, K only.

**Two tokens, Q = K = I (closed form, derived here).** ρ = ⟨x_1, x_2⟩ is then a diffusion on
[−1, 1] by itself. With p = a_12 = 1/(1 + e^{β(1−ρ)}), q = 1 − p:

    dρ = (1−ρ²)[(2pq(d−2) − (p²+q²)ρ)/d + 2μp] dt + (1−ρ²) √(2(p²+q²)/d) dW.

At β = μ = 0 the drift is (1 − ρ²)(d − 2 − ρ)/(2d). Both ρ = ±1 are absorbing. Linearising,
log(1 − ρ) grows at the rate −(d−1)/d (collapse is always locally stable) and log(1 + ρ) at

    λ_−(β, d) = 2(2d w − w² − 4w − 1) / (d (w + 1)²),   w = e^{2β}   (μ = 0),

so the antipodal pair attracts with positive probability iff λ_− < 0, i.e. iff

    d < 2 + cosh 2β,   equivalently β > β_c(d) = ½ arccosh(d − 2)  (d ≥ 3).

Below β_c the pair collapses almost surely; above it, clustering is mitigated, with the
collapse probability given by the scale function of the diffusion
(:func:`homogenized_collapse_probability`).
"""

import math
from typing import Literal

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import lineax as lx
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ._check import check_beta, check_key, check_tokens, is_traced
from ._fields._self_attention import SelfAttention
from ._sphere import project_tangent, tangent, unit_rows

HOMOGENIZED_REGIMES: dict[str, dict] = {
    "diffusive": {
        "scaling": "diffusive",
        "head_scale": "c = 1/sqrt(H tau)",
        "value_mean_per_layer": "mu_l = mu sqrt(tau/H)",
        "noise": 1.0,
        "limit": "Ito SDE (H) with common d x d matrix noise, as L -> infinity (any H)",
    },
    "ode": {
        "scaling": "ode",
        "head_scale": "c = 1/H",
        "value_mean_per_layer": "mu_l = mu",
        "noise": 0.0,
        "limit": "deterministic (SA) flow dx_i/dt = mu P_{x_i} m_i, as tau/H -> 0",
    },
}
"""The scaling regimes of depth L, step τ = T/L and heads H: the ``scaling`` argument of
:func:`attnflow.random_multihead_attention` and the ``regime`` argument of
:func:`solve_homogenized` that is its limit. The per-layer noise variance is τ²c²H/d · C_ii,
i.e. τ · noise²/d · C_ii: ``noise`` is the factor in front of dB in (H)."""


def _attention_average(attention: SelfAttention, y):
    """m_i = Σ_j a_ij x̂_j at the unit tokens x̂ = y/|y|."""
    return attention.attention_output(unit_rows(y))


def solve_homogenized(
    x0: Float[Array, "n d"],
    t1,
    *,
    beta=1.0,
    key: PRNGKeyArray | None = None,
    Q=None,
    K=None,
    value_mean=0.0,
    regime: Literal["diffusive", "ode"] = "diffusive",
    t0=0.0,
    ts=None,
    dt=1e-2,
    solver: diffrax.AbstractSolver | None = None,
    brownian: Literal["tree", "fast"] = "tree",
    max_steps: int | None = None,
    throw: bool = True,
) -> diffrax.Solution:
    r"""Solve the homogenised limit of deep random multi-head attention with diffrax.

    The Itô SDE (H) of the module docstring, on (S^{d−1})^n::

        dx_i = μ P_{x_i} m_i dt − ((d−1)/(2d)) C_ii x_i dt + P_{x_i} dB m_i / √d,

    m_i = Σ_j a_ij x_j with a_ij = softmax_j β⟨Q x_i, K x_j⟩ (Q, K fixed), C_ii = |m_i|², and B a
    d × d Brownian motion shared by all tokens. It is the L → ∞ limit of
    ``layers(random_multihead_attention(..., scaling="diffusive", fixed={"Q": Q, "K": K}), ...)``
    (tested by Monte Carlo). ``regime="ode"`` drops the noise and its Itô correction: the
    deterministic limit ẋ_i = μ P_{x_i} m_i of the ``"ode"`` scaling (:data:`HOMOGENIZED_REGIMES`).

    **Main arguments**
        x0: (n, d) tokens on the unit sphere.
        t1: final depth-time T.
        beta: inverse temperature β ≥ 0.
        key: PRNG key of the Brownian motion (required for ``"diffusive"``).
        Q, K: (k, d) query and key matrices, identity when omitted.
        value_mean: μ, the mean of the value matrices along the identity.
        regime: ``"diffusive"`` (SDE) or ``"ode"`` (deterministic).
        ts: save times on the ``dt`` grid (default t1 only); ``sol.ys`` is (len(ts), n, d).

    **Other arguments**
        dt: the constant step. solver: default ``diffrax.Euler()`` (Euler–Maruyama; Itô);
        brownian: ``"tree"`` (``VirtualBrownianTree``, reproducible, differentiable) or
        ``"fast"`` (``UnsafeBrownianPath``, for forward Monte Carlo); max_steps: default
        ⌈(t1 − t0)/dt⌉ + 1; throw: as in diffrax.

    The sphere: the coefficients are evaluated at x/|x| with P_x = I − x xᵀ/|x|², so
    d|x_i|² = ((d−1)/d) C_ii (1 − |x_i|²) dt: the sphere is invariant and attracting; saved
    values are normalised.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 4, 3)
        >>> sol = af.solve_homogenized(x0, 1.0, beta=1.0, key=jr.key(1), dt=0.05)
        >>> sol.ys.shape, bool(jnp.allclose(jnp.linalg.norm(sol.ys, axis=-1), 1.0))
        ((1, 4, 3), True)
    """
    key = None if key is None else check_key(key)  # an int seed or legacy key
    x0 = check_tokens(x0, "x0")
    beta = check_beta(beta)
    if regime not in HOMOGENIZED_REGIMES:
        raise ValueError(f"regime: expected one of {sorted(HOMOGENIZED_REGIMES)}, got {regime!r}")
    if brownian not in ("tree", "fast"):
        raise ValueError(f"brownian: expected 'tree' or 'fast', got {brownian!r}")
    noisy = HOMOGENIZED_REGIMES[regime]["noise"] > 0
    if noisy and key is None:
        raise ValueError("key: required for the stochastic regime 'diffusive', got None")
    if not is_traced(dt) and not float(dt) > 0:
        raise ValueError(f"dt: expected a positive step, got {dt}")
    if jnp.ndim(value_mean) != 0:
        raise ValueError(f"value_mean: expected a scalar, got shape {jnp.shape(value_mean)}")
    n, d = x0.shape
    dtype = jnp.result_type(x0)
    attention = SelfAttention(beta, Q, K)
    if max_steps is None:
        if is_traced(t0) or is_traced(t1) or is_traced(dt):
            raise ValueError("max_steps: required when t0, t1 or dt are traced")
        max_steps = math.ceil((float(t1) - float(t0)) / float(dt) * (1 + 1e-9)) + 1
    t0, t1, dt = (jnp.asarray(v, dtype=dtype) for v in (t0, t1, dt))
    mu = jnp.asarray(value_mean, dtype=dtype)
    ito = (d - 1) / (2 * d)

    def drift(t, y, args):
        m = _attention_average(attention, y)
        value = mu * tangent(unit_rows(y), m)
        if noisy:
            value = value - ito * jnp.sum(m * m, axis=-1, keepdims=True) * y
        return value

    terms = diffrax.ODETerm(drift)
    if noisy:
        structure = jax.ShapeDtypeStruct((d, d), dtype)

        def diffusion(t, y, args):
            m = _attention_average(attention, y) / math.sqrt(d)

            def apply(dB):
                w = m @ dB.T  # rows (dB m_i)ᵀ
                return project_tangent(y, w)

            return lx.FunctionLinearOperator(apply, structure)

        if brownian == "fast":
            path = diffrax.UnsafeBrownianPath(shape=structure, key=key)
        else:
            path = diffrax.VirtualBrownianTree(t0, t1, tol=dt / 4, shape=structure, key=key)
        terms = diffrax.MultiTerm(terms, diffrax.ControlTerm(diffusion, path))
    fn = lambda t, y, args: unit_rows(y)  # noqa: E731
    if ts is None:
        saveat = diffrax.SaveAt(t1=True, fn=fn)
    else:
        ts = jnp.asarray(ts, dtype=dtype)
        if ts.ndim != 1:
            raise ValueError(f"ts: expected a 1-d array of save times, got shape {ts.shape}")
        if not is_traced(ts) and np.any(np.diff(np.asarray(ts)) < 0):
            raise ValueError("ts: expected non-decreasing save times")
        saveat = diffrax.SaveAt(ts=ts, fn=fn)
    kwargs = {"adjoint": diffrax.ForwardMode()} if noisy and brownian == "fast" else {}
    return diffrax.diffeqsolve(
        terms,
        diffrax.Euler() if solver is None else solver,
        t0=t0,
        t1=t1,
        dt0=dt,
        y0=x0,
        saveat=saveat,
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=max_steps,
        throw=throw,
        **kwargs,
    )


def homogenized_phase_diagram(
    key: PRNGKeyArray,
    *,
    n: int,
    d: int,
    betas,
    ts,
    realizations: int,
    delta=1e-3,
    value_mean=0.0,
    dt=2e-2,
    dtype=None,
) -> Float[Array, "betas times"]:
    r"""P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) for the homogenised SDE (H) with Q = K = I, estimated from
    ``realizations`` paths from i.i.d. uniform tokens, for every β in ``betas`` and t in ``ts``.

    Common random numbers: every β uses the same initial tokens and the same Brownian paths.
    The standard error of each entry is √(P(1−P)/realizations). Closed form for n = 2 as
    t → ∞: :func:`homogenized_collapse_probability`.

    Returns:
        (len(betas), len(ts)) array of probabilities.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> af.homogenized_phase_diagram(jr.key(0), n=2, d=3, betas=[0.0, 4.0], ts=[1.0],
        ...                              realizations=8, dt=0.1).shape
        (2, 1)
    """
    key = None if key is None else check_key(key)  # an int seed or legacy key
    betas = jnp.atleast_1d(jnp.asarray(betas, dtype=dtype))
    ts = jnp.atleast_1d(jnp.asarray(ts, dtype=betas.dtype))
    if int(n) < 2:
        raise ValueError(f"n: expected at least 2 tokens, got {n}")
    if int(realizations) < 1:
        raise ValueError(f"realizations: expected a positive integer, got {realizations}")
    if betas.ndim != 1 or ts.ndim != 1:
        raise ValueError(f"betas, ts: expected 1-d arrays, got shapes {betas.shape}, {ts.shape}")
    if not float(delta) > 0:
        raise ValueError(f"delta: expected a positive tolerance, got {delta}")
    k0, k1 = jr.split(key)
    x0 = jr.normal(k0, (int(realizations), int(n), int(d)), betas.dtype)
    x0 = unit_rows(x0)
    keys = jr.split(k1, int(realizations))
    t1 = float(np.max(np.asarray(ts)))
    max_steps = math.ceil(t1 / float(dt) * (1 + 1e-9)) + 1

    def one(beta, x, k):
        sol = solve_homogenized(
            x,
            ts[-1],
            beta=beta,
            key=k,
            value_mean=value_mean,
            ts=ts,
            dt=dt,
            brownian="fast",
            max_steps=max_steps,
        )
        return jnp.sum(sol.ys[:, 0] * sol.ys[:, 1], axis=-1) >= 1 - delta

    hits = jax.jit(jax.vmap(jax.vmap(one, (None, 0, 0)), (0, None, None)))(betas, x0, keys)
    return jnp.mean(hits, axis=1)


# --------------------------------------------------------------------------------------------
# Two tokens with Q = K = I: closed forms (NumPy).


def _check_dimension(d) -> float:
    if np.ndim(d) != 0 or not float(d) >= 2:
        raise ValueError(f"d: expected a token dimension d >= 2, got {d}")
    return float(d)


def homogenized_pair_coefficients(rho, beta, d, *, value_mean=0.0, noise=1.0):
    r"""Drift b(ρ) and squared diffusion σ²(ρ) of ρ = ⟨x_1, x_2⟩ under (H), n = 2, Q = K = I:

        b = (1−ρ²)[s²(2pq(d−2) − (p²+q²)ρ)/d + 2μp],   σ² = 2 s² (1−ρ²)² (p²+q²)/d,

    p = 1/(1 + e^{β(1−ρ)}), q = 1 − p, s = ``noise`` (derived in the module docstring; at
    β = μ = 0, b = (1−ρ²)(d−2−ρ)/(2d)).

    Example:
        >>> import attnflow as af
        >>> b, s2 = af.theory.homogenized_pair_coefficients(0.0, 0.0, 8)
        >>> float(b), float(s2)
        (0.375, 0.125)
    """
    rho = np.asarray(rho, dtype=float)
    d = _check_dimension(d)
    p = 1.0 / (1.0 + np.exp(float(beta) * (1.0 - rho)))
    q = 1.0 - p
    s2 = float(noise) ** 2
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
    w = np.exp(2.0 * np.asarray(beta, dtype=float))
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
    d = np.asarray(d, dtype=float)
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
    beta = float(beta)
    mu = float(value_mean)
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
