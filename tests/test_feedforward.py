"""Feed-forward block (2.8), the unsplit Transformer field, and Lie–Trotter layers (order 1)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import loglog_slope, sa_field_numpy

import attnflow as af

N, D, M = 5, 3, 4


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    w, a, b = rng.normal(size=(D, M)), rng.normal(size=(M, D)), rng.normal(size=M)
    V = rng.normal(size=(D, D))
    x = rng.normal(size=(N, D))
    return w, a, b, V, x / np.linalg.norm(x, axis=1, keepdims=True)


def _tangent(x, v):
    return v - np.sum(x * v, axis=1, keepdims=True) * x


def test_feedforward_matches_formula():
    w, a, b, _, x = _weights()
    ff = af.FeedForward(w, a, b)  # ReLU by default
    np.testing.assert_allclose(ff.output(jnp.asarray(x)), np.maximum(x @ a.T + b, 0) @ w.T)
    np.testing.assert_allclose(
        ff(0.0, jnp.asarray(x)), _tangent(x, np.maximum(x @ a.T + b, 0) @ w.T), atol=1e-14
    )


def test_transformer_block_is_one_projection_of_attention_plus_mlp():
    w, a, b, V, x = _weights(1)
    block = af.TransformerBlock(af.SelfAttention(2.0, V=V), af.FeedForward(w, a, b, jnp.tanh))
    # paper (2.8): P^⊥(attention + w σ(a x + b)), assembled here from NumPy pieces.
    attention = sa_field_numpy(x, 2.0, V=V)  # already projected; P^⊥ is linear and idempotent
    expected = attention + _tangent(x, np.tanh(x @ a.T + b) @ w.T)
    np.testing.assert_allclose(block(0.0, jnp.asarray(x)), expected, rtol=1e-12, atol=1e-13)


def test_lie_trotter_layer_is_attention_then_mlp():
    w, a, b, V, x = _weights(2)
    h = 0.3
    xs = af.lie_trotter_layers(
        af.SelfAttention(1.0, V=V), af.FeedForward(w, a, b, jnp.tanh), jnp.asarray(x), 1, h
    )
    # Post-LN sublayers add their raw (unprojected) outputs, then normalise.
    logits = x @ x.T
    att = np.exp(logits - logits.max(axis=1, keepdims=True))
    y = x + h * (att / att.sum(axis=1, keepdims=True)) @ (x @ V.T)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    z = y + h * (np.tanh(y @ a.T + b) @ w.T)
    np.testing.assert_allclose(xs[1], z / np.linalg.norm(z, axis=1, keepdims=True), rtol=1e-12)


def test_lie_trotter_layers_converge_to_unsplit_flow_at_order_one():
    w, a, b, V, x = _weights(3)
    attention = af.SelfAttention(1.5, V=V)
    ff = af.FeedForward(w, a, b, jnp.tanh)
    T = 1.0
    reference = af.solve(
        af.TransformerBlock(attention, ff), jnp.asarray(x), T, rtol=1e-11, atol=1e-12
    )
    reference = np.asarray(reference.ys[-1])
    run = jax.jit(af.lie_trotter_layers, static_argnums=3)
    hs, errors = [], []
    for L in (16, 32, 64, 128):
        hs.append(T / L)
        errors.append(
            np.abs(np.asarray(run(attention, ff, jnp.asarray(x), L, T / L)[-1]) - reference).max()
        )
    slope = loglog_slope(hs, errors)
    assert 0.9 < slope < 1.1, (slope, errors)
    assert np.abs(reference - x).max() > 0.2  # the flow really moves


def test_piecewise_constant_feedforward_and_gradient():
    w, a, b, _, x = _weights(4)
    w2 = -w
    ff = af.PiecewiseConstant.from_fields(
        [af.FeedForward(w, a, b, jnp.tanh), af.FeedForward(w2, a, b, jnp.tanh)], [0.5]
    )
    h, L = 0.25, 4  # layers at t = 0, 0.25 use w; at t = 0.5, 0.75 they use −w
    xs = af.lie_trotter_layers(af.SelfAttention(1.0), ff, jnp.asarray(x), L, h, projected=True)
    expected = x
    for weights in (w, w, w2, w2):
        u = expected + h * sa_field_numpy(expected, 1.0)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        v = u + h * _tangent(u, np.tanh(u @ a.T + b) @ weights.T)
        expected = v / np.linalg.norm(v, axis=1, keepdims=True)
    np.testing.assert_allclose(xs[-1], expected, rtol=1e-12)

    def loss(scale):
        f = af.FeedForward(scale * jnp.asarray(w), a, b, jnp.tanh)
        out = af.lie_trotter_layers(af.SelfAttention(1.0), f, jnp.asarray(x), 3, 0.2)[-1]
        return jnp.sum(out[:, 0])

    eps = 1e-6
    fd = (loss(1.0 + eps) - loss(1.0 - eps)) / (2 * eps)
    np.testing.assert_allclose(jax.grad(loss)(1.0), fd, rtol=1e-7)


def test_float32():
    w, a, b, V, x = (np.asarray(t, np.float32) for t in _weights(5))
    xs = af.lie_trotter_layers(
        af.SelfAttention(1.0, V=V), af.FeedForward(w, a, b), jnp.asarray(x), 3, 0.1
    )
    assert xs.dtype == jnp.float32
    np.testing.assert_allclose(jnp.linalg.norm(xs, axis=-1), 1.0, atol=1e-6)


def test_bad_inputs():
    w, a, b, _, x = _weights()
    with pytest.raises(ValueError, match="hidden width m must agree"):
        af.FeedForward(w, a[:3], b)
    with pytest.raises(ValueError, match=r"w, a: a takes tokens of dimension d = a.shape\[1\] = 2"):
        af.FeedForward(w, a[:, :2], b)
    with pytest.raises(ValueError, match="b: expected a matrix of shape"):
        af.FeedForward(w, a, b[:, None])
    with pytest.raises(ValueError, match="activation: expected a callable"):
        af.FeedForward(w, a, b, activation=3)
    with pytest.raises(ValueError, match="x: tokens have dimension d = 2"):
        af.FeedForward(w, a, b)(0.0, jnp.ones((3, 2)) / np.sqrt(2))
    with pytest.raises(ValueError, match="feedforward: expected an attnflow field"):
        af.TransformerBlock(af.SelfAttention(1.0), jnp.tanh)
    with pytest.raises(ValueError, match="x0: tokens must lie on the unit sphere"):
        af.lie_trotter_layers(
            af.SelfAttention(1.0), af.FeedForward(w, a, b), 2 * jnp.asarray(x), 2, 0.1
        )


def test_lists_are_read_as_their_arrays():
    """Issue 35: FeedForward(w.tolist(), a.tolist(), b.tolist()) is the formula's field."""
    w, a, b, _, x = _weights(3)
    got = af.FeedForward(w.tolist(), a.tolist(), b.tolist(), jnp.tanh)(0.0, jnp.asarray(x))
    want = _tangent(x, np.tanh(x @ a.T + b) @ w.T)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_lie_trotter_layers_refuses_classes_and_names():
    w, a, b, _, x = _weights()
    ff = af.FeedForward(w, a, b)
    x = jnp.asarray(x)
    with pytest.raises(ValueError, match="attention: expected a vector field .* the class"):
        af.lie_trotter_layers(af.SelfAttention, ff, x, 2, 0.1)
    with pytest.raises(ValueError, match="attention: expected a vector field"):
        af.lie_trotter_layers("softmax", ff, x, 2, 0.1)
    with pytest.raises(ValueError, match="feedforward: expected a vector field .* the class"):
        af.lie_trotter_layers(af.SelfAttention(1.0), af.FeedForward, x, 2, 0.1)
    with pytest.raises(ValueError, match=r"field\[1\]: expected a vector field"):
        af.layers((af.SelfAttention(1.0), "mlp"), x, 2, 0.1, scheme="Lie-Trotter")
    with pytest.raises(ValueError, match="num_layers: expected a request of at most"):
        af.lie_trotter_layers(af.SelfAttention(1.0), ff, x, 10**12, 0.1)
