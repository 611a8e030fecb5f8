"""Riemannian Hessians on (S^{d-1})^n: closed forms, Taylor remainders, HVP and Lanczos."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import loglog_slope

import attnflow as af


def unit_tangent(key, x):
    """A random tangent vector with unit rows, so t ↦ cos(t) x + sin(t) v is a geodesic."""
    v = af.tangent(x, jr.normal(key, x.shape))
    return v / jnp.linalg.norm(v, axis=1, keepdims=True)


def coords(x, v):
    return jnp.einsum("nkd,nd->nk", af.tangent_basis(x), v).ravel()


@pytest.mark.parametrize("d", [2, 3, 5])
def test_tangent_basis_is_orthonormal_and_tangent(d):
    x = af.random_tokens(jr.key(d), 7, d)
    b = af.tangent_basis(x)
    assert b.shape == (7, d - 1, d)
    np.testing.assert_allclose(
        jnp.einsum("nkd,nld->nkl", b, b),
        np.broadcast_to(np.eye(d - 1), (7, d - 1, d - 1)),
        atol=1e-14,
    )
    np.testing.assert_allclose(jnp.einsum("nkd,nd->nk", b, x), 0.0, atol=1e-14)
    # completing with x gives an orthonormal basis of R^d
    full = jnp.concatenate([x[:, None, :], b], axis=1)
    np.testing.assert_allclose(jnp.abs(jnp.linalg.det(full)), 1.0, rtol=1e-12)


def test_tangent_basis_on_the_circle_is_the_angle_derivative():
    theta = jnp.linspace(-3.0, 3.0, 9)
    x = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)
    expected = jnp.stack([-jnp.sin(theta), jnp.cos(theta)], axis=1)  # ∂x/∂θ
    np.testing.assert_allclose(af.tangent_basis(x)[:, 0], expected, atol=1e-15)


@pytest.mark.parametrize(("d", "unit_weights"), [(2, False), (3, False), (3, True)])
def test_synchronised_hessian_closed_form(d, unit_weights):
    # At x_i = e for all i, with weights w_i = c, the tangent blocks are
    # e^β c² (1 1ᵀ − n I) ⊗ I_{d−1} (derived by hand from E = 1/(2β) Σ c² e^{β⟨x_i, x_j⟩}).
    n, beta = 4, 1.7
    x = jnp.tile(af.normalize(jr.normal(jr.key(0), (1, d))), (n, 1))
    c = 1.0 if unit_weights else 1.0 / n
    weights = jnp.ones(n) if unit_weights else None
    h = af.riemannian_hessian(af.InteractionEnergy(beta), x, weights)
    expected = np.exp(beta) * c**2 * np.kron(np.ones((n, n)) - n * np.eye(n), np.eye(d - 1))
    np.testing.assert_allclose(h, expected, rtol=1e-12, atol=1e-12)


@eqx.filter_jit
def along_geodesic(energy, x, v, ts):
    """E(cos(t) x + sin(t) v) for each t (v with unit rows: the geodesic with velocity v)."""
    return jax.vmap(lambda t: energy(jnp.cos(t) * x + jnp.sin(t) * v))(jnp.asarray(ts))


@eqx.filter_jit
def euclidean_gradient(energy, x):
    return jax.grad(energy)(x)


def taylor_remainders(energy, x, v, hessian, ts):
    g = af.tangent(x, euclidean_gradient(energy, x))
    c = coords(x, v)
    e0, slope, curvature = energy(x), jnp.sum(g * v), c @ hessian @ c
    return np.abs(along_geodesic(energy, x, v, ts) - e0 - ts * slope - ts**2 / 2 * curvature)


class CubicEnergy(af.AbstractEnergy):
    """A non-interaction energy: Σ_i ⟨a, x_i⟩³ + ⟨x_0, M x_1⟩ (not rotation invariant)."""

    a: jax.Array
    M: jax.Array

    def __call__(self, x, weights=None):
        return jnp.sum((x @ self.a) ** 3) + x[0] @ self.M @ x[1]


ENERGIES = {
    "interaction": lambda d: af.InteractionEnergy(2.0),
    "interaction-A": lambda d: af.InteractionEnergy(
        1.5, (lambda m: (m + m.T) / 2)(jr.normal(jr.key(7), (d, d)))
    ),
    "cubic": lambda d: CubicEnergy(jr.normal(jr.key(8), (d,)), jr.normal(jr.key(9), (d, d))),
}


@pytest.mark.parametrize("name", sorted(ENERGIES))
def test_hessian_taylor_remainder_along_geodesics_has_slope_three(name):
    n, d = 5, 3
    energy = ENERGIES[name](d)
    x = af.random_tokens(jr.key(1), n, d)
    v = unit_tangent(jr.key(2), x)
    h = af.riemannian_hessian(energy, x)
    np.testing.assert_allclose(h, h.T, atol=1e-14)
    ts = np.geomspace(2e-2, 2e-3, 6)
    slope = loglog_slope(ts, taylor_remainders(energy, x, v, h, ts))
    assert 2.8 < slope < 3.2, slope
    # negative control: without the Weingarten term −⟨x_i, ∇_i E⟩ the remainder is O(t²)
    weingarten = jnp.sum(x * euclidean_gradient(energy, x), axis=1)
    euclidean_only = h + jnp.diag(jnp.repeat(weingarten, d - 1))
    bad = loglog_slope(ts, taylor_remainders(energy, x, v, euclidean_only, ts))
    assert 1.8 < bad < 2.2, bad


def test_hessian_matches_second_differences_of_energy_along_geodesics():
    energy = af.InteractionEnergy(3.0)
    x = af.random_tokens(jr.key(3), 6, 4)
    h = af.riemannian_hessian(energy, x)
    ts = np.array([4e-2, 2e-2, 1e-2, 5e-3])
    for key in range(3):
        v = unit_tangent(jr.key(10 + key), x)
        c = coords(x, v)
        both = along_geodesic(energy, x, v, np.concatenate([ts, -ts]))
        second = (both[: ts.size] - 2 * energy(x) + both[ts.size :]) / ts**2
        errors = np.abs(second - c @ h @ c)
        assert 1.8 < loglog_slope(ts, errors) < 2.2
        assert errors[-1] < 1e-4 * float(jnp.abs(c @ h @ c))


def test_hessian_of_a_plain_callable_energy():
    def energy(x, weights=None):
        return jnp.sum(jnp.sin(x @ x.T))

    x = af.random_tokens(jr.key(4), 4, 3)
    v = unit_tangent(jr.key(5), x)
    ts = np.geomspace(2e-2, 2e-3, 5)
    slope = loglog_slope(ts, taylor_remainders(energy, x, v, af.riemannian_hessian(energy, x), ts))
    assert 2.8 < slope < 3.2


def test_hessian_vector_product_matches_dense_and_projects():
    energy = af.InteractionEnergy(2.5)
    x = af.random_tokens(jr.key(6), 8, 3)
    h = af.riemannian_hessian(energy, x)
    v = jr.normal(jr.key(7), x.shape)  # not tangent: the HVP projects it first
    hv = af.landscape.hessian_vector_product(energy, x, v)
    np.testing.assert_allclose(jnp.sum(hv * x, axis=1), 0.0, atol=1e-13)
    np.testing.assert_allclose(coords(x, hv), h @ coords(x, v), rtol=1e-11, atol=1e-12)
    # symmetric as an operator
    w = jr.normal(jr.key(8), x.shape)
    np.testing.assert_allclose(
        jnp.sum(w * hv), jnp.sum(v * af.landscape.hessian_vector_product(energy, x, w)), rtol=1e-12
    )


def test_rotation_orbit_dimension_follows_the_stabiliser():
    # dim = d(d−1)/2 − dim so(d−k) = k(k−1)/2 + k(d−k) for tokens spanning a k-plane
    d = 4
    generic = af.random_tokens(jr.key(9), 6, d)
    planar = af.normalize(jnp.pad(jr.normal(jr.key(10), (6, 2)), ((0, 0), (0, d - 2))))
    antipodal = jnp.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0]] * 3)
    for x, k in ((generic, 4), (planar, 2), (antipodal, 1)):
        basis = af.landscape.rotation_orbit_basis(x)
        assert basis.shape == (x.shape[0] * (d - 1), k * (k - 1) // 2 + k * (d - k))
        np.testing.assert_allclose(basis.T @ basis, np.eye(basis.shape[1]), atol=1e-12)


def test_orbit_directions_are_zero_modes_only_at_critical_points():
    energy = af.InteractionEnergy(1.0)
    sync = jnp.tile(jnp.array([[0.0, 0.6, 0.8]]), (4, 1))
    random = af.random_tokens(jr.key(11), 4, 3)
    for x, critical in ((sync, True), (random, False)):
        residual = jnp.abs(
            af.riemannian_hessian(energy, x) @ af.landscape.rotation_orbit_basis(x)
        ).max()
        assert (residual < 1e-12) == critical


@pytest.mark.parametrize("beta", [0.5, 3.0])
def test_lanczos_extreme_eigenvalues_match_dense_with_the_orbit_removed(beta):
    # Partial Krylov convergence (40 of 60 dimensions) is the docstring example (no orbit removal).
    # Here the 2·20 = 40 steps exceed the 40 − 3 dimensions left once the orbit is removed, so the
    # space is exhausted: the padding must not invent eigenvalues, and the extremes are exact.
    # β rides in the energy as an array: both runs share one compilation.
    energy = af.InteractionEnergy(beta)
    x = af.random_tokens(jr.key(12), 20, 3)
    orbit = af.landscape.rotation_orbit_basis(x)
    assert orbit.shape[1] == 3
    complement = jnp.linalg.svd(orbit, full_matrices=True)[0][:, 3:]
    dense = jnp.linalg.eigvalsh(complement.T @ af.riemannian_hessian(energy, x) @ complement)
    lo, hi = jax.jit(af.landscape.hessian_extreme_eigenvalues, static_argnames="num_iterations")(
        energy, x, num_iterations=40
    )
    np.testing.assert_allclose([lo, hi], [dense[0], dense[-1]], rtol=1e-10)


def test_float32_hessian():
    x64 = af.random_tokens(jr.key(13), 5, 3)
    h32 = af.riemannian_hessian(af.InteractionEnergy(1.0), x64.astype(jnp.float32))
    assert h32.dtype == jnp.float32
    np.testing.assert_allclose(
        h32, af.riemannian_hessian(af.InteractionEnergy(1.0), x64), atol=2e-5
    )


def test_bad_inputs_are_rejected_with_clear_messages():
    energy = af.InteractionEnergy(1.0)
    x = af.random_tokens(jr.key(14), 4, 3)
    with pytest.raises(ValueError, match="x: expected tokens of shape"):
        af.riemannian_hessian(energy, x[0])
    with pytest.raises(ValueError, match="unit sphere"):
        af.riemannian_hessian(energy, 2 * x)
    with pytest.raises(ValueError, match="energy: expected a callable"):
        af.riemannian_hessian(3.0, x)
    with pytest.raises(ValueError, match=r"weights: expected shape \(4,\)"):
        af.riemannian_hessian(energy, x, jnp.ones(3))
    with pytest.raises(ValueError, match="v: expected a tangent vector"):
        af.landscape.hessian_vector_product(energy, x, x[:2])
    with pytest.raises(ValueError, match="num_iterations"):
        af.landscape.hessian_extreme_eigenvalues(energy, x, num_iterations=0)
