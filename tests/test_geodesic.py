"""`geodesic` is the exponential map of the product of spheres, not a retraction:
γ_i(t) = cos(t|v_i|) x_i + sin(t|v_i|) v_i/|v_i| (a great circle at constant speed |v_i|)."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

N, D = 6, 4


def _tangent_pair(key, scale=1.0):
    x = np.asarray(af.random_tokens(key, N, D))
    v = np.asarray(jr.normal(jr.fold_in(key, 1), (N, D)))
    v = scale * (v - np.sum(x * v, axis=1, keepdims=True) * x)
    return x, v


def _exp_map(x, v, t):
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return np.cos(t * norm) * x + np.sin(t * norm) * v / norm


@pytest.mark.parametrize("t", [0.3, 1.0, 2.7, -1.4])
def test_geodesic_is_the_exponential_map(t):
    """Large speeds (|v| up to ~4, t|v| beyond π) where normalize(x + t v) is far off."""
    x, v = _tangent_pair(jr.key(0), scale=2.0)
    out = af.geodesic(jnp.asarray(x), jnp.asarray(v), t)
    np.testing.assert_allclose(out, _exp_map(x, v, t), atol=1e-13)
    retraction = (x + t * v) / np.linalg.norm(x + t * v, axis=1, keepdims=True)
    assert np.abs(retraction - _exp_map(x, v, t)).max() > 1e-2  # the test can tell them apart


def test_half_turn_reaches_the_antipode():
    """geodesic(x, v, π/|v|) = −x for every row (distinct speeds per row: t is per row here)."""
    x, v = _tangent_pair(jr.key(1), scale=1.5)
    for i in range(N):
        speed = np.linalg.norm(v[i])
        out = af.geodesic(jnp.asarray(x[i : i + 1]), jnp.asarray(v[i : i + 1]), np.pi / speed)
        np.testing.assert_allclose(out[0], -x[i], atol=1e-13)


def test_unit_speed_arc_length_and_inner_product():
    """⟨x_i, γ_i(t)⟩ = cos(t|v_i|): the geodesic distance grows linearly in t (until π)."""
    x, v = _tangent_pair(jr.key(2))
    ts = np.linspace(0.0, 1.0, 7)
    speed = np.linalg.norm(v, axis=1)
    for t in ts:
        out = np.asarray(af.geodesic(jnp.asarray(x), jnp.asarray(v), t))
        np.testing.assert_allclose(np.sum(out * x, axis=1), np.cos(t * speed), atol=1e-13)


def test_zero_velocity_row_stays_put_and_is_differentiable():
    x, v = _tangent_pair(jr.key(3))
    v[2] = 0.0
    out = af.geodesic(jnp.asarray(x), jnp.asarray(v), 0.8)
    np.testing.assert_allclose(out[2], x[2], atol=1e-15)
    velocity = jax.jvp(lambda t: af.geodesic(jnp.asarray(x), jnp.asarray(v), t), (0.0,), (1.0,))[1]
    assert np.all(np.isfinite(np.asarray(velocity)))
    np.testing.assert_allclose(velocity, v, atol=1e-14)


def test_second_derivative_is_normal():
    """A geodesic has no tangential acceleration: γ'' = −|v|² γ (finite differences)."""
    x, v = _tangent_pair(jr.key(4))
    t, h = 0.6, 1e-4
    g = lambda s: np.asarray(af.geodesic(jnp.asarray(x), jnp.asarray(v), s))
    acc = (g(t + h) - 2 * g(t) + g(t - h)) / h**2
    speed2 = np.sum(v * v, axis=1, keepdims=True)
    np.testing.assert_allclose(acc, -speed2 * g(t), atol=1e-5)
