"""Positional biases (ALiBi) and the retrieval profile of causal attention (lost in the middle)."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.integrate

import attnflow as af


def test_alibi_bias_entries():
    m, n = 0.3, 5
    causal = np.asarray(af.alibi_bias(n, m))
    both = np.asarray(af.alibi_bias(n, m, causal=False))
    for i in range(n):
        for j in range(n):
            assert both[i, j] == pytest.approx(-m * abs(i - j), abs=1e-15)
            assert causal[i, j] == (both[i, j] if j <= i else -np.inf)


def test_alibi_slopes_are_press_et_al():
    np.testing.assert_allclose(af.alibi_slopes(8), [2.0**-k for k in range(1, 9)], rtol=1e-15)
    np.testing.assert_allclose(af.alibi_slopes(2), [2.0**-4, 2.0**-8], rtol=1e-15)


def test_zero_bias_is_self_attention():
    x = af.random_tokens(jr.key(0), 6, 3)
    Q, K, V = jr.normal(jr.key(1), (3, 3, 3))
    for normalization in ("softmax", "n"):
        plain = af.SelfAttention(2.0, Q, K, V, normalization=normalization)
        biased = af.PositionalAttention(
            2.0, jnp.zeros((6, 6)), Q, K, V, normalization=normalization
        )
        np.testing.assert_allclose(biased(0.0, x), plain(0.0, x), atol=1e-12)
        causal = af.SelfAttention(2.0, Q, K, V, normalization=normalization, causal=True)
        masked = af.PositionalAttention(
            2.0, af.alibi_bias(6, 0.0), Q, K, V, normalization=normalization
        )
        np.testing.assert_allclose(masked(0.0, x), causal(0.0, x), atol=1e-12)


def test_attention_matrix_against_a_loop():
    n, beta, m = 5, 3.0, 0.7
    x = np.asarray(af.random_tokens(jr.key(2), n, 4))
    A = np.asarray(
        af.PositionalAttention(beta, af.alibi_bias(n, m)).attention_matrix(jnp.asarray(x))
    )
    for i in range(n):
        weights = [np.exp(beta * x[i] @ x[j] - m * (i - j)) if j <= i else 0.0 for j in range(n)]
        np.testing.assert_allclose(A[i], np.array(weights) / sum(weights), atol=1e-14)


def test_bidirectional_alibi_is_a_gradient_flow():
    """Symmetric bias, W = QᵀK symmetric, V = W: ẋ_i = P^⊥ ∇_i E / Z_i with
    E = 1/(2β) Σ_ij exp(β x_iᵀ W x_j + b_ij) (autodiff) and Z_i = Σ_j exp(β x_iᵀ W x_j + b_ij)."""
    n, beta = 6, 1.7
    x = af.random_tokens(jr.key(3), n, 3)
    g = jr.normal(jr.key(4), (3, 3))
    W = (g + g.T) / 2
    bias = af.alibi_bias(n, 0.4, causal=False)
    logits = lambda y: beta * y @ W @ y.T + bias
    energy = lambda y: jnp.sum(jnp.exp(logits(y))) / (2 * beta)
    Z = jnp.sum(jnp.exp(logits(x)), axis=1)
    expected = af.tangent(x, jax.grad(energy)(x)) / Z[:, None]
    field = af.PositionalAttention(beta, bias, Q=W, K=jnp.eye(3), V=W)
    np.testing.assert_allclose(field(0.0, x), expected, atol=1e-12)


def test_steep_slope_freezes_tokens():
    """Off-diagonal weights are ≤ e^{2β − m}, so with V = I the field is below n e^{2β − m}."""
    n, beta, m = 6, 1.0, 30.0
    x = af.random_tokens(jr.key(5), n, 3)
    field = af.PositionalAttention(beta, af.alibi_bias(n, m, causal=False))
    assert float(jnp.abs(field(0.0, x)).max()) < n * np.exp(2 * beta - m)
    assert float(jnp.abs(field(0.0, x)).max()) > 1e-3 * np.exp(2 * beta - m)


def test_float32_large_beta():
    x = af.random_tokens(jr.key(6), 6, 3, dtype=jnp.float32)
    v = af.PositionalAttention(100.0, af.alibi_bias(6, 0.5, dtype=jnp.float32))(0.0, x)
    assert v.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(v)))


def two_token_profile(beta, t1, grid=256):
    """n = 2, d = 2 causal (SA): u = θ_2 − θ_1 obeys u̇ = −a(u) sin u with
    a(u) = e^{β cos u}/(e^{β cos u} + e^β); r(1) = E cos u(t1), r(2) = E cos(u(t1) − u0) for
    u0 uniform — a periodic trapezoid rule over u0 with scipy's ODE solver."""
    u0 = -np.pi + 2 * np.pi * (np.arange(grid) + 0.5) / grid

    def rhs(t, u):
        a = 1.0 / (1.0 + np.exp(beta * (1 - np.cos(u))))
        return -a * np.sin(u)

    u1 = scipy.integrate.solve_ivp(rhs, (0, t1), u0, rtol=1e-11, atol=1e-12).y[:, -1]
    return np.array([np.cos(u1).mean(), np.cos(u1 - u0).mean()])


def test_retrieval_profile_two_tokens_against_quadrature():
    beta, t1, batch = 1.0, 2.0, 512
    x0 = af.random_tokens(jr.key(7), 2, 2, batch_shape=(batch,))
    mean, stderr = af.retrieval_profile(af.SelfAttention(beta, causal=True), x0, t1)
    expected = two_token_profile(beta, t1)
    assert np.all(np.abs(np.asarray(mean) - expected) < 4 * np.asarray(stderr))
    assert np.all(np.asarray(stderr) < 0.05)


def test_retrieval_profile_is_u_shaped():
    """Lost in the middle (seed 001): primacy and recency exceed the interior minimum by many
    standard errors (causal SA, V = I, i.i.d. uniform prompts)."""
    x0 = af.random_tokens(jr.key(8), 6, 8, batch_shape=(128,))
    mean, stderr = af.retrieval_profile(af.SelfAttention(1.0, causal=True), x0, 3.0)
    mean, se = np.asarray(mean), float(np.max(stderr))
    interior = mean[1:-1].min()
    assert mean[0] > interior + 6 * se
    assert mean[-1] > interior + 6 * se
    assert 0 < np.argmin(mean) < len(mean) - 1


def test_bad_inputs():
    x = af.random_tokens(jr.key(9), 4, 3)
    with pytest.raises(ValueError, match="bias: expected a square"):
        af.PositionalAttention(1.0, jnp.zeros((3, 4)))
    with pytest.raises(ValueError, match="row 1 is entirely -inf"):
        af.PositionalAttention(1.0, jnp.array([[0.0, -jnp.inf], [-jnp.inf, -jnp.inf]]))
    with pytest.raises(ValueError, match="finite or -inf"):
        af.PositionalAttention(1.0, jnp.array([[0.0, jnp.inf], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="bias is for n = 5 tokens, got n = 4"):
        af.PositionalAttention(1.0, af.alibi_bias(5, 0.1))(0.0, x)
    with pytest.raises(ValueError, match="slope: expected a finite slope m >= 0"):
        af.alibi_bias(4, -1.0)
    with pytest.raises(ValueError, match="num_heads"):
        af.alibi_slopes(0)
    with pytest.raises(ValueError, match="batch of prompts"):
        af.retrieval_profile(af.SelfAttention(1.0), x, 1.0)
    with pytest.raises(ValueError, match="query: expected a position in \\[-4, 4\\)"):
        af.retrieval_profile(af.SelfAttention(1.0), jnp.stack([x, x]), 1.0, query=4)
    with pytest.raises(ValueError, match="unit sphere"):
        af.retrieval_profile(af.SelfAttention(1.0), jnp.stack([x, 2 * x]), 1.0)


def test_declared_token_shape_is_checked_by_the_base():
    # d and n are declared (dim, num_tokens); the one check_tokens of AbstractAttention reads them.
    field = af.PositionalAttention(1.0, af.alibi_bias(4, 0.5), V=2 * jnp.eye(3))
    assert (field.dim, field.num_tokens) == (3, 4)
    assert af.SinkhornAttention(1.0, V=jnp.eye(2)).dim == 2
    assert af.HardmaxSelfAttention(V=jnp.eye(2)).dim == 2 and af.SelfAttention(1.0).dim is None
    with pytest.raises(ValueError, match="x: the positional bias is for n = 4 tokens, got n = 5"):
        field(0.0, af.random_tokens(jr.key(0), 5, 3))
    with pytest.raises(ValueError, match="x: tokens have dimension d = 2 but Q, K, V act on d = 3"):
        field.attention_matrix(af.random_tokens(jr.key(0), 4, 2))
    with pytest.raises(ValueError, match="x: tokens have dimension d = 3 but Q, K, V act on d = 2"):
        af.SinkhornAttention(1.0, V=jnp.eye(2))(0.0, af.random_tokens(jr.key(0), 4, 3))
