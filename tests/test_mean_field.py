"""von Mises–Fisher sampling, the sliced Wasserstein distance, and the mean-field notebook."""

import os
import pathlib
import runpy

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy.special import ive
from scipy.stats import wasserstein_distance
from test_notebook_results import check_mean_field_notebook

import attnflow as af
from attnflow.measures._sampling import _quantile_distance

quantile_distance = jax.jit(_quantile_distance, static_argnums=4)

# One sample size for every vMF test: the sampler compiles once per dimension d, not per test.
SAMPLES = 20_000


@pytest.mark.parametrize("d, kappa", [(2, 1.0), (3, 5.0), (5, 0.5), (10, 200.0)])
def test_vmf_mean_cosine_is_the_bessel_ratio(d, kappa):
    """E⟨x, μ⟩ = I_{d/2}(κ) / I_{d/2−1}(κ), within 4 Monte Carlo standard errors."""
    mean = jnp.zeros(d).at[1].set(1.0)
    x = np.asarray(af.measures.von_mises_fisher(jr.key(d), mean, kappa, SAMPLES))
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)
    cosines = x[:, 1]
    expected = ive(d / 2, kappa) / ive(d / 2 - 1, kappa)
    assert abs(cosines.mean() - expected) < 4 * cosines.std() / np.sqrt(len(cosines))


def test_vmf_zero_concentration_is_uniform():
    """E x = 0 and E x xᵀ = I/d for the uniform law on S^{d-1}."""
    d, n = 5, SAMPLES
    x = np.asarray(af.measures.von_mises_fisher(jr.key(0), jnp.ones(d), 0.0, n))
    assert np.max(np.abs(x.mean(axis=0))) < 4 * np.sqrt(1 / d / n)
    second = x.T @ x / n
    # Var(x_1²) = E x_1⁴ − 1/d² = 3/(d(d+2)) − 1/d²
    assert np.max(np.abs(np.diag(second) - 1 / d)) < 4 * np.sqrt((3 / (d * (d + 2)) - 1 / d**2) / n)


def test_vmf_mixture_proportions():
    """Concentrated, well-separated components: each sample is near its component's mean."""
    probs = jnp.array([0.6, 0.3, 0.1])
    n = SAMPLES
    x = np.asarray(
        af.measures.von_mises_fisher_mixture(jr.key(1), jnp.eye(3), jnp.full(3, 500.0), n, probs)
    )
    counts = np.bincount(np.argmax(x, axis=1), minlength=3) / n
    se = np.sqrt(np.asarray(probs) * (1 - np.asarray(probs)) / n)
    assert np.all(np.abs(counts - np.asarray(probs)) < 4 * se)


def test_quantile_distance_against_scipy():
    """Weighted one-dimensional W_1 with n ≠ m (scipy's CDF formula), and W_2 of sorted samples."""
    k = jr.split(jr.key(2), 4)
    u, v = jr.normal(k[0], (13,)), 0.5 + jr.normal(k[1], (8,))
    a, b = jr.uniform(k[2], (13,)), jr.uniform(k[3], (8,))
    w1 = float(quantile_distance(u, a, v, b, 1.0))
    np.testing.assert_allclose(w1, wasserstein_distance(u, v, a, b), rtol=1e-12)
    # CDF levels that coincide (k/4 and k/2): only zero-width intervals may be ambiguous
    u4, v2_ = u[:4], v[:2]
    w1_ties = float(quantile_distance(u4, jnp.ones(4), v2_, jnp.ones(2), 1.0))
    np.testing.assert_allclose(w1_ties, wasserstein_distance(u4, v2_), rtol=1e-12)
    v2 = 0.5 + jr.normal(k[1], (13,))
    w2 = float(quantile_distance(u, jnp.ones(13), v2, jnp.ones(13), 2.0))
    np.testing.assert_allclose(w2, np.mean((np.sort(u) - np.sort(v2)) ** 2), rtol=1e-12)


def test_sliced_wasserstein_of_two_diracs():
    """SW_2(δ_a, δ_b)² = E_θ⟨θ, a − b⟩² = |a − b|²/d, within 4 Monte Carlo standard errors."""
    d, projections = 5, 4000
    a, b = jnp.zeros((1, d)).at[0, 0].set(1.0), jnp.zeros((1, d)).at[0, 1].set(1.0)
    sw = float(af.measures.sliced_wasserstein(jr.key(3), a, b, num_projections=projections))
    # ⟨θ, a − b⟩² = 2 θ_e² for a unit vector e; Var(θ_e²) = 3/(d(d+2)) − 1/d².
    se = 2 * np.sqrt((3 / (d * (d + 2)) - 1 / d**2) / projections)
    assert abs(sw**2 - 2 / d) < 4 * se


def test_sliced_wasserstein_weights_and_symmetry():
    # n = 7 against m = 8 (untied CDF levels); duplicating a point gives m = m = 8 (every level
    # tied), so the shapes (7, 8), (8, 7) and (8, 8) cover both cases with three compilations.
    x = af.random_tokens(jr.key(4), 7, 3)
    y = af.random_tokens(jr.key(5), 8, 3)
    key = jr.key(6)
    w = jnp.ones(7).at[2].set(2.0)
    weighted = af.measures.sliced_wasserstein(key, x, y, x_weights=w)
    duplicated = af.measures.sliced_wasserstein(key, jnp.concatenate([x, x[2:3]]), y)
    np.testing.assert_allclose(weighted, duplicated, rtol=1e-12)
    np.testing.assert_allclose(
        af.measures.sliced_wasserstein(key, y, x, y_weights=w), weighted, rtol=1e-12
    )
    assert float(af.measures.sliced_wasserstein(key, y, y)) < 1e-7  # √(rounding of the CDFs)


def test_bad_inputs():
    x = af.random_tokens(jr.key(7), 4, 3)
    with pytest.raises(ValueError, match=r"y: expected dimension d = 3"):
        af.measures.sliced_wasserstein(jr.key(0), x, jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="p: expected an order p >= 1"):
        af.measures.sliced_wasserstein(jr.key(0), x, x, p=0.5)
    with pytest.raises(ValueError, match="kappa: expected a finite value >= 0"):
        af.measures.von_mises_fisher(jr.key(0), jnp.ones(3), -1.0, 5)
    with pytest.raises(ValueError, match="mean: the mean direction must be non-zero"):
        af.measures.von_mises_fisher(jr.key(0), jnp.zeros(3), 1.0, 5)
    with pytest.raises(ValueError, match=r"kappas: expected shape \(2,\)"):
        af.measures.von_mises_fisher_mixture(jr.key(0), jnp.eye(2), jnp.ones(3), 5)
    with pytest.raises(ValueError, match="kappas: expected finite values >= 0"):
        af.measures.von_mises_fisher_mixture(jr.key(0), jnp.eye(2), jnp.array([1.0, -2.0]), 5)


def test_mean_field_notebook_runs_at_quick_size(monkeypatch, capsys):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    monkeypatch.delenv("ATTNFLOW_OUT", raising=False)
    path = pathlib.Path(__file__).parent.parent / "notebooks" / "mean_field.py"
    namespace = runpy.run_path(os.fspath(path), run_name="__main__")
    assert set(namespace["distances"]) == set(namespace["NS"])
    assert all(np.all(np.isfinite(v)) for v in namespace["distances"].values())
    assert "fitted slopes" in capsys.readouterr().out
    check_mean_field_notebook(namespace)
