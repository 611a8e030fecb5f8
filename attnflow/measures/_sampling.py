"""Sampled measures on the sphere: von Mises–Fisher samples (initial measures of the mean-field
limit) and the sliced Wasserstein distance between empirical measures (random projections).

Remark 3.3 of the paper: if μ_n(0) → μ(0) in W_1, the particle flow μ_n(t) stays within
e^{Lt} W_1(μ_n(0), μ(0)) of the continuity-equation solution μ(t) (Dobrushin). For i.i.d.
samples W_1(μ_n(0), μ(0)) decays like n^{-1/(d-1)} on S^{d-1} when d − 1 ≥ 3 (n^{-1/2} up to a
log factor for d − 1 = 2, n^{-1/2} for d − 1 = 1). The sliced distance below decays like
n^{-1/2} in every dimension: it measures the same convergence without the curse of dimension.
"""

import functools

import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from .._check import (
    check_beta,
    check_finite_scalar,
    check_key,
    check_real_values,
    check_size,
    check_tokens,
    check_weights,
    expected,
)
from .._sphere import unit_rows


def _unit_mean(mean, name="mean"):
    mean = jnp.asarray(check_real_values(mean, name))
    if mean.ndim != 1 or mean.shape[0] < 2:
        raise ValueError(f"{name}: expected a vector of length d >= 2, got shape {mean.shape}")
    norm = jnp.linalg.norm(mean)
    if not isinstance(mean, jax.core.Tracer) and float(norm) == 0.0:
        raise ValueError(f"{name}: the mean direction must be non-zero")
    return mean / norm


def _vmf_cosines(key, kappa, d: int, n: int, dtype):
    """w = ⟨x, μ⟩ for x ~ vMF(μ, κ) on S^{d-1}: Wood (1994) rejection sampling, batched."""
    m = d - 1
    # b = (−2κ + sqrt(4κ² + m²)) / m, written without the cancellation at large κ.
    b = m / (2 * kappa + jnp.sqrt(4 * kappa**2 + m**2))
    x0 = (1 - b) / (1 + b)
    c = kappa * x0 + m * jnp.log1p(-(x0**2))

    def propose(key):
        kz, ku = jr.split(key)
        # z ~ Beta(m/2, m/2) as (1 + g_1/|g|)/2, g ~ N(0, I_{m+1}) (the first coordinate of a
        # uniform point of S^m); cheaper to compile than jr.beta, and written without the
        # cancellation of 1 + g_1/|g| when g_1 < 0.
        g = jr.normal(kz, (n, m + 1), dtype)
        first, radius = g[:, 0], jnp.linalg.norm(g, axis=1)
        rest = jnp.sum(g[:, 1:] ** 2, axis=1)
        z = jnp.where(
            first < 0, rest / (2 * radius * (radius - first)), (radius + first) / (2 * radius)
        )
        w = (1 - (1 + b) * z) / (1 - (1 - b) * z)
        accept = kappa * w + m * jnp.log1p(-x0 * w) - c >= jnp.log(jr.uniform(ku, (n,), dtype))
        return w, accept

    def keep_trying(state):
        return ~jnp.all(state[1])

    def retry(state):
        w, done, key = state
        key, sub = jr.split(key)
        w_new, accept = propose(sub)
        take = ~done & accept
        return jnp.where(take, w_new, w), done | take, key

    key, sub = jr.split(key)
    w, done = propose(sub)
    w, _, _ = jax.lax.while_loop(keep_trying, retry, (w, done, key))
    return w


def von_mises_fisher(
    key: PRNGKeyArray, mean: Float[Array, " d"], kappa, n: int, dtype=None
) -> Float[Array, "n d"]:
    r"""n i.i.d. samples of the von Mises–Fisher law on S^{d-1}, density ∝ exp(κ⟨μ, x⟩).

    The cosine w = ⟨x, μ⟩ is drawn by Wood's rejection sampler (Wood 1994; acceptance rate
    above 0.5 for every κ and d), the direction orthogonal to μ uniformly; κ = 0 is the uniform
    law. E⟨x, μ⟩ = I_{d/2}(κ) / I_{d/2−1}(κ).

    Args:
        key: PRNG key.
        mean: (d,) mean direction μ (normalised here).
        kappa: concentration κ ≥ 0.
        n: number of samples.
        dtype: floating dtype (default: JAX's default float).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.measures.von_mises_fisher(jr.key(0), jnp.array([0.0, 0.0, 1.0]), 50.0, 1000)
        >>> x.shape, bool(jnp.mean(x[:, 2]) > 0.95)
        ((1000, 3), True)
    """
    key = None if key is None else check_key(key)
    mean = _unit_mean(mean)
    kappa = check_beta(kappa, name="kappa")  # a concentration: finite, >= 0
    n = check_size(n, "n", low=1)
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    means = jnp.broadcast_to(mean.astype(dtype), (n, mean.shape[0]))
    return _sample_vmf(key, means, jnp.full((n,), kappa, dtype))


@jax.jit
def _sample_vmf(key, means, kappas):
    """One sample per row: x_i ~ vMF(means[i], kappas[i]) (rows of ``means`` are unit vectors)."""
    (n, d), dtype = means.shape, means.dtype
    k_w, k_v = jr.split(key)
    w = _vmf_cosines(k_w, kappas, d, n, dtype)
    g = jr.normal(k_v, (n, d), dtype)
    v = g - jnp.sum(g * means, axis=1, keepdims=True) * means
    v = unit_rows(v)
    return w[:, None] * means + jnp.sqrt(jnp.clip(1 - w**2, 0.0))[:, None] * v


def von_mises_fisher_mixture(
    key: PRNGKeyArray,
    means: Float[Array, "components d"],
    kappas: Float[Array, " components"],
    n: int,
    probs: Float[Array, " components"] | None = None,
    dtype=None,
) -> Float[Array, "n d"]:
    """n i.i.d. samples of the mixture Σ_c p_c vMF(μ_c, κ_c) on S^{d-1}.

    A fixed, smooth, multi-modal initial measure μ(0) for mean-field experiments.

    Args:
        key: PRNG key.
        means: (C, d) mean directions (normalised here).
        kappas: (C,) concentrations ≥ 0.
        n: number of samples.
        probs: (C,) mixture probabilities (default uniform; normalised here).
        dtype: floating dtype.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> kappas = jnp.array([5.0, 5.0, 5.0])
        >>> x = af.measures.von_mises_fisher_mixture(jr.key(0), jnp.eye(3), kappas, 1000)
        >>> x.shape
        (1000, 3)
    """
    key = None if key is None else check_key(key)
    n = check_size(n, "n", low=1)
    means = jnp.asarray(check_real_values(means, "means"))
    kappas = jnp.asarray(check_real_values(kappas, "kappas", low=0))
    if means.ndim != 2 or means.shape[0] < 1:
        raise ValueError(
            f"means: expected shape (components, d), components >= 1, got {means.shape}"
        )
    components = means.shape[0]
    if kappas.shape != (components,):
        raise ValueError(
            f"kappas: expected shape ({components},) to match means, got {kappas.shape}"
        )
    if probs is None:
        probs = jnp.full((components,), 1.0 / components)
    probs = check_weights(jnp.asarray(probs), components, "probs")
    means = jnp.stack([_unit_mean(mu, f"means[{c}]") for c, mu in enumerate(means)])
    k_c, k_s = jr.split(key)
    labels = jr.categorical(k_c, jnp.log(probs), shape=(n,))
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    return _sample_vmf(k_s, means.astype(dtype)[labels], kappas.astype(dtype)[labels])


def _quantile_distance(u, a, v, b, p):
    """W_p^p = ∫_0^1 |F^{-1}(s) − G^{-1}(s)|^p ds for Σ a_i δ_{u_i} and Σ b_j δ_{v_j} on a line.

    The quantile functions are constant between consecutive levels of the two CDFs F (levels
    f_i) and G (levels g_j). Each interval ends at some f_i or g_j; on (previous level, f_i],
    F^{-1} = u_i and G^{-1} = v_k with k = #{g < f_i}, and symmetrically for g_j with
    #{f <= g_j} (the asymmetry gives a tied level one interval, not two). Two binary searches
    instead of sorting the merged levels: O((n + m) log(n + m)).
    """
    iu, iv = jnp.argsort(u), jnp.argsort(v)
    u, a, v, b = u[iu], a[iu], v[iv], b[iv]
    f = jnp.cumsum(a) / jnp.sum(a)
    g = jnp.cumsum(b) / jnp.sum(b)
    zero = jnp.zeros((1,), f.dtype)

    def intervals(levels, other, side):
        """Width of the interval ending at each level, and the other quantile's index there."""
        k = jnp.searchsorted(other, levels, side=side)
        previous_own = jnp.concatenate([zero, levels[:-1]])
        previous_other = jnp.concatenate([zero, other])[k]
        width = jnp.clip(levels - jnp.maximum(previous_own, previous_other), 0.0)
        return width, jnp.clip(k, 0, other.shape[0] - 1)

    width_f, k_f = intervals(f, g, "left")
    width_g, k_g = intervals(g, f, "right")
    return jnp.sum(width_f * jnp.abs(u - v[k_f]) ** p) + jnp.sum(width_g * jnp.abs(u[k_g] - v) ** p)


def sliced_wasserstein(
    key: PRNGKeyArray,
    x: Float[Array, "n d"],
    y: Float[Array, "m d"],
    *,
    x_weights: Float[Array, " n"] | None = None,
    y_weights: Float[Array, " m"] | None = None,
    num_projections: int = 256,
    p: float = 2.0,
) -> Float[Array, ""]:
    r"""Sliced Wasserstein distance between two weighted point clouds in R^d:

        SW_p(μ, ν) = ( E_θ W_p^p(θ#μ, θ#ν) )^{1/p},   θ uniform on S^{d-1},

    estimated with ``num_projections`` directions drawn from ``key`` (use the same key to
    compare several pairs with common random numbers). Each one-dimensional W_p is exact
    (quantile functions of the projected weighted measures), so n ≠ m and arbitrary weights
    are fine. Cost O(L (n + m) log(n + m)); no n × m matrix.

    Args:
        key: PRNG key for the directions.
        x, y: (n, d) and (m, d) points (tokens, or any points of R^d).
        x_weights, y_weights: non-negative weights (normalised here); default uniform.
        num_projections: number L of random directions.
        p: order p ≥ 1.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 100, 3)
        >>> y = af.random_tokens(jr.key(2), 100, 3)
        >>> round(float(af.measures.sliced_wasserstein(jr.key(1), x, x)), 6)
        0.0
        >>> 0.01 < float(af.measures.sliced_wasserstein(jr.key(1), x, y)) < 0.5
        True
    """
    key = None if key is None else check_key(key)
    # Any points of R^d: finite, not necessarily on the sphere.
    x = check_tokens(x, "x", unit=False)
    y = check_tokens(y, "y", unit=False)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"y: expected dimension d = {x.shape[1]} to match x, got {y.shape}")
    p = float(check_finite_scalar(p, "p"))  # static: a Python float, never traced
    if p < 1:
        expected("p", "an order p >= 1", p)
    num_projections = check_size(num_projections, "num_projections", low=1)
    dtype = jnp.result_type(x, y)
    a = (
        jnp.ones(x.shape[0], dtype)
        if x_weights is None
        else check_weights(x_weights, x.shape[0], "x_weights")
    )
    b = (
        jnp.ones(y.shape[0], dtype)
        if y_weights is None
        else check_weights(y_weights, y.shape[0], "y_weights")
    )
    return _sliced(key, x.astype(dtype), y.astype(dtype), a, b, num_projections, p)


@functools.partial(jax.jit, static_argnums=(5, 6))
def _sliced(key, x, y, a, b, num_projections, p):
    theta = jr.normal(key, (num_projections, x.shape[1]), x.dtype)
    theta = unit_rows(theta)
    per_direction = jax.vmap(lambda t: _quantile_distance(x @ t, a, y @ t, b, p))(theta)
    return jnp.mean(per_direction) ** (1 / p)
