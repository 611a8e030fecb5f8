"""Hardmax attention (9.5)–(9.6): the β → ∞ limit of softmax attention, at its exponential rate."""

import jax.numpy as jnp
import numpy as np
import pytest

import attnflow as af

N, D = 6, 3


def _config(seed=0):
    rng = np.random.default_rng(seed)
    Q, K = rng.normal(size=(D, D)), rng.normal(size=(D, D))
    V = rng.normal(size=(D, D))
    x = rng.normal(size=(N, D))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return Q, K, V, x


def _gaps(scores):
    """Top-1 minus top-2 score of each row (NumPy, independent of attnflow)."""
    top = np.sort(scores, axis=1)
    return top[:, -1] - top[:, -2]


def test_hardmax_function():
    h = af.hardmax(jnp.array([[0.0, 2.0, 2.0, -1.0], [3.0, 1.0, 0.0, 2.95]]))
    np.testing.assert_array_equal(h, [[0, 0.5, 0.5, 0], [1, 0, 0, 0]])
    tied = af.hardmax(jnp.array([3.0, 1.0, 0.0, 2.95]), tol=0.1)
    np.testing.assert_array_equal(tied, [0.5, 0, 0, 0.5])


def test_softmax_attention_converges_to_hardmax_at_rate_bound():
    Q, K, V, x = _config()
    scores = (x @ Q.T) @ (x @ K.T).T
    gap = _gaps(scores).min()
    assert gap > 1e-3  # away from ties
    hard = np.asarray(af.HardmaxSelfAttention(Q, K, V).attention_matrix(jnp.asarray(x)))
    np.testing.assert_array_equal(hard, np.eye(N)[np.argmax(scores, axis=1)])
    betas = np.array([2.0, 4.0, 8.0, 16.0]) / gap  # errors from e^-2 down to e^-16
    errors = []
    for beta in betas:
        soft = np.asarray(af.SelfAttention(beta, Q, K, V).attention_matrix(jnp.asarray(x)))
        errors.append(np.abs(soft - hard).max())
        assert errors[-1] <= (N - 1) * np.exp(-beta * gap) * (1 + 1e-9)
    # The bound is sharp in the exponent: log error decays with slope −gap in β.
    rate = -np.polyfit(betas[1:], np.log(errors[1:]), 1)[0]
    assert abs(rate / gap - 1) < 0.02


def test_softmax_fields_converge_to_hardmax_fields():
    Q, K, V, x = _config(1)
    gap = _gaps((x @ Q.T) @ (x @ K.T).T).min()
    bound_factor = 2 * (N - 1) * np.linalg.norm(x @ V.T, axis=1).max()
    hard_sphere = np.asarray(af.HardmaxSelfAttention(Q, K, V)(0.0, jnp.asarray(x)))
    hard_rescaled = np.asarray(af.HardmaxRescaledAttention(Q, K, V)(0.0, jnp.asarray(x)))
    z_spread = np.linalg.norm((x[None] - x[:, None]) @ V.T, axis=-1).max()
    for c in (4.0, 8.0, 16.0):
        beta = c / gap
        sphere = np.asarray(af.SelfAttention(beta, Q, K, V)(0.0, jnp.asarray(x)))
        rescaled = np.asarray(
            af.RescaledSelfAttention(beta, Q, K, V, logits_at="z")(0.0, jnp.asarray(x))
        )
        # Row i moves by at most Σ_j |a_ij − h_ij| |V x_j| (and the projection is a contraction).
        assert np.abs(sphere - hard_sphere).max() <= bound_factor * np.exp(-c)
        assert np.abs(rescaled - hard_rescaled).max() <= 2 * (N - 1) * z_spread * np.exp(-c)
    assert np.abs(hard_sphere).max() > 0.1  # the limit field is not trivially zero


def test_ties_are_averaged_example_9_3():
    z = jnp.array([[1.0, 1.0], [-1.0, 1.0], [0.0, 0.0]])
    hard = af.HardmaxRescaledAttention()
    np.testing.assert_allclose(hard(0.0, z), [[0, 0], [0, 0], [0, 2 / 3]], atol=1e-15)
    # Softmax (9.4) at a tie gives the same equal weights for every β.
    soft = af.RescaledSelfAttention(50.0, logits_at="z")(0.0, z)
    np.testing.assert_allclose(soft, hard(0.0, z), atol=1e-12)


def test_discrete_hardmax_dynamics_example_9_3_closed_form():
    # After the first step z_3 = (0, 2h/3) ties z_1 and z_2 (⟨z_3, z_j⟩ = y > y² = |z_3|²), so
    # it follows their mean (0, 1): y_{k+1} = y_k + h (1 − y_k), i.e.
    # y_k = 1 − (1 − 2h/3)(1 − h)^{k−1}.
    h, L = 0.1, 30
    z0 = jnp.array([[1.0, 1.0], [-1.0, 1.0], [0.0, 0.0]])
    zs = np.asarray(af.residual_layers(af.HardmaxRescaledAttention(), z0, L, h))
    np.testing.assert_array_equal(zs[:, :2], np.broadcast_to(np.asarray(z0[:2]), (L + 1, 2, 2)))
    k = np.arange(1, L + 1)
    np.testing.assert_allclose(zs[1:, 2, 1], 1 - (1 - 2 * h / 3) * (1 - h) ** (k - 1), rtol=1e-13)
    np.testing.assert_array_equal(zs[:, 2, 0], 0.0)


def test_discrete_hardmax_layers_are_the_limit_of_softmax_layers():
    Q, K, V, x = _config(3)
    hard = np.asarray(af.layers(af.HardmaxSelfAttention(Q, K, V), jnp.asarray(x), 5, 0.1))
    assert np.abs(hard[-1] - hard[0]).max() > 0.1
    gap = min(_gaps((y @ Q.T) @ (y @ K.T).T).min() for y in hard)  # along the whole trajectory
    cs = np.array([4.0, 8.0, 16.0])
    errors = [
        np.abs(
            np.asarray(af.layers(af.SelfAttention(c / gap, Q, K, V), jnp.asarray(x), 5, 0.1)) - hard
        ).max()
        for c in cs
    ]
    # error ∝ e^{−β·gap} = e^{−c}: exponential convergence at the rate of the smallest gap
    rate = -np.polyfit(cs, np.log(errors), 1)[0]
    assert abs(rate - 1) < 0.1, (rate, errors)


def test_float32():
    Q, K, V, x = (np.asarray(a, np.float32) for a in _config(3))
    v = af.HardmaxSelfAttention(Q, K, V)(0.0, jnp.asarray(x))
    assert v.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(v)))


def test_bad_inputs():
    with pytest.raises(ValueError, match="tol: expected a non-negative tie tolerance"):
        af.HardmaxSelfAttention(tol=-1.0)
    with pytest.raises(ValueError, match="tol: expected a non-negative tie tolerance"):
        af.hardmax(jnp.zeros(3), tol=-0.5)
    with pytest.raises(ValueError, match="V: expected a square"):
        af.HardmaxRescaledAttention(V=jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="x: tokens have dimension d = 2"):
        af.HardmaxSelfAttention(V=jnp.eye(3))(0.0, jnp.ones((4, 2)))


def test_weighted_hardmax_follows_the_best_key_of_positive_weight():
    """With Q = K = I each token leads itself; give it weight 0 and it must follow the best of
    the keys of positive weight (NumPy argmax), never a key of weight 0."""
    import jax.random as jr

    x = af.random_tokens(jr.key(5), N, D)
    w = jnp.asarray([0.0, 1.0, 0.0, 2.0, 1.0, 0.5])
    gram = np.asarray(x @ x.T)
    best = [int(np.argmax(np.where(np.asarray(w) > 0, gram[i], -np.inf))) for i in range(N)]
    field = af.HardmaxSelfAttention()
    np.testing.assert_allclose(field.attention_output(x, w), np.asarray(x)[best], atol=1e-15)
    a = field.attention_matrix(x, w)
    np.testing.assert_array_equal(np.argmax(np.asarray(a), axis=1), best)
