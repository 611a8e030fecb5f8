"""Energy landscapes over measures for a general D (BKKRW, arXiv:2501.03096): stationary
measures, the four-particle rectangle, proven extremisers against the measure optimiser, and
the first-order minimiser density. References are NumPy/scipy written from the formulas."""

import os
import pathlib
import runpy

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import iv

import attnflow as af
from attnflow import theory

CIRCLE = af.landscape.sphere_points(64, 2)  # one compiled shape for every circle optimisation


def energy_numpy(D, x, w):
    return float(w @ np.exp(x @ D @ x.T) @ w)


def wgrad_numpy(D, x, w, at):
    g = 2 * (np.exp(at @ D @ x.T) * w[None, :]) @ (x @ D)
    return g - np.sum(g * at, axis=1, keepdims=True) * at


def test_energy_matches_interaction_energy_and_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.random(7)
    w /= w.sum()
    A = rng.normal(size=(3, 3))
    A = A + A.T
    beta = 1.7
    ref = energy_numpy(beta * A, x, w)
    assert np.isclose(float(af.landscape.measure_energy(beta * A, x, w)), ref, rtol=1e-13)
    assert np.isclose(2 * beta * float(af.InteractionEnergy(beta, A)(x, w)), ref, rtol=1e-13)
    assert np.allclose(
        af.landscape.wasserstein_gradient(A, x, w), wgrad_numpy(A, x, w, x), rtol=1e-12
    )


def test_dirac_stationary_iff_eigenvector():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(3, 3))
    D = A + A.T
    _, vecs = np.linalg.eigh(D)
    for v in vecs.T:
        assert np.abs(af.landscape.wasserstein_gradient(D, v[None])).max() < 1e-13
    v = rng.normal(size=3)
    v /= np.linalg.norm(v)
    g = np.asarray(af.landscape.wasserstein_gradient(D, v[None]))[0]
    ref = 2 * np.exp(v @ D @ v) * (D @ v - (v @ D @ v) * v)
    assert np.allclose(g, ref, rtol=1e-12) and np.linalg.norm(g) > 0.1


def test_uniform_stationary_iff_D_squared_scalar():
    # circle: the equispaced grid integrates e^{xᵀDy} to exponential accuracy
    H = np.array([[0.6, 0.8], [0.8, -0.6]]) * 1.5  # a scaled reflection: H² = 2.25 I
    assert np.abs(af.landscape.wasserstein_gradient(H, CIRCLE)).max() < 1e-13
    for D in (np.diag([1.0, 2.0]), np.array([[1.0, 0.3], [0.3, 0.0]])):
        g = np.asarray(af.landscape.wasserstein_gradient(D, CIRCLE))
        ref = theory.uniform_wasserstein_gradient(D, np.asarray(CIRCLE))
        assert np.allclose(g, ref, atol=1e-13) and np.abs(ref).max() > 0.1
    # S²: Fibonacci points, quadrature error ~ N^{-1.6} (2e-5 at N = 2000)
    x = af.landscape.sphere_points(2000, 3)
    R = np.linalg.qr(np.random.default_rng(2).normal(size=(3, 3)))[0]
    D2 = R @ np.diag([1.0, -1.0, 1.0]) @ R.T  # D² = I
    assert np.abs(af.landscape.wasserstein_gradient(D2, x)).max() < 1e-4
    D = np.diag([1.0, 2.0, 0.5])
    ref = theory.uniform_wasserstein_gradient(D, np.asarray(x))
    assert np.abs(np.asarray(af.landscape.wasserstein_gradient(D, x)) - ref).max() < 1e-4
    assert np.abs(ref).max() > 1.0
    # closed form ψ_3(r) = sinh(r)/r against the d = 3 potential
    assert np.isclose(theory.uniform_potential(np.eye(3) * 2, [1.0, 0, 0]), np.sinh(2) / 2)


def test_singular_psd_minimum_is_one_on_kernel():
    D = np.diag([0.0, 2.0])
    # degenerate: E − 1 ≈ 2(Σ w_i δ_i)² near ker D, so the spread moves only at 4th order
    r = af.landscape.minimize_measure_energy(D, CIRCLE, move_particles=True, tol=1e-5)
    assert bool(r.converged) and abs(float(r.energy) - 1) < 1e-6
    centers, _ = r.atoms()
    assert np.abs(centers @ D).max() < 0.05  # support near ker D = span(e1)
    assert theory.minimizer(D)[2:] == ("kernel", 1.0)
    # any measure on ker D ∩ S^{d-1} is stationary: φ ≡ 2, zero Wasserstein gradient
    D3 = np.diag([0.0, 0.0, 1.5])
    theta = np.linspace(0, 2 * np.pi, 7, endpoint=False)
    x = np.stack([np.cos(theta), np.sin(theta), 0 * theta], axis=1)
    w = np.arange(1.0, 8.0)
    assert np.isclose(float(af.landscape.measure_energy(D3, x, w)), 1.0, atol=1e-15)
    assert np.abs(af.landscape.wasserstein_gradient(D3, x, w)).max() < 1e-15


@pytest.mark.parametrize("d1, d2", [(1.0, 2.0), (-1.0, 0.5), (2.0, -0.3)])
def test_four_particle_rectangle(d1, d2):
    theta = theory.rectangle_critical_angle(d1, d2)
    a2, b2 = np.cos(theta) ** 2, np.sin(theta) ** 2
    assert np.isclose(d1 * np.tanh(d1 * a2), d2 * np.tanh(d2 * b2), atol=1e-13)
    D = np.diag([d1, d2])
    w = np.full(4, 0.25)
    energy = af.InteractionEnergy(1.0, D)  # 2β E_af = E with D = βA
    signs = np.array([[1, 1], [-1, 1], [1, -1], [-1, -1]])
    angles0 = np.arctan2(signs[:, 1] * np.sin(theta), signs[:, 0] * np.cos(theta))
    angles0 = angles0 + 0.03 * np.array([1.0, -2.0, 0.5, 1.5])
    x0 = np.stack([np.cos(angles0), np.sin(angles0)], axis=1)
    crit = af.find_critical_point(energy, jnp.asarray(x0), jnp.asarray(w))
    expected = signs * np.array([np.cos(theta), np.sin(theta)])
    assert np.abs(np.asarray(crit.x) - expected).max() < 1e-8
    assert np.isclose(2 * float(energy(crit.x, w)), theory.rectangle_energy(d1, d2, theta))
    assert np.isclose(theory.rectangle_energy(d1, d2, theta), np.cosh(d1 * a2) * np.cosh(d2 * b2))

    # Hessian in angle coordinates by central differences of the NumPy energy
    def e(phi):
        y = np.stack([np.cos(phi), np.sin(phi)], axis=1)
        return 0.5 * energy_numpy(D, y, w)

    phi = np.arctan2(expected[:, 1], expected[:, 0])
    h, hess = 1e-4, np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            ei, ej = np.eye(4)[i] * h, np.eye(4)[j] * h
            hess[i, j] = e(phi + ei + ej) - e(phi + ei - ej) - e(phi - ei + ej) + e(phi - ei - ej)
    hess /= 4 * h * h
    c = af.classify_critical_point(energy, crit.x, jnp.asarray(w), remove_orbit=False)
    assert np.allclose(np.asarray(c.eigenvalues), np.linalg.eigvalsh(hess), atol=1e-6)


def best_maximizer(D):
    """The optimiser is local: three starts (uniform, mass near e2, mass near e1), best kept."""
    x = np.asarray(CIRCLE)
    starts = [None, np.exp(5 * x[:, 1] ** 2), np.exp(5 * x[:, 0] ** 2)]
    runs = [af.landscape.maximize_measure_energy(D, CIRCLE, w, move_particles=True) for w in starts]
    best = max(runs, key=lambda r: float(r.energy))
    assert bool(best.converged)
    return best


def test_maximizers_and_switch():
    switch = theory.maximizer_switch(-1.0)
    assert np.isclose(switch, np.log(np.cosh(1.0)))
    cases = [
        np.diag([-1.0, switch - 0.05]),  # antipodal pair on e1
        np.diag([-1.0, switch + 0.05]),  # Dirac on e2
        np.array([[-2.0, 0.4], [0.4, 0.3]]),
    ]
    for D in cases:
        r = best_maximizer(D)
        points, _, kind = theory.maximizer(D)
        assert np.isclose(float(r.energy), theory.maximum_energy(D), rtol=1e-10), D
        assert r.kind() == kind, (D, r.kind())
        centers, _ = r.atoms()
        assert np.abs(np.abs(centers @ points[0]) - 1).max() < 1e-6
    assert [theory.maximizer(D)[2] for D in cases[:2]] == ["antipodal pair", "dirac"]


def test_minimizers_proven_cases():
    D = np.diag([-1.0, 0.6])  # λ_max ≤ |λ_min|: Dirac on e1, e^{-1}
    r = af.landscape.minimize_measure_energy(D, CIRCLE, move_particles=True)
    assert bool(r.converged) and r.kind() == "dirac"
    assert np.isclose(float(r.energy), np.exp(-1.0), rtol=1e-12)
    assert theory.minimizer(D)[2] == "dirac"
    D = 2 * np.eye(2)  # uniform, E = I_0(2)
    r = af.landscape.minimize_measure_energy(D, CIRCLE)
    assert bool(r.converged) and r.kind() == "diffuse"
    assert np.abs(np.asarray(r.weights) * 64 - 1).max() < 1e-6
    assert np.isclose(float(r.energy), iv(0, 2.0), rtol=1e-12)
    assert np.isclose(theory.minimizer(D)[3], iv(0, 2.0))


def test_first_order_minimizer_density_circle():
    """cos 2θ coefficient of the minimiser for D = I + ε diag(0, 1): I_1(1)/(2 I_2(1)) ε."""
    reference = iv(1, 1.0) / (2 * iv(2, 1.0))  # 2.08165
    assert np.isclose(theory.first_order_minimizer_coefficient(1.0, 2) / 2, reference)
    theta = np.arctan2(np.asarray(CIRCLE)[:, 1], np.asarray(CIRCLE)[:, 0])
    coef = {}
    for eps in (0.01, -0.01, 0.05, -0.05):
        r = af.landscape.minimize_measure_energy(np.diag([1.0, 1.0 + eps]), CIRCLE)
        assert bool(r.converged)
        coef[eps] = 2 * np.sum(np.asarray(r.weights) * np.cos(2 * theta))
    assert abs((coef[0.01] - coef[-0.01]) / 0.02 - reference) < 1e-4  # O(ε²) error cancels
    # BKKRW's stored minimisers (N = 1000, exponentiated gradient): 2.129 and 2.033 at ∓0.05
    assert abs(coef[-0.05] / -0.05 - 2.129) < 2e-3 and abs(coef[0.05] / 0.05 - 2.033) < 2e-3
    density = theory.first_order_minimizer_density(np.asarray(CIRCLE), np.diag([0.0, 1.0]), 0.01)
    assert np.allclose(density, 1 + reference * 0.01 * np.cos(2 * theta))


def test_first_order_minimizer_density_sphere():
    """d = 3: ν = −κ_3 (xᵀMx − tr M/3), κ_3(1) = I_{3/2}(1)/I_{5/2}(1), by regression."""
    x = af.landscape.sphere_points(400, 3)
    M = np.diag([0.0, 0.0, 1.0])
    w = {}
    for eps in (0.02, -0.02, 0.0):
        r = af.landscape.minimize_measure_energy(np.eye(3) + eps * M, x)
        assert bool(r.converged)
        w[eps] = np.asarray(r.weights)
    q = np.einsum("ni,ij,nj->n", np.asarray(x), M, np.asarray(x)) - 1 / 3
    slope = (w[0.02] - w[-0.02]) / 0.04 / w[0.0]
    kappa = -np.sum(slope * q) / np.sum(q * q)
    assert abs(kappa / (iv(1.5, 1.0) / iv(2.5, 1.0)) - 1) < 2e-3
    assert np.isclose(theory.first_order_minimizer_coefficient(1.0, 3), iv(1.5, 1) / iv(2.5, 1))


def test_float32_and_errors():
    D32 = jnp.diag(jnp.array([1.0, 0.3], jnp.float32))
    x32 = af.landscape.sphere_points(32, 2, dtype=jnp.float32)
    r = af.landscape.maximize_measure_energy(D32, x32, move_particles=True, tol=1e-5)
    assert r.energy.dtype == jnp.float32 and abs(float(r.energy) - np.e) < 1e-5
    with pytest.raises(ValueError, match="D: must be symmetric"):
        af.landscape.minimize_measure_energy(np.array([[1.0, 1.0], [0.0, 1.0]]), CIRCLE)
    with pytest.raises(ValueError, match=r"D: expected shape \(2, 2\)"):
        af.landscape.minimize_measure_energy(np.eye(3), CIRCLE)
    with pytest.raises(ValueError, match="d: expected 2"):
        af.landscape.sphere_points(10, 4)
    with pytest.raises(ValueError, match="points, num_points"):
        af.landscape.minimize_measure_energy(np.eye(2))
    with pytest.raises(ValueError, match="d1, d2: expected finite non-zero"):
        theory.rectangle_critical_angle(0.0, 1.0)


def test_landscape_notebook_runs_quick(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parents[1] / "notebooks" / "measure_landscape.py"
    ns = runpy.run_path(os.fspath(path), run_name="__main__")
    assert ns["max_fraction"] == 1.0
    assert abs(ns["slope"] - iv(1, 1.0) / (2 * iv(2, 1.0))) < 1e-3
    assert ns["localised_fraction"] == 1.0
    # The atom sits at a critical point of Φ; a perceptron-free collapse point does not (the
    # check can fail: plain USA also gives one atom, so "atomic" alone could not).
    assert ns["one_atom"] and ns["max_residual"] < 1e-6
    assert max(ns["control_residuals"]) > 1e-3


@pytest.mark.parametrize("maximize", [False, True])
def test_stored_and_recomputed_kernel_paths_agree(monkeypatch, maximize):
    """Weight steps reuse a stored N × N kernel up to STORED_KERNEL_MAX_POINTS and recompute it
    in every product above: both paths take the same steps to the same measure."""
    from attnflow.landscape import _measures

    D = np.array([[-1.0, 0.3], [0.3, 0.5]]) if maximize else np.diag([1.0, 1.4])
    run = af.landscape.maximize_measure_energy if maximize else af.landscape.minimize_measure_energy
    kwargs = dict(move_particles=maximize, max_steps=40)
    stored = run(D, CIRCLE, **kwargs)
    monkeypatch.setattr(_measures, "STORED_KERNEL_MAX_POINTS", 32)
    recomputed = run(D, CIRCLE, **kwargs)
    assert int(stored.num_steps) == int(recomputed.num_steps)
    np.testing.assert_allclose(recomputed.weights, stored.weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(recomputed.points, stored.points, rtol=0, atol=1e-12)
    np.testing.assert_allclose(recomputed.energy, stored.energy, rtol=1e-13)
