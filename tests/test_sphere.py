import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af


def test_random_tokens_shape_norm_determinism():
    x = af.random_tokens(jr.key(0), 5, 3, batch_shape=(2, 4))
    assert x.shape == (2, 4, 5, 3)
    np.testing.assert_allclose(jnp.linalg.norm(x, axis=-1), 1.0, atol=1e-14)
    np.testing.assert_array_equal(x, af.random_tokens(jr.key(0), 5, 3, batch_shape=(2, 4)))
    assert af.random_tokens(jr.key(0), 5, 3, dtype=jnp.float32).dtype == jnp.float32


def test_random_tokens_are_uniform():
    # For uniform points on S^{d-1}: E[x] = 0 and E[x x^T] = I/d (Monte Carlo, 5 standard errors).
    d, m = 4, 40000
    x = af.random_tokens(jr.key(1), m, d)
    assert np.max(np.abs(np.mean(x, axis=0))) < 5 * np.sqrt(1 / d / m)
    second = np.asarray(x.T @ x / m)
    assert np.max(np.abs(second - np.eye(d) / d)) < 5 * np.sqrt(2 / d**2 / m) + 5e-3


@pytest.mark.parametrize("key", [None, jr.key(3)])
def test_orthogonal_tokens(key):
    x = af.orthogonal_tokens(4, 6, key=key)
    np.testing.assert_allclose(x @ x.T, np.eye(4), atol=1e-13)


def test_tangent_and_projection():
    x = af.random_tokens(jr.key(0), 6, 3)
    v = jr.normal(jr.key(1), (6, 3))
    t = af.tangent(x, v)
    np.testing.assert_allclose(jnp.sum(t * x, axis=1), 0.0, atol=1e-14)
    np.testing.assert_allclose(af.tangent(x, t), t, atol=1e-14)  # a projection
    y = 2.5 * x
    np.testing.assert_allclose(jnp.sum(af.project_tangent(y, v) * y, axis=1), 0.0, atol=1e-13)


def test_geodesic_stays_on_sphere_and_has_velocity_v():
    x = af.random_tokens(jr.key(0), 5, 3)
    v = af.tangent(x, jr.normal(jr.key(1), (5, 3)))
    np.testing.assert_allclose(jnp.linalg.norm(af.geodesic(x, v, 0.7), axis=1), 1.0, atol=1e-14)
    velocity = jax.jvp(lambda t: af.geodesic(x, v, t), (0.0,), (1.0,))[1]
    np.testing.assert_allclose(velocity, v, atol=1e-14)


def test_bad_inputs():
    with pytest.raises(ValueError, match="d >= 2"):
        af.random_tokens(jr.key(0), 3, 1)
    with pytest.raises(ValueError, match="d >= n"):
        af.orthogonal_tokens(4, 3)
    with pytest.raises(ValueError, match="row 1 is zero"):
        af.normalize(jnp.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="v: expected the shape of x"):
        af.tangent(jnp.ones((2, 3)), jnp.ones((3, 3)))
