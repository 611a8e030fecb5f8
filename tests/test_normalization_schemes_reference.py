"""One-step NumPy references for the normalisation placements, written from their formulas:

    post-LN  z ← N(z + h g(z))                ż = P^⊥_z g(z)
    pre-LN   z ← z + h g(N(z))                ż = g(z/|z|)
    peri-LN  z ← z + h N(g(N(z)))             ż = N(g(z/|z|))
    nGPT     z ← N(z + h α ⊙ (N(g(z)) − z))   ż = P^⊥_z (α ⊙ (N(g(z)) − z))

with g the unprojected attention output g_i(x) = Σ_j softmax_j(β⟨Q x_i, K x_j⟩) V x_j and N the
row normalisation. Replacing nGPT's N(g) by g, or calling peri-LN's sublayer on z instead of
N(z), changes every number below by O(1)."""

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import attention_numpy

import attnflow as af

N, D, BETA, H = 5, 3, 1.5, 0.3
_rng = np.random.default_rng(11)
Q_, K_, V_ = (_rng.normal(size=(D, D)) / np.sqrt(D) for _ in range(3))
V_ = V_ + 2.0 * np.eye(D)  # |g| far from 1, so that N(g) and g differ
SUBLAYER = af.AttentionSublayer(af.SelfAttention(BETA, jnp.asarray(Q_), jnp.asarray(K_), V_))
RATE = np.array([0.5, 1.0, 2.0])


def _unit(a):
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _g(x):
    """Σ_j a_ij V x_j with a = softmax of β⟨Q x_i, K x_j⟩ (column-vector V)."""
    return attention_numpy(x, beta=BETA, Q=Q_, K=K_, V=V_)


def _proj(z, v):
    return v - np.sum(z * v, axis=1, keepdims=True) * z


def _stream(on_sphere):
    z = np.asarray(af.random_tokens(jr.key(3), N, D))
    if on_sphere:
        return z
    return z * np.linspace(0.4, 2.5, N)[:, None]  # radii ≠ 1: N(z) ≠ z matters


REFERENCES = {
    # name: (scheme, on_sphere, layer(z), vector_field(z))
    "post-LN": (
        af.PostLN(),
        True,
        lambda z: _unit(z + H * _g(z)),
        lambda z: _proj(z, _g(z)),
    ),
    "pre-LN": (
        af.PreLN(),
        False,
        lambda z: z + H * _g(_unit(z)),
        lambda z: _g(_unit(z)),
    ),
    "peri-LN": (
        af.PeriLN(),
        False,
        lambda z: z + H * _unit(_g(_unit(z))),
        lambda z: _unit(_g(_unit(z))),
    ),
    "nGPT scalar": (
        af.NGPT(0.7),
        True,
        lambda z: _unit(z + H * 0.7 * (_unit(_g(z)) - z)),
        lambda z: _proj(z, 0.7 * (_unit(_g(z)) - z)),
    ),
    "nGPT vector": (
        af.NGPT(jnp.asarray(RATE)),
        True,
        lambda z: _unit(z + H * RATE[None, :] * (_unit(_g(z)) - z)),
        lambda z: _proj(z, RATE[None, :] * (_unit(_g(z)) - z)),
    ),
}


@pytest.mark.parametrize("name", list(REFERENCES))
def test_one_layer_against_numpy(name):
    scheme, on_sphere, layer, _ = REFERENCES[name]
    z = _stream(on_sphere)
    np.testing.assert_allclose(scheme.layer(SUBLAYER, 0.0, jnp.asarray(z), H), layer(z), atol=1e-13)
    # layers() is the same map iterated: two layers against two NumPy steps
    zs = scheme.layers(SUBLAYER, jnp.asarray(z), 2, H)
    np.testing.assert_allclose(zs[2], layer(layer(z)), atol=1e-12)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_vector_field_against_numpy(name):
    scheme, on_sphere, _, field = REFERENCES[name]
    z = _stream(on_sphere)
    np.testing.assert_allclose(
        scheme.vector_field(SUBLAYER, 0.0, jnp.asarray(z)), field(z), atol=1e-13
    )


def test_the_schemes_really_differ():
    """Guards the references above: on these inputs N(g) ≠ g and N(z) ≠ z by O(1), so a scheme
    that skipped a normalisation could not pass."""
    z = _stream(False)
    g = _g(_unit(z))
    assert np.abs(_unit(g) - g).max() > 0.3
    assert np.abs(_g(z) - _g(_unit(z))).max() > 0.1
    x = _stream(True)
    assert np.abs(_unit(_g(x)) - _g(x)).max() > 0.3


def test_multihead_sublayer_is_the_sum_of_heads():
    """AttentionSublayer(MultiHeadAttention) is Σ_h Σ_j a^h_ij V_h x_j, unprojected ((2.7))."""
    x = _stream(True)
    second = np.eye(D)[::-1].copy()
    heads = [
        af.SelfAttention(BETA, jnp.asarray(Q_), jnp.asarray(K_), V_),
        af.SelfAttention(0.5, V=second),
    ]
    out = af.AttentionSublayer(af.MultiHeadAttention.from_heads(heads))(0.0, jnp.asarray(x), None)
    w = np.exp(0.5 * x @ x.T)
    w /= w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, _g(x) + w @ x @ second.T, atol=1e-13)


@pytest.mark.parametrize("name", ["post-LN", "pre-LN", "peri-LN", "nGPT scalar", "nGPT vector"])
def test_the_one_layer_loop_runs_every_scheme_on_an_attention_field(name):
    """attnflow.layers(field, z0, L, h, scheme=...) on the attention field itself (its update is
    the unprojected output) against two NumPy steps of the scheme's formula."""
    scheme, on_sphere, layer, _ = REFERENCES[name]
    z = _stream(on_sphere)
    field = af.SelfAttention(BETA, jnp.asarray(Q_), jnp.asarray(K_), V_)
    by_object = af.layers(field, jnp.asarray(z), 2, H, scheme=scheme)
    np.testing.assert_allclose(by_object[2], layer(layer(z)), atol=1e-12)
    if name in ("post-LN", "pre-LN", "peri-LN"):
        by_name = af.layers(field, jnp.asarray(z), 2, H, scheme=name)
        np.testing.assert_allclose(by_name, by_object, atol=0)


def test_the_residual_scheme_is_explicit_euler_without_normalisation():
    z = _stream(False)
    g = af.PureSelfAttention(BETA, jnp.asarray(Q_), jnp.asarray(K_), V_)
    want = z + H * _g(z)
    want = want + H * _g(want)
    got = af.layers(g, jnp.asarray(z), 2, H, scheme="residual")
    np.testing.assert_allclose(got[2], want, atol=1e-12)
    np.testing.assert_allclose(af.residual_layers(g, jnp.asarray(z), 2, H), got, atol=0)


def test_unknown_scheme_is_rejected():
    with pytest.raises(ValueError, match="scheme: expected one of 'post-LN'"):
        af.layers(af.SelfAttention(1.0), jnp.asarray(_stream(True)), 1, 0.1, scheme="postln")
