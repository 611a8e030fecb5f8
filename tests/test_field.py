import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import sa_field_numpy

import attnflow as af


def _random_orthogonal(key, d):
    q, r = jnp.linalg.qr(jr.normal(key, (d, d)))
    return q * jnp.sign(jnp.diag(r))[None, :]


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_permutation_equivariance(normalization):
    x = af.random_tokens(jr.key(0), 7, 3)
    Q, K, V = (jr.normal(k, (3, 3)) for k in jr.split(jr.key(1), 3))
    field = af.SelfAttention(2.0, Q, K, V, normalization=normalization)
    perm = jr.permutation(jr.key(2), 7)
    np.testing.assert_allclose(field(0.0, x[perm], None), field(0.0, x, None)[perm], atol=1e-13)


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_rotation_equivariance_identity_weights(normalization):
    x = af.random_tokens(jr.key(3), 7, 4)
    R = _random_orthogonal(jr.key(4), 4)
    field = af.SelfAttention(3.0, normalization=normalization)
    np.testing.assert_allclose(field(0.0, x @ R.T, None), field(0.0, x, None) @ R.T, atol=1e-13)


def test_fields_are_tangent():
    x = af.random_tokens(jr.key(5), 9, 5)
    for field in (
        af.SelfAttention(1.0, causal=True),
        af.SelfAttention(1.0, normalization="n"),
        af.MultiHeadAttention.from_heads([af.SelfAttention(1.0), af.SelfAttention(0.5)]),
    ):
        np.testing.assert_allclose(jnp.sum(field(0.0, x, None) * x, axis=1), 0.0, atol=1e-14)


def test_causal_matches_masked_numpy_and_first_token_fixed():
    x = af.random_tokens(jr.key(6), 6, 3)
    field = af.SelfAttention(1.5, causal=True)
    v = field(0.0, x, None)
    for k in range(6):  # token k sees x_1..x_k only: the causal field is (SA) on the prefix
        np.testing.assert_allclose(v[k], sa_field_numpy(x[: k + 1], 1.5)[k], atol=1e-13)
    np.testing.assert_allclose(v[0], 0.0, atol=1e-15)
    sol = af.solve(field, x, 5.0, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sol.ys[-1, 0], x[0], atol=1e-13)


def test_attention_matrix_row_stochastic():
    x = af.random_tokens(jr.key(7), 6, 3)
    a = af.SelfAttention(2.0, causal=True).attention_matrix(x)
    np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=1e-14)
    assert float(jnp.max(jnp.abs(jnp.triu(a, 1)))) == 0.0


def test_multihead_is_sum_of_heads_projected_once():
    x = af.random_tokens(jr.key(8), 6, 4)
    keys = jr.split(jr.key(9), 6)
    heads = [
        af.SelfAttention(
            1.0, jr.normal(keys[0], (2, 4)), jr.normal(keys[1], (2, 4)), jr.normal(keys[2], (4, 4))
        ),
        af.SelfAttention(
            2.0, jr.normal(keys[3], (2, 4)), jr.normal(keys[4], (2, 4)), jr.normal(keys[5], (4, 4))
        ),
    ]
    ref = sum(sa_field_numpy(x, h.beta, h.Q, h.K, h.V) for h in heads)  # projection is linear
    np.testing.assert_allclose(
        af.MultiHeadAttention.from_heads(heads)(0.0, x, None), ref, atol=1e-13
    )


def test_float32_beta_100_is_finite():
    x = af.random_tokens(jr.key(10), 32, 3, dtype=jnp.float32)
    field = af.SelfAttention(100.0)
    v = field(0.0, x, None)
    assert v.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(v)))
    np.testing.assert_allclose(v, sa_field_numpy(np.asarray(x, np.float64), 100.0), atol=1e-4)
    sol = af.solve(field, x, 10.0)
    assert sol.ys.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(sol.ys)))
    np.testing.assert_allclose(jnp.linalg.norm(sol.ys, axis=-1), 1.0, atol=1e-6)
    xs = af.layers(field, x, 20, 0.1)
    assert bool(jnp.all(jnp.isfinite(xs)))
