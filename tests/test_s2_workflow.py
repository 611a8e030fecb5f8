"""The guided S² density workflow of issue #43: fast pointwise evaluation (against SciPy's
spherical harmonics and the quadrature path), the band-limited random start and the error that
points to it, the density pictures, and the documented example (start → solve without noise
→ picture) executed as written on docs/api/meanfield.md."""

import re
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib
import numpy as np
import pytest
from scipy.special import sph_harm_y

import attnflow.meanfield as mf
from attnflow import plot

matplotlib.use("Agg")
jax.config.update("jax_enable_x64", True)
ROOT = Path(__file__).resolve().parent.parent


def _points(key, n):
    p = jr.normal(key, (n, 3))
    return p / jnp.linalg.norm(p, axis=1, keepdims=True)


def _scipy_real_harmonics(c, degree, points):
    """Σ c_ℓm Y_ℓm with the real harmonics of SphereGrid (orthonormal for the uniform
    probability measure, no Condon–Shortley phase) from SciPy's complex ones (orthonormal for
    the area, with the phase): Y_ℓ,±m = √(4π)·√2·(−1)^m (Re, Im) Y_ℓ^m, Y_ℓ0 = √(4π) Y_ℓ^0."""
    p = np.asarray(points)
    theta, phi = np.arccos(np.clip(p[:, 2], -1, 1)), np.arctan2(p[:, 1], p[:, 0])
    total = np.zeros(len(p))
    for ell in range(degree + 1):
        for m in range(-ell, ell + 1):
            y = sph_harm_y(ell, abs(m), theta, phi) * np.sqrt(4 * np.pi)
            real = y.real if m == 0 else np.sqrt(2) * (-1) ** m * (y.real if m > 0 else y.imag)
            total += float(c[ell * (ell + 1) + m]) * real
    return total


def test_evaluate_matches_scipy_and_the_quadrature_path():
    grid = mf.SphereGrid(7)
    c = jr.normal(jr.key(0), (grid.size,))
    x = _points(jr.key(1), 40)
    fast = np.asarray(grid.evaluate(c, x))
    np.testing.assert_allclose(fast, _scipy_real_harmonics(c, 7, x), atol=1e-12)
    np.testing.assert_allclose(fast, mf.evaluate_by_quadrature(grid, c, x), atol=1e-12)
    # the poles and the nodes themselves (round trip with to_values)
    poles = jnp.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    np.testing.assert_allclose(
        grid.evaluate(c, poles), _scipy_real_harmonics(c, 7, poles), atol=1e-12
    )
    np.testing.assert_allclose(grid.evaluate(c, grid.nodes()), grid.to_values(c), atol=1e-12)
    with pytest.raises(ValueError, match="points"):
        grid.evaluate(c, jnp.ones((3, 2)))


def test_evaluate_is_fast_on_many_points():
    """20,000 points at L = 32 took 60 s by quadrature; counted, not timed for a number: the
    bound is loose enough for a loaded machine."""
    grid = mf.SphereGrid(32)
    c = jr.normal(jr.key(2), (grid.size,)) / grid.size
    x = _points(jr.key(3), 20_000)
    grid.evaluate(c, x[:10]).block_until_ready()
    start = time.perf_counter()
    values = grid.evaluate(c, x).block_until_ready()
    assert time.perf_counter() - start < 20.0
    # spot check against SciPy on a few of them
    np.testing.assert_allclose(values[:5], _scipy_real_harmonics(c, 32, x[:5]), atol=1e-11)


@pytest.mark.parametrize("grid", [mf.CircleGrid(16), mf.SphereGrid(8)], ids=["S1", "S2"])
def test_random_perturbation_is_band_limited_and_deterministic(grid):
    c = mf.random_perturbation(grid, jr.key(4), max_degree=4, amplitude=0.25)
    rho = grid.to_values(c)
    assert float(c[0]) == 1.0
    assert float(jnp.abs(rho - 1).max()) == pytest.approx(0.25, rel=1e-12)
    assert float(jnp.abs(jnp.where(grid.degrees() > 4, c, 0)).max()) == 0.0
    assert float(mf.spectral_tail(grid, c)) == 0.0
    np.testing.assert_array_equal(
        c, mf.random_perturbation(grid, jr.key(4), max_degree=4, amplitude=0.25)
    )
    assert not np.array_equal(
        c, mf.random_perturbation(grid, jr.key(5), max_degree=4, amplitude=0.25)
    )
    with pytest.raises(ValueError, match="max_degree"):
        mf.random_perturbation(grid, jr.key(4), max_degree=grid.max_degree(), amplitude=0.1)
    with pytest.raises(ValueError, match="amplitude"):
        mf.random_perturbation(grid, jr.key(4), max_degree=2, amplitude=1.5)


def test_a_noisy_start_is_refused_with_the_way_out():
    grid = mf.SphereGrid(8)
    noisy = grid.from_values(1 + 0.1 * jr.normal(jr.key(6), (grid.nodes().shape[0],)))
    with pytest.raises(ValueError, match=r"needs more modes.*random_perturbation\(grid, key"):
        mf.solve_density(grid, noisy, 0.1, beta=1.0)


def test_density_pictures(tmp_path):
    import matplotlib.pyplot as plt

    grid = mf.SphereGrid(4)
    c = jnp.zeros(25).at[0].set(1.0).at[2].set(0.5)
    ax = plot.density_on_sphere(grid, c, resolution=16, path=tmp_path / "s2.png")
    assert ax.name == "3d" and (tmp_path / "s2.png").stat().st_size > 1000
    ax = plot.density_on_circle(mf.CircleGrid(4), jnp.zeros(9).at[0].set(1.0).at[1].set(0.5))
    line = ax.get_lines()[0].get_ydata()
    assert max(line) == pytest.approx(1.5) and min(line) == pytest.approx(0.5, abs=1e-4)
    with pytest.raises(ValueError, match="grid: expected an attnflow.meanfield grid on S\\^2"):
        plot.density_on_sphere(mf.CircleGrid(4), jnp.zeros(9))
    plt.close("all")


def test_the_documented_s2_example_runs_to_a_visible_pattern():
    page = (ROOT / "docs" / "api" / "meanfield.md").read_text()
    section = page[page.index("{#s2-workflow}") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace: dict = {}
    start = time.perf_counter()
    exec(compile(code, "docs/api/meanfield.md (S² example)", "exec"), namespace)
    seconds = time.perf_counter() - start
    sol, peaks = namespace["sol"], namespace["peaks"]
    assert bool(sol.resolved)
    assert float(peaks[0]) == pytest.approx(1.3, abs=1e-9)  # 1 + amplitude
    assert float(peaks[-1]) > 3.0  # a visible pattern: peaks at least 3× the uniform density
    assert float(jnp.abs(sol.mass - 1).max()) < 1e-12
    # The bump count of the documented pattern: the same from the coefficients and from the
    # values at the nodes, and no new bump appears as attention merges them (5 at the start).
    bumps, grid = namespace["bumps"], namespace["grid"]
    assert bumps == mf.count_bumps(grid, sol.values()[-1])
    assert 1 <= bumps <= mf.count_bumps(grid, sol.coefficients[0])
    assert seconds < 120  # under a minute on an idle machine; loose for a loaded one
    import matplotlib.pyplot as plt

    plt.close("all")
