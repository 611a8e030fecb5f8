"""Clustering diagnostics against independent computations: scipy's connected components, NumPy
histograms, explicit loops for centres, masses and energies."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

import attnflow as af


def circle(angles):
    angles = np.asarray(angles, float)
    return jnp.asarray(np.stack([np.cos(angles), np.sin(angles)], axis=-1))


def scipy_components(x, delta):
    close = np.asarray(x) @ np.asarray(x).T >= 1 - delta
    return connected_components(close, directed=False)


def test_count_clusters_separated_caps():
    rng = np.random.default_rng(0)
    centres = np.linalg.qr(rng.normal(size=(5, 5)))[0][:, :4].T  # 4 orthonormal centres in R^5
    sizes = [1, 3, 5, 7]
    caps = [c + 1e-3 * rng.normal(size=(k, 5)) for c, k in zip(centres, sizes, strict=True)]
    x = np.concatenate(caps)
    x = af.normalize(jnp.asarray(x))
    assert int(af.count_clusters(x, 1e-3)) == 4
    labels = np.asarray(af.cluster_labels(x, 1e-3))
    starts = np.cumsum([0, *sizes[:-1]])
    for start, k in zip(starts, sizes, strict=True):
        assert np.all(labels[start : start + k] == start)  # the smallest index of the component


def test_count_clusters_non_transitive_chain():
    delta = 1e-3
    step = 0.8 * np.arccos(1 - delta)  # neighbours linked, next-neighbours not
    assert np.cos(2 * step) < 1 - delta
    chain = circle(step * np.arange(6))
    assert int(af.count_clusters(chain, delta)) == 1
    assert np.asarray(af.cluster_labels(chain, delta)).tolist() == [0] * 6
    # A pair-graph count (no transitive closure) would see 5 links and no triangle:
    close = np.asarray(chain @ chain.T >= 1 - delta)
    assert close.sum() == 6 + 2 * 5
    # Removing the middle token breaks the chain in two; order of the rows does not matter.
    broken = circle(step * np.array([4.0, 0.0, 5.0, 1.0, 2.0]))
    assert int(af.count_clusters(broken, delta)) == 2
    assert np.asarray(af.cluster_labels(broken, delta)).tolist() == [0, 1, 0, 1, 1]


def test_count_clusters_extremes():
    assert int(af.count_clusters(jnp.ones((5, 3)) / np.sqrt(3))) == 1
    assert int(af.count_clusters(jnp.eye(6))) == 6
    assert int(af.count_clusters(jnp.eye(3)[:1])) == 1


@pytest.mark.parametrize("seed", range(4))
def test_count_clusters_matches_scipy(seed):
    # Angles on a coarse grid with jitter: many chains and near-ties.
    rng = np.random.default_rng(seed)
    angles = rng.integers(0, 40, size=33) * 0.03 + rng.normal(scale=0.004, size=33)
    x = circle(angles)
    delta = 5e-4
    count, reference = scipy_components(x, delta)
    assert int(af.count_clusters(x, delta)) == count
    labels = np.asarray(af.cluster_labels(x, delta))
    same = labels[:, None] == labels[None, :]
    assert np.array_equal(same, reference[:, None] == reference[None, :])


def test_count_clusters_under_jit_and_vmap():
    x = af.random_tokens(jax.random.key(3), 20, 2, batch_shape=(3,))
    counts = jax.jit(jax.vmap(af.count_clusters))(x)
    assert counts.tolist() == [scipy_components(xi, 1e-3)[0] for xi in x]


def test_cluster_centers_and_masses():
    rng = np.random.default_rng(1)
    angles = np.array([0.0, 2.0, 0.01, 4.0, 2.02, 0.02, 2.01])
    x = circle(angles)
    weights = jnp.asarray(rng.uniform(0.5, 2.0, size=7))
    delta = 1e-3
    centers, masses = af.cluster_centers(x, delta, weights)
    groups = [[0, 2, 5], [1, 4, 6], [3]]
    w = np.asarray(weights)
    expected = sorted(
        ((w[g].sum(), (w[g][:, None] * np.asarray(x)[g]).sum(0)) for g in groups),
        key=lambda item: -item[0],
    )
    for q, (mass, total) in enumerate(expected):
        assert float(masses[q]) == pytest.approx(mass, rel=1e-12)
        np.testing.assert_allclose(centers[q], total / np.linalg.norm(total), atol=1e-12)
    assert np.all(np.asarray(masses[3:]) == 0) and np.all(np.asarray(centers[3:]) == 0)
    np.testing.assert_allclose(af.cluster_masses(x, delta, weights), masses)
    # Default weights 1/n: masses are cluster sizes over n, largest first, ties by first index.
    assert af.cluster_masses(x, delta).tolist() == pytest.approx([3 / 7, 3 / 7, 1 / 7, 0, 0, 0, 0])
    centers_default, _ = af.cluster_centers(x, delta)
    np.testing.assert_allclose(centers_default[0], af.normalize(x[0] + x[2] + x[5]), atol=1e-12)


def test_cluster_masses_batched_and_float32():
    x = af.random_tokens(jax.random.key(0), 10, 3, batch_shape=(4,), dtype=jnp.float32)
    masses = jax.jit(jax.vmap(lambda y: af.cluster_masses(y, 0.1)))(x)
    assert masses.dtype == jnp.float32 and masses.shape == (4, 10)
    np.testing.assert_allclose(masses.sum(axis=1), 1.0, rtol=1e-6)
    for xi, mi in zip(x, masses, strict=True):
        count = scipy_components(xi, 0.1)[0]
        assert np.count_nonzero(np.asarray(mi)) == count


def test_cluster_centers_bad_weights():
    with pytest.raises(ValueError, match=r"weights: expected shape \(3,\)"):
        af.cluster_centers(jnp.eye(3), weights=jnp.ones(4))
    with pytest.raises(ValueError, match="x: expected tokens of shape"):
        af.cluster_masses(jnp.ones(3))


def numpy_histograms(x, bins, lo, hi, density):
    x = np.asarray(x)
    flat = x.reshape(-1, *x.shape[-2:])
    rows, cols = np.triu_indices(x.shape[-2], k=1)
    out = []
    for h in flat:
        h = h / np.linalg.norm(h, axis=-1, keepdims=True)
        s = np.clip(h @ h.T, -1, 1)[rows, cols]
        out.append(np.histogram(s, bins=bins, range=(lo, hi), density=density)[0])
    return np.reshape(out, (*x.shape[:-2], bins))


@pytest.mark.parametrize("bins, lo, hi", [(20, -1.0, 1.0), (7, -0.4, 0.6)])
def test_inner_product_histogram_matches_numpy(bins, lo, hi):
    x = jax.random.normal(jax.random.key(5), (2, 3, 9, 4)) * 3.0  # hidden states, not unit
    for density in (False, True):
        hist, edges = af.inner_product_histogram(x, bins, (lo, hi), density=density)
        assert hist.shape == (2, 3, bins)
        np.testing.assert_array_equal(edges, np.linspace(lo, hi, bins + 1))
        np.testing.assert_allclose(hist, numpy_histograms(x, bins, lo, hi, density), atol=1e-12)


def test_inner_product_histogram_edges_and_diagonal():
    # Raw inner products exactly on the bin edges (0, ±0.5, ±1, dyadic so exact): NumPy's
    # rules at every edge, the value 1 counted in the last bin, the diagonal excluded.
    x = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.5, 0.5], [1.0, 0.0], [0.5, -0.5]])
    hist, _ = af.inner_product_histogram(x, bins=4, density=False, normalize=False)
    s = np.asarray(x @ x.T)[np.triu_indices(6, k=1)]
    assert set(s.tolist()) == {-1.0, -0.5, 0.0, 0.5, 1.0}
    assert hist.tolist() == np.histogram(s, bins=4, range=(-1, 1))[0].tolist()
    assert float(hist.sum()) == 15  # n(n-1)/2 pairs


def test_inner_product_histogram_bad_input():
    with pytest.raises(ValueError, match=r"x: expected hidden states of shape \(\*batch, n, d\)"):
        af.inner_product_histogram(jnp.ones((1, 3)))
    with pytest.raises(ValueError, match="bins: expected a positive integer, got 0"):
        af.inner_product_histogram(jnp.eye(3), bins=0)
    with pytest.raises(ValueError, match="range: expected"):
        af.inner_product_histogram(jnp.eye(3), range=(1.0, -1.0))


def direct_energy(x, beta, weights=None):
    x = np.asarray(x)
    n = x.shape[0]
    w = np.full(n, 1 / n) if weights is None else np.asarray(weights)
    total = 0.0
    for i in range(n):
        for j in range(n):
            total += w[i] * w[j] * np.exp(beta * np.dot(x[i], x[j]))
    return total / (2 * beta)


def test_energy_along_matches_direct_evaluation():
    beta = 3.0
    trajectory = af.random_tokens(jax.random.key(7), 6, 3, batch_shape=(2, 4))
    weights = jnp.asarray(np.random.default_rng(0).uniform(size=6))
    energy = af.InteractionEnergy(beta)
    values = af.energy_along(trajectory, energy)
    weighted = af.energy_along(trajectory, energy, weights)
    assert values.shape == (2, 4)
    for a in range(2):
        for b in range(4):
            assert float(values[a, b]) == pytest.approx(
                direct_energy(trajectory[a, b], beta), rel=1e-12
            )
            assert float(weighted[a, b]) == pytest.approx(
                direct_energy(trajectory[a, b], beta, weights), rel=1e-12
            )
    shifted = af.energy_along(trajectory, energy, log_shift=beta)
    np.testing.assert_allclose(shifted, values * np.exp(-beta), rtol=1e-12)


def test_energy_along_staircase_normalisation_at_huge_beta():
    # 2β e^{-β} E_β = (1/n²) Σ exp(β(⟨x_i, x_j⟩ − 1)): finite where e^β overflows float64.
    beta = 900.0
    x = circle([0.0, 0.0, 1e-3, 2.0])[None]
    phi = 2 * beta * af.energy_along(x, af.InteractionEnergy(beta), log_shift=beta)
    s = np.asarray(x[0] @ x[0].T)
    assert float(phi[0]) == pytest.approx(np.mean(np.exp(beta * (s - 1))), rel=1e-12)
    assert not np.isfinite(float(af.energy_along(x, af.InteractionEnergy(beta))[0]))


def test_energy_along_bad_input():
    with pytest.raises(ValueError, match=r"trajectory: expected states of shape \(\*time, n, d\)"):
        af.energy_along(jnp.ones(3), af.InteractionEnergy(1.0))
    with pytest.raises(ValueError, match="energy: log_shift needs an AbstractEnergy"):
        af.energy_along(jnp.eye(2)[None], lambda x, w: jnp.sum(x), log_shift=1.0)


def test_clustered_fraction_unchanged():
    x = circle([0.0, 0.0, 0.01, 2.0])
    # Ordered pairs with ⟨x_i, x_j⟩ ≥ 1 − δ among 12: (0,1), (1,0) and, with δ = 1e-3, the
    # pairs with the token at 0.01 (cos 0.01 = 1 − 5e-5).
    assert float(af.clustered_fraction(x)) == pytest.approx(6 / 12)
    assert float(af.clustered_fraction(x, delta=1e-5)) == pytest.approx(2 / 12)
    with pytest.raises(ValueError, match="at least two tokens"):
        af.clustered_fraction(x[:1])


def test_cluster_labels_long_permuted_chain_matches_scipy():
    """Worst case for label propagation: a path graph (each point linked to its neighbours
    only), rows in random order, plus isolated points; labels are component minima."""
    delta = 1e-3
    step = 0.8 * np.arccos(1 - delta)
    rng = np.random.default_rng(7)
    angles = np.concatenate([step * np.arange(150), 5.6 + 0.2 * np.arange(3)])  # 5.36 rad chain
    x = circle(rng.permutation(angles))
    count, reference = scipy_components(x, delta)
    assert count == 4
    labels = np.asarray(af.cluster_labels(x, delta))
    expected = np.array([np.flatnonzero(reference == r).min() for r in reference])
    assert np.array_equal(labels, expected)
