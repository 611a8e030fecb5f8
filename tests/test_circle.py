"""Circle tools (d = 2): energy (7.4), fields (7.1), the torus Hessian of App. B, τ*_β, β_n."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import sa_field_numpy
from scipy.optimize import brentq

import attnflow as af
from attnflow import theory

THETA = jr.uniform(jr.key(0), (6,), minval=-np.pi, maxval=np.pi)


def test_angles_and_tokens_round_trip():
    x = af.landscape.circle_tokens(THETA)
    np.testing.assert_allclose(jnp.linalg.norm(x, axis=1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(af.landscape.circle_angles(x), THETA, atol=1e-14)


@pytest.mark.parametrize("beta", [0.3, 4.0, 40.0])
def test_circle_energy_is_74(beta):
    th = np.asarray(THETA)
    direct = np.sum(np.exp(beta * np.cos(th[:, None] - th[None, :]))) / (2 * beta * th.size**2)
    np.testing.assert_allclose(af.landscape.circle_energy(THETA, beta), direct, rtol=1e-13)
    np.testing.assert_allclose(
        af.InteractionEnergy(beta)(af.landscape.circle_tokens(THETA)), direct, rtol=1e-13
    )


@pytest.mark.parametrize("beta", [0.0, 1.5, 9.0])
def test_circle_fields_are_the_attention_dynamics_on_angles(beta):
    x = np.asarray(af.landscape.circle_tokens(THETA))
    tangent = np.stack([-x[:, 1], x[:, 0]], axis=1)  # ∂x/∂θ
    for normalization in ("softmax", "n"):
        expected = np.sum(sa_field_numpy(x, beta, normalization=normalization) * tangent, axis=1)
        np.testing.assert_allclose(
            af.landscape.circle_field(THETA, beta, normalization), expected, rtol=1e-12, atol=1e-14
        )


def test_usa_on_angles_is_n_times_the_energy_gradient():
    beta = 2.5
    grad = jax.grad(af.landscape.circle_energy)(THETA, beta)
    np.testing.assert_allclose(
        af.landscape.circle_field(THETA, beta, "n"), THETA.size * grad, rtol=1e-12
    )


@pytest.mark.parametrize("beta", [0.5, 6.0])
def test_torus_hessian_is_app_b_and_equals_the_sphere_hessian_in_angles(beta):
    h = af.landscape.torus_hessian(THETA, beta)
    np.testing.assert_allclose(
        h, jax.hessian(af.landscape.circle_energy)(THETA, beta), rtol=1e-11, atol=1e-13
    )
    # the d = 2 tangent basis is ∂x/∂θ and θ is arclength: sphere Hessian = torus Hessian
    sphere = af.riemannian_hessian(af.InteractionEnergy(beta), af.landscape.circle_tokens(THETA))
    np.testing.assert_allclose(sphere, h, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("d", [2, 3, 8])
def test_tau_star_is_the_root_and_the_sign_change_of_the_kernel(d):
    for beta in (0.1, 1.0, 6.0, 100.0):
        root = brentq(lambda t, b=beta: b * np.sin(t) ** 2 - (d - 1) * np.cos(t), 0, np.pi / 2)
        tau = float(theory.tau_star(beta, d))
        assert abs(tau - root) < 1e-12
        g = theory.hessian_kernel(jnp.array([0.9 * tau, 1.1 * tau, np.pi]), beta=beta, d=d)
        assert g[0] > 0 and g[1] < 0 and g[2] < 0
    assert float(theory.tau_star(0.0, d)) == pytest.approx(np.pi / 2, abs=1e-15)
    big = 1e8
    assert float(theory.tau_star(big, d)) == pytest.approx(np.sqrt((d - 1) / big), rel=1e-6)
    np.testing.assert_allclose(
        theory.tau_star(jnp.array([1.0, 6.0]), d),
        [theory.tau_star(1.0, d), theory.tau_star(6.0, d)],
    )


def test_fig6_kernel_is_negative_beyond_tau_star():
    for beta in (2.0, 6.0):
        tau = jnp.linspace(-np.pi, np.pi, 2001)
        g = theory.hessian_kernel(tau, beta=beta)
        outside = jnp.abs(tau) > theory.tau_star(beta) + 1e-9
        assert bool(jnp.all(g[outside] < 0)) and bool(jnp.all(g[~outside] > 0))


def test_theorem_5_1_threshold():
    # values of MATH.md §7, and the proof's condition (n − 1) τ*(β_n) = π/2 (τ* checked above)
    assert [round(theory.strict_saddle_threshold(n), 2) for n in (4, 8, 32)] == [
        3.46,
        19.69,
        389.31,
    ]
    for n in (3, 5, 12):
        beta_n = theory.strict_saddle_threshold(n)
        assert (n - 1) * float(theory.tau_star(beta_n)) == pytest.approx(np.pi / 2, rel=1e-12)
    # β_n ≈ 4(n−1)²/π² (not the n²/π² of the paper's §7, MATH.md §11 item 5)
    assert theory.strict_saddle_threshold(1001) / (4 * 1000**2 / np.pi**2) == pytest.approx(
        1, rel=1e-5
    )


def test_float32_circle_tools():
    th = THETA.astype(jnp.float32)
    assert af.landscape.circle_field(th, 2.0).dtype == jnp.float32
    np.testing.assert_allclose(
        af.landscape.torus_hessian(th, 2.0), af.landscape.torus_hessian(THETA, 2.0), atol=1e-5
    )


def test_bad_inputs_are_rejected_with_clear_messages():
    with pytest.raises(ValueError, match=r"theta: expected a vector of n angles"):
        af.landscape.circle_energy(jnp.zeros((2, 2)), 1.0)
    with pytest.raises(ValueError, match="beta: expected a finite value ≠ 0"):
        af.landscape.torus_hessian(THETA, 0.0)
    with pytest.raises(ValueError, match="normalization"):
        af.landscape.circle_field(THETA, 1.0, "softplus")
    with pytest.raises(ValueError, match="beta: expected finite values"):
        theory.tau_star(float("nan"))
    with pytest.raises(ValueError, match="d: expected an integer >= 2"):
        theory.tau_star(1.0, d=1)
    with pytest.raises(ValueError, match="n: expected an integer >= 2"):
        theory.strict_saddle_threshold(1)
    with pytest.raises(ValueError, match=r"x: expected tokens on the circle"):
        af.landscape.circle_angles(jnp.zeros((3, 3)))
