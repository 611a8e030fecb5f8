r"""Deep random multi-head attention and its homogenised limit: an SDE with common noise.

The discrete model (Koubbi, Geshkovski, Rigollet, "Homogenized Transformers", arXiv:2604.01978;
only the abstract could be retrieved: every formula below is derived here, not transcribed) is
:func:`attnflow.random_multihead_attention` run as a post-LN Transformer with L layers of step
τ = T/L and H heads, the value matrices V_{l,h} = μ_l I + G_{l,h}/√d resampled i.i.d.
(G standard Gaussian) in every layer and head, and Q_{l,h}, K_{l,h} either held fixed or resampled
too:

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
Q, K see below.

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

**Random Q, K, V (the paper's model; derived here).** Let Q_{l,h}, K_{l,h} = G/k^{1/4} be drawn
afresh in every layer and head too, write θ = (Q, K), m^θ_i = Σ_j a^θ_ij x_j and

    M_i(x) = E_θ m^θ_i,        C_ij(x) = E_θ ⟨m^θ_i, m^θ_j⟩.

In the diffusive scaling the increment is Δ_i = τ μ H^{-1} Σ_h m^{θ_h}_i + √τ ξ_i with
ξ_i = H^{-1/2} Σ_h G_h m^{θ_h}_i/√d. Given the θ_h, ξ is centred Gaussian with covariance
H^{-1} Σ_h ⟨m^{θ_h}_i, m^{θ_h}_j⟩ I/d; averaging over θ, E[ξ_i ξ_jᵀ] = (C_ij/d) I for every H
(ξ itself is a Gaussian mixture, but only its first two moments enter the generator). The
fluctuation of the mean part, τμ(H^{-1}Σ_h m^{θ_h} − M), has variance O(τ²/H) per layer: O(τ/H)
over the depth, gone in the limit. The expansion above then gives the Itô SDE

    dx_i = μ P_{x_i} M_i dt − ((d−1)/(2d)) C_ii x_i dt + P_{x_i} dN_i,
    E[dN_i dN_jᵀ] = (C_ij/d) I dt,                                                    (HR)

the noise common to all tokens through the correlations C_ij (realised as N = R W/√d with
R = C^{1/2} and W an (n, d) Brownian motion). With centred Gaussian values (μ = 0) the drift
along the sphere vanishes, as the paper's abstract states for the Gaussian setting: what is left
is the Itô correction, normal to the sphere. In the ``"ode"`` scaling the limit is
ẋ_i = μ P_{x_i} M_i. Fixed Q, K (a point mass in θ) give C_ij = ⟨m_i, m_j⟩ and (HR) is (H).
M and C have no closed form (softmax of Gaussian logits): :func:`solve_homogenized_random_qk`
computes them by a fixed quadrature of S antithetic pairs (θ_s, (−Q_s, K_s)) drawn from the
law of θ, so the SDE is exact for θ uniform on the nodes and its coefficients are within
O(S^{-1/2}) of (HR).
"""

import math
from typing import Literal

import jax
import jax.numpy as jnp
import jax.random as jr
import lineax as lx
from jaxtyping import Array, Float, PRNGKeyArray

from .._check import (
    MAX_ARRAY_ELEMENTS,
    as_array,
    check_beta,
    check_budget,
    check_delta,
    check_dtype_option,
    check_finite_scalar,
    check_int,
    check_key,
    check_positive_scalar,
    check_real,
    check_real_values,
    check_save_times,
    check_size,
    check_tokens,
    expected,
)
from .._fields._self_attention import MultiHeadAttention, SelfAttention
from .._integrators._sde import default_max_steps, solve_fixed_step_sde
from .._solve import check_solve_objects
from .._sphere import project_tangent, tangent, unit_rows

HOMOGENIZED_REGIMES: dict[str, dict] = {
    "diffusive": {
        "scaling": "diffusive",
        "head_scale": "c = 1/sqrt(H tau)",
        "value_mean_per_layer": "mu_l = mu sqrt(tau/H)",
        "noise": 1.0,
        "limit": "Ito SDE (H) / (HR) with noise common to all tokens, as L -> infinity (any H)",
    },
    "ode": {
        "scaling": "ode",
        "head_scale": "c = 1/H",
        "value_mean_per_layer": "mu_l = mu",
        "noise": 0.0,
        "limit": "deterministic flow dx_i/dt = mu P_{x_i} M_i, as tau/H -> 0",
    },
}
"""The scaling regimes of depth L, step τ = T/L and heads H: the ``scaling`` argument of
:func:`attnflow.random_multihead_attention` and the ``regime`` argument of
:func:`solve_homogenized_fixed_qk` / :func:`solve_homogenized_random_qk` that is its limit. The
per-layer noise variance is τ²c²H/d · C_ii, i.e. τ · noise²/d · C_ii: ``noise`` is the factor in
front of the noise in (H) and (HR)."""


def _check_common(x0, beta, key, regime, value_mean):
    """The arguments of the homogenised limits that are not the SDE driver's (times, step, save
    times, max_steps and throw are checked by :func:`solve_fixed_step_sde`)."""
    key = None if key is None else check_key(key)
    x0 = check_tokens(x0, "x0")
    beta = check_beta(beta)
    if regime not in HOMOGENIZED_REGIMES:
        raise ValueError(f"regime: expected one of {sorted(HOMOGENIZED_REGIMES)}, got {regime!r}")
    noisy = HOMOGENIZED_REGIMES[regime]["noise"] > 0
    if noisy and key is None:
        raise ValueError("key: required for the stochastic regime 'diffusive', got None")
    value_mean = check_finite_scalar(value_mean, "value_mean")
    return key, x0, beta, noisy, value_mean


def _solve(x0, t1, coefficients, diffusion, noise, noisy, mu, **options):
    """The SDE (HR) on the driver: ``coefficients(y) = (M, C_ii)``; saved values normalised."""
    check_solve_objects(None, options.get("solver"), field_optional=True)
    ito = (x0.shape[1] - 1) / (2 * x0.shape[1])

    def drift(t, y, args):
        M, c_ii = coefficients(y)
        value = mu * tangent(unit_rows(y), M)
        if noisy:
            value = value - ito * c_ii[:, None] * y
        return value

    return solve_fixed_step_sde(
        drift,
        diffusion if noisy else None,
        noise,
        x0,
        options.pop("t0"),
        t1,
        save_fn=lambda t, y, args: unit_rows(y),
        **options,
    )


def solve_homogenized_fixed_qk(
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
    solver=None,
    brownian: Literal["tree", "fast"] = "tree",
    max_steps: int | None = None,
    throw: bool = True,
):
    r"""The homogenised limit of deep attention with Q, K held fixed and Gaussian values resampled
    in every layer and head (the Itô SDE (H) of :mod:`attnflow.models._homogenized`; derived here
    for the model of arXiv:2604.01978 with ``fixed={"Q": Q, "K": K}``)::

        dx_i = μ P_{x_i} m_i dt − ((d−1)/(2d)) C_ii x_i dt + P_{x_i} dB m_i / √d,

    m_i = Σ_j a_ij x_j with a_ij = softmax_j β⟨Q x_i, K x_j⟩, C_ii = |m_i|², and B a d × d
    Brownian motion shared by all tokens. It is the L → ∞ limit of
    ``layers(random_multihead_attention(..., scaling="diffusive", fixed={"Q": Q, "K": K}), ...)``
    (tested by Monte Carlo, and path by path against a NumPy Euler–Maruyama). ``regime="ode"``
    drops the noise and its Itô correction: ẋ_i = μ P_{x_i} m_i. ``solve_homogenized`` is this
    function; for the paper's model with random Q, K see :func:`solve_homogenized_random_qk`.

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
        brownian: ``"tree"`` (``VirtualBrownianTree``, tol dt/4, reproducible, differentiable)
        or ``"fast"`` (``UnsafeBrownianPath``, for forward Monte Carlo); max_steps: default
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
    key, x0, beta, noisy, value_mean = _check_common(x0, beta, key, regime, value_mean)
    d, dtype = x0.shape[1], jnp.result_type(x0)
    attention = SelfAttention(beta, Q, K)

    def coefficients(y):
        m = attention.attention_output(unit_rows(y))
        return m, jnp.sum(m * m, axis=-1)

    noise = jax.ShapeDtypeStruct((d, d), dtype)

    def diffusion(t, y, args):
        m = attention.attention_output(unit_rows(y)) / math.sqrt(d)
        # rows (dB m_i)ᵀ, projected on the tangent space at y_i
        return lx.FunctionLinearOperator(lambda dB: project_tangent(y, m @ dB.T), noise)

    mu = jnp.asarray(value_mean, dtype=dtype)
    return _solve(
        x0, t1, coefficients, diffusion, noise, noisy, mu, t0=t0, dt=dt, key=key,
        solver=solver, brownian=brownian, ts=ts, max_steps=max_steps, throw=throw,
    )  # fmt: skip


solve_homogenized = solve_homogenized_fixed_qk
"""The homogenised limit (H) of deep random attention with Q, K held fixed and random values:
the same function as :func:`solve_homogenized_fixed_qk` (arXiv:2604.01978; derivation in
:mod:`attnflow.models._homogenized`). For Q, K resampled too: :func:`solve_homogenized_random_qk`.
"""


def random_qk_nodes(
    key: PRNGKeyArray, d: int, *, nodes: int = 512, k: int | None = None, dtype=None
):
    r"""Quadrature nodes for E over θ = (Q, K), Q, K = G/k^{1/4} i.i.d. (k × d, G standard
    Gaussian; the law of :func:`attnflow.random_multihead_attention`): ``nodes`` draws θ_s and
    their antithetic partners (−Q_s, K_s), whose logits are negated. Returns (Q, K), each
    (2·nodes, k, d).

    Example:
        >>> import jax.random as jr, attnflow.models as am
        >>> Q, K = am.random_qk_nodes(jr.key(0), 3, nodes=4)
        >>> Q.shape
        (8, 3, 3)
    """
    key = check_key(key)
    d = check_size(d, "d", low=2)
    nodes = check_int(nodes, "nodes", low=1)
    k = d if k is None else check_int(k, "k", low=1)
    check_budget(
        "nodes",
        2 * nodes * k * d,
        MAX_ARRAY_ELEMENTS,
        what="numbers in the nodes (2 x nodes x k x d)",
        factors={"nodes": nodes, "k": k, "d": d},
        hint="a few hundred nodes already average the law of (Q, K) well",
    )
    dtype = check_dtype_option(dtype, "dtype")
    dtype = jnp.result_type(float) if dtype is None else dtype
    kq, kk = jr.split(key)
    Q = jr.normal(kq, (nodes, k, d), dtype) / k**0.25
    K = jr.normal(kk, (nodes, k, d), dtype) / k**0.25
    return jnp.concatenate([Q, -Q]), jnp.concatenate([K, K])


def random_qk_moments(x: Float[Array, "n d"], beta, Q, K):
    r"""M_i = E_θ m^θ_i and C_ij = E_θ⟨m^θ_i, m^θ_j⟩ of (HR), as the mean over the nodes (Q, K)
    ((S, k, d) each; :func:`random_qk_nodes`) of the attention averages m^θ_i = Σ_j a^θ_ij x_j.
    Returns (M: (n, d), C: (n, n)).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow.models as am
        >>> Q, K = am.random_qk_nodes(jr.key(0), 3, nodes=8)
        >>> M, C = am.random_qk_moments(jnp.eye(3), 0.0, Q, K)  # β = 0: uniform attention
        >>> bool(jnp.allclose(C, 1 / 3))
        True
    """
    x = check_tokens(x, "x")
    beta = check_beta(beta)
    Q, K = (as_array(m, name) for m, name in ((Q, "Q"), (K, "K")))
    for m, name in ((Q, "Q"), (K, "K")):
        check_real(m, name)
        if jnp.ndim(m) != 3 or jnp.shape(m)[-1] != x.shape[1]:
            expected(name, f"quadrature nodes of shape (S, k, {x.shape[1]}) (random_qk_nodes)", m)
    return _random_qk_moments(x, beta, Q, K)


def _random_qk_moments(x, beta, Q, K):
    """:func:`random_qk_moments` without the checks, for the SDE's coefficients (evaluated at
    every step of a compiled solve)."""
    heads = MultiHeadAttention(beta=beta, Q=Q.astype(x.dtype), K=K.astype(x.dtype))
    m = jnp.einsum("sij,jd->sid", heads.attention_matrix(x), x)
    return jnp.mean(m, axis=0), jnp.einsum("sid,sjd->ij", m, m) / m.shape[0]


def _sqrt_psd(C):
    w, U = jnp.linalg.eigh(C)
    return (U * jnp.sqrt(jnp.clip(w, 0.0))[None, :]) @ U.T


def solve_homogenized_random_qk(
    x0: Float[Array, "n d"],
    t1,
    *,
    beta=1.0,
    key: PRNGKeyArray | None = None,
    value_mean=0.0,
    regime: Literal["diffusive", "ode"] = "diffusive",
    k: int | None = None,
    nodes: int = 512,
    nodes_key: PRNGKeyArray | None = None,
    t0=0.0,
    ts=None,
    dt=1e-2,
    solver=None,
    brownian: Literal["tree", "fast"] = "tree",
    max_steps: int | None = None,
    throw: bool = True,
):
    r"""The homogenised limit (HR) of the paper's deep random attention, Q, K and V resampled in
    every layer and head (Koubbi–Geshkovski–Rigollet, arXiv:2604.01978; the limit is derived in
    :mod:`attnflow.models._homogenized`, not transcribed)::

        dx_i = μ P_{x_i} M_i dt − ((d−1)/(2d)) C_ii x_i dt + P_{x_i} dN_i,
        E[dN_i dN_jᵀ] = (C_ij/d) I dt,   M_i = E_θ m^θ_i,   C_ij = E_θ⟨m^θ_i, m^θ_j⟩,

    N = C^{1/2} W/√d with W an (n, d) Brownian motion. It is the L → ∞ limit of
    ``layers(random_multihead_attention(..., scaling=regime), ...)`` for any number of heads
    (tested by Monte Carlo at growing depth and heads). With μ = 0 (centred Gaussian values) the
    tangential drift vanishes. ``regime="ode"``: ẋ_i = μ P_{x_i} M_i. E_θ is the mean over
    :func:`random_qk_nodes` (2·``nodes`` antithetic nodes, drawn from ``nodes_key``, default
    ``jax.random.key(0)``); ``k`` is the head dimension (default d).

    Other arguments as in :func:`solve_homogenized_fixed_qk`; ``sol.ys`` is (len(ts), n, d).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af, attnflow.models as am
        >>> x0 = af.random_tokens(jr.key(0), 4, 3)
        >>> sol = am.solve_homogenized_random_qk(x0, 0.5, key=jr.key(1), dt=0.05, nodes=64)
        >>> sol.ys.shape, bool(jnp.allclose(jnp.linalg.norm(sol.ys, axis=-1), 1.0))
        ((1, 4, 3), True)
    """
    key, x0, beta, noisy, value_mean = _check_common(x0, beta, key, regime, value_mean)
    n, d = x0.shape
    dtype = jnp.result_type(x0)
    nodes_key = jr.key(0) if nodes_key is None else check_key(nodes_key, "nodes_key")
    Q, K = random_qk_nodes(nodes_key, d, nodes=nodes, k=k, dtype=dtype)

    def coefficients(y):
        M, C = _random_qk_moments(unit_rows(y), beta, Q, K)
        return M, jnp.diagonal(C)

    noise = jax.ShapeDtypeStruct((n, d), dtype)

    def diffusion(t, y, args):
        _, C = _random_qk_moments(unit_rows(y), beta, Q, K)
        R = _sqrt_psd(C) / math.sqrt(d)
        return lx.FunctionLinearOperator(lambda W: project_tangent(y, R @ W), noise)

    mu = jnp.asarray(value_mean, dtype=dtype)
    return _solve(
        x0, t1, coefficients, diffusion, noise, noisy, mu, t0=t0, dt=dt, key=key,
        solver=solver, brownian=brownian, ts=ts, max_steps=max_steps, throw=throw,
    )  # fmt: skip


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
    key = check_key(key)
    n = check_size(n, "n", low=2)
    d = check_size(d, "d", low=2)
    realizations = check_size(realizations, "realizations", low=1)
    delta = check_delta(delta)
    value_mean = check_finite_scalar(value_mean, "value_mean")
    dt = check_positive_scalar(dt, "dt", what="step")
    betas = jnp.atleast_1d(jnp.asarray(check_real_values(betas, "betas", low=0.0), dtype=dtype))
    ts = jnp.atleast_1d(jnp.asarray(check_real_values(ts, "ts", low=0.0), dtype=betas.dtype))
    if betas.ndim != 1 or ts.ndim != 1:
        raise ValueError(f"betas, ts: expected 1-d arrays, got shapes {betas.shape}, {ts.shape}")
    ts = check_save_times(ts, 0.0, float(ts[-1]))  # the paths run from 0 to ts[-1]
    k0, k1 = jr.split(key)
    x0 = unit_rows(jr.normal(k0, (realizations, n, d), betas.dtype))
    keys = jr.split(k1, realizations)
    max_steps = default_max_steps(0.0, float(ts[-1]), dt)

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
