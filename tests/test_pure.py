"""Pure self-attention (9.1) and its rescaling (9.2)–(9.4) vs SciPy and closed forms."""

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from helpers import attention_numpy

import attnflow as af

N, D = 5, 3


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(2, D))
    K = rng.normal(size=(2, D))
    V = rng.normal(size=(D, D)) / np.sqrt(D) + 0.5 * np.eye(D)  # non-normal, not symmetric
    x0 = rng.normal(size=(N, D))
    return Q, K, V, x0


def _pure_numpy(x, beta, Q, K, V):
    return attention_numpy(x, beta=beta, Q=Q, K=K, V=V)


def _diffrax_solve(field, y0, ts):
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5(),
        0.0,
        ts[-1],
        None,
        jnp.asarray(y0),
        saveat=diffrax.SaveAt(ts=jnp.asarray(ts)),
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-12),
        max_steps=10_000,
    )
    return np.asarray(sol.ys)


def test_pure_field_matches_formula():
    Q, K, V, x = _weights()
    got = af.PureSelfAttention(1.3, Q, K, V)(0.0, jnp.asarray(x))
    np.testing.assert_allclose(got, _pure_numpy(x, 1.3, Q, K, V), rtol=1e-12, atol=1e-12)


def test_rescaled_solution_is_exp_minus_tV_times_pure_solution():
    Q, K, V, x0 = _weights(1)
    beta, ts = 0.8, np.linspace(0.0, 1.5, 4)
    xs = _diffrax_solve(af.PureSelfAttention(beta, Q, K, V), x0, ts)
    zs = _diffrax_solve(af.RescaledSelfAttention(beta, Q, K, V), x0, ts)
    expected = np.stack([x @ scipy.linalg.expm(-t * V).T for t, x in zip(ts, xs, strict=True)])
    np.testing.assert_allclose(zs, expected, rtol=1e-8, atol=1e-9)
    # The pure flow really moves and grows, so the agreement is not trivial.
    assert np.abs(xs[-1] - x0).max() > 0.5


def test_rescale_and_unrescale_match_scipy_on_a_trajectory():
    _, _, V, x = _weights(2)
    ts = np.array([0.0, 0.4, 1.1])
    xs = np.stack([x, 2 * x, -x])
    z = af.rescale(jnp.asarray(xs), jnp.asarray(ts), jnp.asarray(V))
    expected = np.stack([xi @ scipy.linalg.expm(-t * V).T for t, xi in zip(ts, xs, strict=True)])
    np.testing.assert_allclose(z, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(af.unrescale(z, jnp.asarray(ts), jnp.asarray(V)), xs, atol=1e-12)


def test_logits_at_z_is_paper_9_4():
    Q, K, V, z = _weights(4)
    beta = 2.0
    logits = beta * (z @ Q.T) @ (z @ K.T).T
    a = np.exp(logits - logits.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    expected = np.einsum("ij,ijk->ik", a, (z[None, :, :] - z[:, None, :]) @ V.T)
    got = af.RescaledSelfAttention(beta, Q, K, V, logits_at="z")(3.0, jnp.asarray(z))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_omitted_V_is_the_identity_in_the_rescaling():
    _, _, _, z = _weights(7)
    z = jnp.asarray(z)
    implicit = af.RescaledSelfAttention(0.7)(0.9, z)
    np.testing.assert_allclose(implicit, af.RescaledSelfAttention(0.7, V=jnp.eye(D))(0.9, z))
    assert np.abs(implicit - af.RescaledSelfAttention(0.7, logits_at="z")(0.9, z)).max() > 1e-2


def test_residual_layers_is_explicit_euler():
    # One token, beta = 0: x' = V x, so k Euler steps give (I + hV)^k x0 exactly.
    _, _, V, x = _weights(5)
    h, L = 0.1, 7
    xs = af.residual_layers(af.PureSelfAttention(0.0, V=V), jnp.asarray(x[:1]), L, h)
    expected = np.linalg.matrix_power(np.eye(D) + h * V, L) @ x[0]
    assert xs.shape == (L + 1, 1, D)
    np.testing.assert_allclose(xs[-1, 0], expected, rtol=1e-12)


def test_the_pure_family_has_one_abstract_base_and_steps_as_it_stands():
    Q, K, V, x = _weights(7)
    family = [
        af.PureSelfAttention(1.0, Q, K, V),
        af.RescaledSelfAttention(1.0, Q, K, V, logits_at="z"),
        af.HardmaxRescaledAttention(Q, K, V),
        af.Perceptron(np.ones(D), np.ones(D), 0.5),
    ]
    for field in family:
        assert isinstance(field, af.AbstractPureField) and not isinstance(field, af.AbstractField)
        # Unprojected post-LN-free layers step with the field itself: x + h f(x) (no residual to
        # leave out); one layer against the formula of the pure field (9.1) for the first.
        xs = af.layers(field, jnp.asarray(x), 1, 0.1, scheme="residual")
        step = x + 0.1 * np.asarray(field(0.0, jnp.asarray(x)))
        np.testing.assert_allclose(xs[1], step, rtol=1e-13, atol=1e-13)
    xs = af.layers(family[0], jnp.asarray(x), 1, 0.1, scheme="residual")
    want = x + 0.1 * _pure_numpy(x, 1.0, Q, K, V)
    np.testing.assert_allclose(xs[1], want, rtol=1e-12, atol=1e-12)
    # Declared defaults: no jump times, no forced block size.
    assert family[0].jump_times is None and af.PositionalAttention.block_size is None
    np.testing.assert_array_equal(
        af.Perceptron(np.ones((2, D)), np.ones((2, D)), [0.0, 1.0], [0.5]).jump_times, [0.5]
    )
    with pytest.raises(TypeError):
        af.AbstractPureField()


def test_float32():
    Q, K, V, x0 = (np.asarray(a, np.float32) for a in _weights(6))
    v = af.RescaledSelfAttention(1.0, Q, K, V)(jnp.float32(0.5), jnp.asarray(x0))
    assert v.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(v)))
    assert af.rescale(jnp.asarray(x0), 0.5, jnp.asarray(V)).dtype == jnp.float32


def test_bad_inputs():
    with pytest.raises(ValueError, match="logits_at: expected 'x'"):
        af.RescaledSelfAttention(1.0, logits_at="q")
    with pytest.raises(ValueError, match="V: expected a square"):
        af.rescale(jnp.ones((2, 3)), 1.0, jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="t: expected a scalar or one time per leading entry"):
        af.rescale(jnp.ones((4, 2, 3)), jnp.ones(3), jnp.eye(3))
    with pytest.raises(ValueError, match="num_layers: expected an integer >= 0"):
        af.residual_layers(af.PureSelfAttention(1.0), jnp.ones((2, 3)), -1, 0.1)
    with pytest.raises(ValueError, match="x0: tokens contain NaN"):
        af.residual_layers(af.PureSelfAttention(1.0), jnp.full((2, 3), jnp.nan), 1, 0.1)


def test_lists_are_read_as_their_arrays():
    """Issue 35: F(0.0, x.tolist()) and a list V give the array call's result, and the
    formula's (attention_numpy) for the pure field."""
    Q, K, V, x = _weights(7)
    pure = af.PureSelfAttention(1.1, Q, K, V)
    np.testing.assert_allclose(
        pure(0.0, x.tolist()), _pure_numpy(x, 1.1, Q, K, V), rtol=1e-12, atol=1e-12
    )
    rescaled = af.RescaledSelfAttention(1.1, Q, K, V)
    assert np.array_equal(rescaled(0.3, x.tolist()), rescaled(0.3, jnp.asarray(x)))
    assert np.array_equal(
        rescaled.attention_matrix(0.3, x.tolist()), rescaled.attention_matrix(0.3, jnp.asarray(x))
    )
    np.testing.assert_allclose(
        af.rescale(x, 0.4, V.tolist()), x @ scipy.linalg.expm(-0.4 * V).T, rtol=1e-12
    )
    np.testing.assert_allclose(
        af.unrescale(x, 0.4, V.tolist()), x @ scipy.linalg.expm(0.4 * V).T, rtol=1e-12
    )


def test_residual_layers_refuses_a_class_a_string_and_an_absurd_depth():
    x0 = jnp.ones((2, 3))
    with pytest.raises(ValueError, match="field: expected a vector field .* the class"):
        af.residual_layers(af.PureSelfAttention, x0, 2, 0.1)
    with pytest.raises(ValueError, match="field: expected a vector field"):
        af.residual_layers("pure", x0, 2, 0.1)
    with pytest.raises(ValueError, match="num_layers: expected a request of at most"):
        af.residual_layers(af.PureSelfAttention(1.0), x0, 10**12, 0.1)
