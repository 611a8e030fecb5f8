"""The gradient-flow view (§3): SA/USA are Riemannian gradients of E_β, checked against a
hand-written energy differentiated by JAX (MATH.md §3 recipe) and a NumPy field."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import sa_field_numpy

import attnflow as af

BETA = 1.7


def _symmetric_pair(key, k, d):
    """Rectangular Q, K with QᵀK symmetric: K = C Q with C symmetric."""
    kq, kc = jr.split(key)
    Q = jr.normal(kq, (k, d)) / np.sqrt(d)
    C = jr.normal(kc, (k, k))
    return Q, (C + C.T) / 2 @ Q


def test_closed_form_field_matches_numpy():
    x = af.random_tokens(jr.key(0), 7, 4)
    Q, K, V = (
        jr.normal(k, s)
        for k, s in zip(jr.split(jr.key(1), 3), [(3, 4), (3, 4), (4, 4)], strict=True)
    )
    for norm in ("softmax", "n"):
        got = af.SelfAttention(BETA, Q, K, V, normalization=norm)(0.0, x, None)
        np.testing.assert_allclose(got, sa_field_numpy(x, BETA, Q, K, V, norm), atol=1e-13)


def test_wasserstein_gradient_is_usa():
    x = af.random_tokens(jr.key(2), 6, 3)
    flow = af.GradientFlow(af.InteractionEnergy(BETA), af.WassersteinMetric())
    usa = af.SelfAttention(BETA, normalization="n")
    np.testing.assert_allclose(flow(0.0, x, None), usa(0.0, x, None), atol=1e-13)
    # (3.11): USA = n · P^⊥ ∇E_n with E_n = Σ exp(β x xᵀ)/(2βn²), hand-written.
    n = x.shape[0]
    e_n = lambda y: jnp.sum(jnp.exp(BETA * y @ y.T)) / (2 * BETA * n**2)
    np.testing.assert_allclose(usa(0.0, x, None), n * af.tangent(x, jax.grad(e_n)(x)), atol=1e-13)


def test_attention_metric_gradient_is_sa_with_rectangular_qk():
    x = af.random_tokens(jr.key(3), 6, 4)
    Q, K = _symmetric_pair(jr.key(4), 3, 4)
    S = Q.T @ K
    np.testing.assert_allclose(S, S.T, atol=1e-14)
    flow = af.GradientFlow(af.InteractionEnergy(BETA, S), af.AttentionMetric(BETA, S))
    sa = af.SelfAttention(BETA, Q, K, V=S)
    np.testing.assert_allclose(flow(0.0, x, None), sa(0.0, x, None), atol=1e-12)
    # MATH.md §3 autodiff recipe with an energy written here, and the metric identity.
    energy = lambda y: jnp.sum(jnp.exp(BETA * y @ S @ y.T)) / (2 * BETA)
    g = jax.grad(energy)(x)
    Z = jnp.exp(BETA * x @ S @ x.T).sum(axis=1)
    predicted = af.tangent(x, g) / Z[:, None]
    np.testing.assert_allclose(sa(0.0, x, None), predicted, atol=1e-12)
    Y = af.tangent(x, jr.normal(jr.key(5), x.shape))
    np.testing.assert_allclose(
        jax.jvp(energy, (x,), (Y,))[1], jnp.sum(Z[:, None] * Y * predicted), rtol=1e-12
    )


def test_negative_control_nonsymmetric_qk():
    x = af.random_tokens(jr.key(6), 6, 4)
    Q, K = (jr.normal(k, (4, 4)) for k in jr.split(jr.key(7)))
    S = Q.T @ K
    sym = (S + S.T) / 2
    flow = af.GradientFlow(af.InteractionEnergy(BETA, sym), af.AttentionMetric(BETA, sym))
    gap = jnp.max(jnp.abs(flow(0.0, x, None) - af.SelfAttention(BETA, Q, K, V=sym)(0.0, x, None)))
    assert gap > 1e-2
    with pytest.raises(ValueError, match="A: must be symmetric"):
        af.InteractionEnergy(BETA, S)
    with pytest.raises(ValueError, match="A: must be symmetric"):
        af.AttentionMetric(BETA, S)


def test_descent_flips_sign_and_gives_repulsive_usa():
    x = af.random_tokens(jr.key(8), 5, 3)
    flow = af.GradientFlow(af.InteractionEnergy(BETA), af.WassersteinMetric(), descent=True)
    repulsive = af.SelfAttention(BETA, V=-jnp.eye(3), normalization="n")
    np.testing.assert_allclose(flow(0.0, x, None), repulsive(0.0, x, None), atol=1e-13)


def test_energy_matches_direct_sum_and_weights():
    x = af.random_tokens(jr.key(9), 5, 3)
    w = jr.uniform(jr.key(10), (5,))
    direct = np.einsum("i,ij,j->", w, np.exp(BETA * np.asarray(x @ x.T)), w) / (2 * BETA)
    np.testing.assert_allclose(af.InteractionEnergy(BETA)(x, w), direct, rtol=1e-13)


def test_attention_metric_gradient_finite_in_float32_at_beta_100():
    x = af.random_tokens(jr.key(11), 16, 3, dtype=jnp.float32)
    flow = af.GradientFlow(af.InteractionEnergy(100.0), af.AttentionMetric(100.0))
    v = flow(0.0, x, None)
    assert v.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(v)))
    ref = sa_field_numpy(np.asarray(x, np.float64), 100.0)
    np.testing.assert_allclose(v, ref, atol=2e-3)
