"""Weighted empirical measures: duplicating a particle is the same as doubling its weight."""

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

N, D = 6, 3


@pytest.fixture(scope="module")
def measures():
    """x with weights (2, 1, …, 1)/(n+1), and the same measure as n+1 equally weighted tokens."""
    k = jr.split(jr.key(0), 4)
    x = af.random_tokens(k[0], N, D)
    w = jnp.ones(N).at[0].set(2.0) / (N + 1)
    x_dup = jnp.concatenate([x, x[:1]])
    Q = jr.normal(k[1], (2, D))
    K = jr.normal(k[2], (2, D))
    V = jr.normal(k[3], (D, D))
    return x, w, x_dup, Q, K, V


def _assert_duplicate(weighted, duplicated, tol=1e-13):
    """Rows of the weighted system equal the duplicated system's; the copy's row equals row 0."""
    np.testing.assert_allclose(duplicated[:N], weighted, rtol=0, atol=tol)
    np.testing.assert_allclose(duplicated[N], weighted[0], rtol=0, atol=tol)


def test_energy_and_metric(measures):
    x, w, x_dup, *_ = measures
    A = jnp.diag(jnp.array([1.0, 0.5, -0.3]))
    for energy in (af.InteractionEnergy(1.5), af.InteractionEnergy(0.7, A)):
        np.testing.assert_allclose(energy(x, w), energy(x_dup), rtol=1e-14)
    a = af.tangent(x, jr.normal(jr.key(1), (N, D)))
    b = af.tangent(x, jr.normal(jr.key(2), (N, D)))
    a_dup, b_dup = jnp.concatenate([a, a[:1]]), jnp.concatenate([b, b[:1]])
    for metric in (af.WassersteinMetric(), af.AttentionMetric(1.5)):
        np.testing.assert_allclose(metric(x, a, b, w), metric(x_dup, a_dup, b_dup), rtol=1e-13)
    for metric in (af.WassersteinMetric(), af.AttentionMetric(1.5)):
        grad = af.riemannian_gradient(af.InteractionEnergy(1.5), metric, x, w)
        _assert_duplicate(grad, af.riemannian_gradient(af.InteractionEnergy(1.5), metric, x_dup))


@pytest.mark.parametrize("block_size", [None, 4])
def test_attention_fields(measures, block_size):
    x, w, x_dup, Q, K, V = measures
    fields = [
        af.SelfAttention(2.0, block_size=block_size),
        af.SelfAttention(0.8, Q, K, V, block_size=block_size),
        af.SelfAttention(1.2, Q, K, V, normalization="n", block_size=block_size),
        af.MultiHeadAttention.from_heads(
            [af.SelfAttention(1.0, block_size=block_size), af.SelfAttention(0.5, Q, K, V)]
        ),
    ]
    for field in fields:
        _assert_duplicate(field(0.0, x, w), field(0.0, x_dup, None))
        _assert_duplicate(field(0.0, x, {"weights": w}), field(0.0, x_dup, {"weights": None}))


def test_gradient_flows(measures):
    x, w, x_dup, *_ = measures
    for metric in (af.WassersteinMetric(), af.AttentionMetric(1.5)):
        flow = af.GradientFlow(af.InteractionEnergy(1.5), metric)
        _assert_duplicate(flow(0.0, x, w), flow(0.0, x_dup, None))


def test_uniform_weights_recover_the_unweighted_fields(measures):
    x, *_, Q, K, V = measures
    uniform = jnp.full(N, 1.0 / N)
    for field in (
        af.SelfAttention(1.0, Q, K, V),
        af.SelfAttention(2.0, normalization="n"),
        af.SelfAttention(1.0, causal=True),
    ):
        np.testing.assert_allclose(field(0.0, x, uniform), field(0.0, x, None), atol=1e-14)
        A = field.attention_matrix(x, uniform)
        np.testing.assert_allclose(A, field.attention_matrix(x), atol=1e-14)


def test_weighted_attention_matrix_formula(measures):
    """a_ij = w_j e^{s_ij} / Σ_k w_k e^{s_ik}, written out in NumPy."""
    x, w, _, Q, K, V = measures
    s = 0.9 * (np.asarray(x) @ np.asarray(Q).T) @ (np.asarray(x) @ np.asarray(K).T).T
    e = np.exp(s) * np.asarray(w)[None, :]
    for normalization, expected in (("softmax", e / e.sum(1, keepdims=True)), ("n", e)):
        field = af.SelfAttention(0.9, Q, K, V, normalization=normalization)
        np.testing.assert_allclose(field.attention_matrix(x, w), expected, rtol=1e-13)


def test_solve(measures):
    """Fixed steps so both systems take the same steps; trajectories agree to rounding."""
    x, w, x_dup, Q, K, V = measures
    field = af.SelfAttention(1.0, Q, K, V)
    kwargs = dict(
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=0.1,
        ts=jnp.array([0.5, 2.0]),
    )
    weighted = jax.jit(lambda x, w: af.solve(field, x, 2.0, args=w, **kwargs).ys)(x, w)
    duplicated = af.solve(field, x_dup, 2.0, **kwargs).ys
    for k in range(2):
        _assert_duplicate(weighted[k], duplicated[k], tol=1e-12)
    assert float(jnp.max(jnp.abs(weighted[-1] - x))) > 0.05  # the tokens did move


def test_bad_weights(measures):
    x, *_ = measures
    field = af.SelfAttention(1.0)
    with pytest.raises(ValueError, match=r"args \(weights\): expected shape \(6,\)"):
        field(0.0, x, jnp.ones(5))
    with pytest.raises(ValueError, match="args: attention fields read args as None"):
        field(0.0, x, jnp.ones((6, 1)))
    with pytest.raises(ValueError, match="expected finite non-negative weights"):
        field(0.0, x, -jnp.ones(6))
    with pytest.raises(ValueError, match=r"args \(weights\)"):
        af.GradientFlow(af.InteractionEnergy(1.0), af.WassersteinMetric())(0.0, x, jnp.ones(4))
