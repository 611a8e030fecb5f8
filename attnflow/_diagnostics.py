"""Clustering diagnostics: clusters of one system of tokens, inner-product histograms of any
array of hidden states, and the energy along a trajectory."""

import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._check import (
    as_array,
    check_bool,
    check_callable,
    check_delta,
    check_finite_scalar,
    check_real,
    check_size,
    check_tokens,
    check_weights,
    expected,
    is_traced,
)
from ._energy import AbstractEnergy, check_energy_input, default_weights, scaled_energy
from ._sphere import unit_rows


def gram(x: Float[Array, "n d"]) -> Float[Array, "n n"]:
    """The Gram matrix G_ij = ⟨x_i, x_j⟩.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.gram(jnp.eye(2)).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    x = check_energy_input(x)
    return x @ x.T


def _close(x, delta):
    return gram(x) >= 1 - delta


def _check_clustering_input(x, delta):
    """Tokens as for :func:`attnflow.solve` (finite, unit rows: a NaN row or a rescaled system
    would otherwise change the count silently) and a threshold 0 ≤ δ ≤ 2."""
    return check_tokens(x, "x"), check_delta(delta)


def clustered_fraction(x: Float[Array, "n d"], delta: float = 1e-3) -> Float[Array, ""]:
    """Fraction of ordered pairs i ≠ j with ⟨x_i, x_j⟩ ≥ 1 − δ (the statistic of Fig. 3).

    ``x``: (n, d) tokens on the unit sphere, n ≥ 2 (checked as in :func:`attnflow.solve`);
    ``delta``: a threshold 0 ≤ δ ≤ 2.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> round(float(af.clustered_fraction(x)), 4)  # 2 of the 6 ordered pairs
        0.3333
    """
    x, delta = _check_clustering_input(x, delta)
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"x: clustered_fraction needs at least two tokens, got n = {n}")
    close = _close(x, delta) & ~jnp.eye(n, dtype=bool)
    return jnp.sum(close) / (n * (n - 1))


def cluster_labels(x: Float[Array, "n d"], delta: float = 1e-3) -> Int[Array, " n"]:
    """Label of each token's cluster: the smallest index in its connected component of the graph
    i ~ j iff ⟨x_i, x_j⟩ ≥ 1 − δ (single linkage, so chains merge).

    ``x``: (n, d) tokens on the unit sphere (checked as in :func:`attnflow.solve`); ``delta``:
    a threshold 0 ≤ δ ≤ 2. The same checks apply to :func:`count_clusters`,
    :func:`cluster_masses` and :func:`cluster_centers`.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
        >>> af.cluster_labels(x).tolist()
        [0, 1, 0]
    """
    x, delta = _check_clustering_input(x, delta)
    return _component_minima(_close(x, delta))


# Jitted: called eagerly (a figure labels every frame), the while loop's body closes over a new
# array each call and would be compiled again each time; jitted, once per shape.
@jax.jit
def _component_minima(close):
    """The smallest index of each node's connected component of the (symmetric) graph ``close``.

    Min-label propagation with pointer jumping: each sweep sets l_i ← min(l_i, min_{j ~ i} l_j)
    and then l_i ← l_{l_i}. Every label is always a node of i's component, labels only decrease,
    and the component's smallest node keeps its own label, so the fixed point is that node. A
    sweep costs O(n²) (one masked row minimum); chains of length k need O(log k) sweeps after
    the jumps, a path graph in the worst case O(k). (The transitive closure by repeated
    squaring, used before, cost O(n³ log n) integer products: hours at n = 10⁴.)
    """
    n = close.shape[-1]
    index = jnp.arange(n)

    def sweep(state):
        labels, _ = state
        neighbour = jnp.min(jnp.where(close, labels[None, :], n), axis=1)
        new = jnp.minimum(labels, neighbour)
        new = new[new]
        return new, jnp.any(new != labels)

    labels, _ = jax.lax.while_loop(lambda s: s[1], sweep, (index, jnp.asarray(True)))
    return labels


def count_clusters(x: Float[Array, "n d"], delta: float = 1e-3) -> Int[Array, ""]:
    """Number of connected components of the graph i ~ j iff ⟨x_i, x_j⟩ ≥ 1 − δ.

    Choosing δ: two tokens are linked when their angle is at most arccos(1 − δ) ≈ √(2δ), so the
    default δ = 1e-3 links tokens within 2.6° whatever d is. That is the paper's threshold for
    tokens that have collapsed under the flow (Fig. 3). It does not scale with the data, on
    purpose: a count is comparable across times, layers and models only with a fixed δ. Hidden
    states of a trained model (e.g. MiniLM, d = 384) are anisotropic: all pairs may have cosine
    ≈ 0.998 without being clustered in the flow's sense, and δ = 1e-3 then splits them into as
    many "clusters" as tokens. Pick δ from the data's own scale instead, e.g. a gap in
    :func:`attnflow.inner_product_histogram`, or a fraction of 1 − (mean cosine) such as
    ``delta = 0.1 * float(1 - gram(x).mean())``.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> int(af.count_clusters(x))
        2
    """
    labels = cluster_labels(x, delta)
    return jnp.sum(labels == jnp.arange(labels.shape[0]))


def cluster_masses(
    x: Float[Array, "n d"], delta: float = 1e-3, weights: Float[Array, " n"] | None = None
) -> Float[Array, " n"]:
    """Masses m_q = Σ_{i ∈ q} w_i of the clusters of :func:`cluster_labels`, largest first.

    Weights default to 1/n (the empirical measure), so the masses sum to 1. The output has one slot
    per token (a static shape, so it works under ``jit``/``vmap``): the first
    ``count_clusters(x, delta)`` slots hold the clusters, the rest are 0. For well-separated point
    clusters, 2β e^{−β} E_β(x) → Σ_q m_q² as β → ∞ (the plateaux of dynamic metastability,
    docs/maths.md §10).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
        >>> af.cluster_masses(x).tolist()
        [0.75, 0.25, 0.0, 0.0]
    """
    return cluster_centers(x, delta, weights)[1]


def cluster_centers(
    x: Float[Array, "n d"], delta: float = 1e-3, weights: Float[Array, " n"] | None = None
) -> tuple[Float[Array, "n d"], Float[Array, " n"]]:
    """Centres and masses of the clusters of :func:`cluster_labels`, largest mass first.

    The centre of cluster q is its mean direction normalize(Σ_{i ∈ q} w_i x_i), its mass
    m_q = Σ_{i ∈ q} w_i (weights default to 1/n). Both outputs have one slot per token: slots past
    ``count_clusters(x, delta)`` are empty (mass 0, centre 0). Ties in mass keep the order of the
    clusters' smallest token index.

    Returns:
        ``(centers, masses)`` of shapes (n, d) and (n,).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]])
        >>> centers, masses = af.cluster_centers(x, delta=0.05)
        >>> masses.tolist()
        [0.5, 0.25, 0.25, 0.0]
        >>> [round(float(c), 4) for c in centers[0]]  # mean direction of (0.6, 0.8), (0.8, 0.6)
        [0.7071, 0.7071]
    """
    x, delta = _check_clustering_input(x, delta)
    n = x.shape[0]
    w = default_weights(n, x.dtype) if weights is None else check_weights(weights, n)
    labels = cluster_labels(x, delta)
    masses = jnp.zeros((n,), x.dtype).at[labels].add(w)
    sums = jnp.zeros_like(x).at[labels].add(w[:, None] * x)
    # A non-root slot has no member, so it is empty whatever the weights are.
    occupied = jnp.zeros((n,), bool).at[labels].set(True)
    order = jnp.lexsort((jnp.arange(n), -masses, ~occupied))
    masses, sums = masses[order], sums[order]
    norms = jnp.linalg.norm(sums, axis=-1, keepdims=True)
    safe = jnp.where(norms > 0, norms, 1)
    centers = jnp.where(norms > 0, sums / safe, 0)
    return centers, masses


def inner_product_histogram(
    x: Float[Array, "*batch n d"],
    bins: int = 50,
    range: tuple[float, float] = (-1.0, 1.0),
    *,
    normalize: bool = True,
    density: bool = True,
) -> tuple[Float[Array, "*batch bins"], Float[Array, " edges"]]:
    """Histogram of the pairwise inner products ⟨x_i, x_j⟩, i < j (diagonal excluded), as in the
    paper's Fig. 1, for any array of hidden states; leading dimensions (layers, batch, …) are kept.

    Each unordered pair counts once. Bins are those of ``numpy.histogram`` with equal widths on
    ``range`` (the last bin is closed on the right; values outside ``range`` are dropped), and
    the bin assignment follows NumPy's edge corrections exactly.

    Args:
        x: (*batch, n, d) hidden states, n ≥ 2.
        bins: number of equal-width bins.
        range: (lo, hi) of the bins.
        normalize: project the rows on the unit sphere first (cosine similarities, clipped to
            [−1, 1] against rounding), the convention of layer-normalised Transformers.
        density: return a probability density on ``range`` (integrates to 1; 0 where no pair
            fell in range) instead of counts.

    Returns:
        ``(hist, edges)`` of shapes (*batch, bins) and (bins + 1,).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
        >>> hist, edges = af.inner_product_histogram(x, bins=2, density=False)
        >>> hist.tolist(), edges.tolist()  # pairs: 1, 0, 0
        ([0.0, 3.0], [-1.0, 0.0, 1.0])
    """
    x = as_array(x, "x")
    check_real(x, "x")
    shape = jnp.shape(x)
    if len(shape) < 2 or shape[-2] < 2:
        raise ValueError(
            f"x: expected hidden states of shape (*batch, n, d) with n >= 2, got shape {shape}"
        )
    if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
        raise ValueError(f"x: expected a floating-point array, got dtype {jnp.result_type(x)}")
    if not is_traced(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError("x: expected finite hidden states, got NaN or inf")
    bins = check_size(bins, "bins", low=1)
    normalize, density = check_bool(normalize, "normalize"), check_bool(density, "density")
    if normalize and not is_traced(x):
        zero = np.all(np.asarray(x) == 0, axis=-1)
        if np.any(zero):
            where = tuple(int(i) for i in np.argwhere(zero)[0])
            raise ValueError(
                f"x: the hidden state at index {where} is zero and has no direction (its "
                "cosines are undefined); drop it, or pass normalize=False for raw inner products"
            )
    if not isinstance(range, (tuple, list)) or len(range) != 2:
        expected("range", "a pair (lo, hi)", range)
    lo, hi = (float(v) for v in range)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"range: expected (lo, hi) with lo < hi, got {range}")
    # NumPy's edges, bit for bit (jnp.linspace rounds differently, e.g. at 0).
    edges = jnp.asarray(np.linspace(lo, hi, bins + 1), jnp.result_type(x))
    flat = jnp.reshape(x, (-1, *shape[-2:]))
    hist = _histograms(flat, edges, bins, lo, hi, bool(normalize), bool(density))
    return jnp.reshape(hist, (*shape[:-2], bins)), edges


@functools.partial(jax.jit, static_argnames=("bins", "lo", "hi", "normalize", "density"))
def _histograms(flat, edges, bins, lo, hi, normalize, density):
    rows, cols = jnp.triu_indices(flat.shape[-2], k=1)

    def one(h):
        if normalize:
            h = unit_rows(h)
        s = (h @ h.T)[rows, cols]
        if normalize:
            s = jnp.clip(s, -1, 1)
        # numpy.histogram's uniform-bin rule, including its corrections at the edges.
        index = ((s - lo) * (bins / (hi - lo))).astype(jnp.int32)
        index = jnp.clip(jnp.where(index == bins, bins - 1, index), 0, bins - 1)
        index = jnp.where(s < edges[index], index - 1, index)
        index = jnp.where(
            (s >= edges[jnp.minimum(index + 1, bins)]) & (index != bins - 1), index + 1, index
        )
        valid = (s >= lo) & (s <= hi)
        index = jnp.where(valid, index, bins)
        return jnp.zeros((bins + 1,), flat.dtype).at[index].add(1)[:bins]

    hist = jax.vmap(one)(flat)
    if density:
        total = jnp.sum(hist, axis=-1, keepdims=True)
        hist = hist / (jnp.where(total > 0, total, 1) * ((hi - lo) / bins))
    return hist


def energy_along(
    trajectory: Float[Array, "*time n d"],
    energy: Callable,
    weights: Float[Array, " n"] | None = None,
    *,
    log_shift=None,
) -> Float[Array, "*time"]:
    """The energy E(x(t)) at every saved state of a trajectory (e.g. ``sol.ys``).

    With ``log_shift`` the function returns E(x(t)) · exp(−log_shift), for an
    :class:`attnflow.AbstractEnergy`: through the overflow-safe ``scaled`` method of an
    :class:`attnflow.AbstractRescaledEnergy`, else as the plain product. For
    ``InteractionEnergy(β)`` and ``log_shift=β``, 2β · energy_along(...) is
    (1/n²) Σ_ij exp(β(⟨x_i, x_j⟩ − 1)) ∈ (0, 1], the normalisation of the metastability staircase
    (docs/maths.md §10), finite at any β.

    Args:
        trajectory: (*time, n, d) tokens; any number of leading dimensions.
        energy: an energy ``energy(x, weights)`` on one system, e.g.
            :class:`attnflow.InteractionEnergy`.
        weights: (n,) weights of the empirical measure, shared by all states (default 1/n).
        log_shift: optional scalar subtracted from the log of the energy.

    Returns:
        (*time,) energies.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 6, 3)
        >>> usa = af.SelfAttention(1.0, normalization="n")
        >>> sol = af.solve(usa, x0, 2.0, ts=jnp.linspace(0, 2, 5))
        >>> e = af.energy_along(sol.ys, af.InteractionEnergy(1.0))
        >>> e.shape, bool(jnp.all(jnp.diff(e) > 0))  # USA is a gradient ascent of E_β
        ((5,), True)
    """
    trajectory = as_array(trajectory, "trajectory")
    check_real(trajectory, "trajectory")
    shape = jnp.shape(trajectory)
    if len(shape) < 2:
        raise ValueError(f"trajectory: expected states of shape (*time, n, d), got shape {shape}")
    if not is_traced(trajectory) and not np.all(np.isfinite(np.asarray(trajectory))):
        raise ValueError("trajectory: expected finite states, got NaN or inf")
    check_callable(
        energy, "energy", "an energy energy(x, weights)", "e.g. attnflow.InteractionEnergy(1.0)"
    )
    weights = check_weights(weights, shape[-2])
    if log_shift is not None and not is_traced(log_shift):
        check_finite_scalar(log_shift, "log_shift")
    if log_shift is not None and not isinstance(energy, AbstractEnergy):
        raise ValueError(
            f"energy: log_shift needs an AbstractEnergy (rescaled by its own `scaled` if it is "
            f"an AbstractRescaledEnergy), got {type(energy).__name__}"
        )
    flat = jnp.reshape(trajectory, (-1, *shape[-2:]))
    return jnp.reshape(_energies(flat, energy, weights, log_shift), shape[:-2])


@eqx.filter_jit
def _energies(flat, energy, weights, log_shift):
    if log_shift is None:
        return jax.vmap(lambda x: energy(x, weights))(flat)
    return jax.vmap(lambda x: scaled_energy(energy, x, weights, log_shift))(flat)


def wasserstein_to_dirac(
    x: Float[Array, "n d"],
    weights: Float[Array, " n"] | None = None,
    *,
    center: Float[Array, " d"] | None = None,
) -> Float[Array, ""]:
    r"""W₂(μ, δ_c): the Wasserstein-2 distance from μ = Σ_i w_i δ_{x_i} to a point mass on the
    sphere, the nearest one unless ``center`` is given (Thm 5 of arXiv:2512.01868, from
    Chen–Lin–Polyanskiy–Rigollet arXiv:2504.14697: W₂(μ_t, δ_{x∞}) ≤ C₀ e^{−t/100} for small β).

    The only coupling with a Dirac is the product, so W₂²(μ, δ_c) = Σ_i w_i |x_i − c|²
    (weights normalised to total mass 1). On the sphere this is 2 − 2⟨m, c⟩ with m = Σ_i w_i x_i
    the mean, minimised over unit c by the mean direction c = m/|m|:

        min_c W₂²(μ, δ_c) = 2 − 2|m| = 2 V / (1 + |m|),   V = Σ_i w_i |x_i − m|²,

    evaluated in the second form, whose variance V is a sum of squared differences: no
    cancellation as μ collapses (the first form loses all digits below 1e-16 of W₂², i.e. W₂
    below 1e-8). When m = 0 (e.g. an antipodal pair with equal masses) every point of the
    sphere is a nearest Dirac and the distance is √2; tokens may then be centred anywhere.

    Args:
        x: (n, d) tokens on the unit sphere (checked as in :func:`attnflow.solve`).
        weights: (n,) masses w_i ≥ 0 with a positive sum (default 1/n), normalised to sum 1.
        center: optional (d,) point of the sphere (e.g. the limit x∞ of a run); then
            W₂(μ, δ_center) = (Σ_i w_i |x_i − center|²)^{1/2}.

    Returns:
        W₂ (a scalar, in [0, 2]).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> round(float(af.wasserstein_to_dirac(x)) ** 2, 6)  # 2 − 2|m| = 2 − √2
        0.585786
        >>> float(af.wasserstein_to_dirac(x, jnp.array([1.0, 0.0])))  # all mass on x_1
        0.0
        >>> round(float(af.wasserstein_to_dirac(x, center=jnp.array([1.0, 0.0]))) ** 2, 6)
        1.0
    """
    x = check_tokens(x, "x")
    n, d = x.shape
    w = default_weights(n, x.dtype) if weights is None else check_weights(weights, n)
    if center is not None:
        center = as_array(center, "center")
        check_real(center, "center")
        if jnp.shape(center) != (d,):
            raise ValueError(
                f"center: expected a point of the sphere of shape ({d},), got shape "
                f"{jnp.shape(center)}"
            )
        center = check_tokens(jnp.reshape(center, (1, d)), "center")[0]
    return _dirac_distance(x, jnp.asarray(w, x.dtype), center)


@jax.jit
def _dirac_distance(x, w, center):
    w = w / jnp.sum(w)
    if center is not None:
        gaps = x - center.astype(x.dtype)[None, :]
        return jnp.sqrt(jnp.sum(w * jnp.sum(gaps**2, axis=-1)))
    mean = w @ x
    variance = jnp.sum(w * jnp.sum((x - mean[None, :]) ** 2, axis=-1))
    return jnp.sqrt(2 * variance / (1 + jnp.linalg.norm(mean)))
