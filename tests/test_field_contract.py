"""The attention-field contract, checked for every public attention field class.

For each field: tangency (fields on the sphere), equality with a NumPy reference written here
from the formulas, measure weights (a token split into two half-weight copies at the same point
changes nothing; non-uniform weights change the output), float32 against float64, and ``jit``,
``vmap`` and ``grad``.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import attention_numpy

import attnflow as af

N, D = 7, 3
BETA = 1.3

_rng = np.random.default_rng(0)
QM = _rng.normal(size=(2, D)) / np.sqrt(D)
KM = _rng.normal(size=(2, D)) / np.sqrt(D)
VM = _rng.normal(size=(D, D)) / np.sqrt(D)
STACK_Q = _rng.normal(size=(3, 2, D)) / np.sqrt(D)
STACK_K = _rng.normal(size=(3, 2, D)) / np.sqrt(D)
STACK_V = _rng.normal(size=(3, D, D)) / np.sqrt(D)
BIAS = _rng.normal(size=(N, N))


def _np_weights(w, n):
    return np.full(n, 1.0 / n) if w is None else np.asarray(w, np.float64)


def _np_softmax_attention(s, w, values):
    e = np.exp(s - s.max(axis=1, keepdims=True)) * w[None, :]
    return (e / e.sum(axis=1, keepdims=True)) @ values


def _np_sa(
    x, w, *, beta=BETA, Q=None, K=None, V=None, normalization="softmax", causal=False, bias=None
):
    return attention_numpy(
        x, w, beta=beta, Q=Q, K=K, V=V, normalization=normalization, causal=causal, bias=bias
    )


def _np_hardmax(x, w, V=None):
    s = x @ x.T
    w = _np_weights(w, len(x))
    s = np.where(w[None, :] > 0, s, -np.inf)
    a = (s >= s.max(axis=1, keepdims=True) - 1e-12) * w[None, :]
    return (a / a.sum(axis=1, keepdims=True)) @ (x if V is None else x @ V.T)


def _np_sinkhorn(x, w):
    w = _np_weights(w, len(x))
    kernel = np.exp(BETA * x @ x.T)
    u = np.ones(len(x))
    for _ in range(20000):
        v = 1.0 / (kernel.T @ (w * u))
        u = 1.0 / (kernel @ (w * v))
    a = u[:, None] * kernel * v[None, :] * w[None, :]
    return a @ x


def _np_causal_alibi(x, w, lam=0.7):
    n = len(x)
    mu = _np_weights(w, n)
    out = np.zeros_like(x)
    for j in range(1, n):
        k = np.arange(j)
        pos = mu[k] * np.exp(-lam * (j - k) / n)
        pos = pos / pos.sum()
        out[j] = (pos * BETA * np.exp(BETA * x[k] @ x[j])) @ x[k]
    return out


def _np_stacked(x, w):
    total = 0.0
    for h in range(3):
        total = total + _np_sa(x, w, Q=STACK_Q[h], K=STACK_K[h], V=STACK_V[h])
    return 0.5 * total


# name: (field factory, NumPy reference of the unprojected output, on the sphere, split applies)
CASES = {
    "SA": (lambda: af.SelfAttention(BETA), lambda x, w: _np_sa(x, w), True, True),
    "USA": (
        lambda: af.SelfAttention(BETA, normalization="n"),
        lambda x, w: _np_sa(x, w, normalization="n"),
        True,
        True,
    ),
    "SA-QKV": (
        lambda: af.SelfAttention(BETA, QM, KM, VM),
        lambda x, w: _np_sa(x, w, Q=QM, K=KM, V=VM),
        True,
        True,
    ),
    "SA-causal": (
        lambda: af.SelfAttention(BETA, causal=True),
        lambda x, w: _np_sa(x, w, causal=True),
        True,
        False,  # positions: duplicating a token shifts every later index
    ),
    "SA-blocked": (
        lambda: af.SelfAttention(BETA, V=VM, block_size=3),
        lambda x, w: _np_sa(x, w, V=VM),
        True,
        True,
    ),
    "MultiHead": (
        lambda: af.MultiHeadAttention.from_heads(
            [af.SelfAttention(BETA), af.SelfAttention(0.5, V=VM)]
        ),
        lambda x, w: _np_sa(x, w) + _np_sa(x, w, beta=0.5, V=VM),
        True,
        True,
    ),
    "MultiHeadStacked": (
        lambda: af.MultiHeadAttention(beta=BETA, Q=STACK_Q, K=STACK_K, V=STACK_V, scale=0.5),
        _np_stacked,
        True,
        True,
    ),
    "Positional": (
        lambda: af.PositionalAttention(BETA, BIAS, V=VM),
        lambda x, w: _np_sa(x, w, V=VM, bias=BIAS),
        True,
        False,  # the bias is indexed by position; checked separately below
    ),
    "Hardmax": (
        lambda: af.HardmaxSelfAttention(V=VM),
        lambda x, w: _np_hardmax(x, w, VM),
        True,
        True,
    ),
    "Sinkhorn": (lambda: af.SinkhornAttention(BETA), _np_sinkhorn, True, True),
    "CausalALiBi": (lambda: af.CausalALiBiAttention(BETA, 0.7), _np_causal_alibi, True, False),
    "Pure": (
        lambda: af.PureSelfAttention(BETA, V=VM),
        lambda x, w: _np_sa(x, w, V=VM),
        False,
        True,
    ),
    "Rescaled-z": (
        lambda: af.RescaledSelfAttention(BETA, V=VM, logits_at="z"),
        lambda x, w: _np_sa(x, w, V=VM) - x @ VM.T,
        False,
        True,
    ),
}


def _tokens(dtype=jnp.float64):
    return af.random_tokens(jr.key(3), N, D, dtype=dtype)


def _weights():
    return jnp.asarray(np.linspace(0.5, 1.5, N) / np.linspace(0.5, 1.5, N).sum())


def _call(field, x, w=None):
    return field(0.0, x, w)


def _unprojected(field, x, w=None):
    """The field's attention output before any projection (R^d fields are unprojected)."""
    if isinstance(field, af.AbstractAttention):
        return field.attention_output(x, w)
    return field(0.0, x, w)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy_reference_uniform_and_weighted(name):
    make, reference, _, _ = CASES[name]
    field, x = make(), _tokens()
    for w in (None, _weights()):
        got = np.asarray(_unprojected(field, x, w))
        want = reference(np.asarray(x), None if w is None else np.asarray(w))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[2]))
def test_tangent_and_projection_of_the_output(name):
    make = CASES[name][0]
    field, x = make(), _tokens()
    w = _weights()
    v = _call(field, x, w)
    assert float(jnp.abs(jnp.sum(v * x, axis=1)).max()) < 1e-13
    out = _unprojected(field, x, w)
    np.testing.assert_allclose(v, out - jnp.sum(out * x, axis=1, keepdims=True) * x, atol=1e-13)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[3]))
def test_splitting_a_token_into_two_half_weight_copies_changes_nothing(name):
    make = CASES[name][0]
    field, x = make(), _tokens()
    w = _weights()
    split = 2
    x_split = jnp.concatenate([x, x[split : split + 1]])
    w_split = jnp.concatenate([w.at[split].multiply(0.5), w[split : split + 1] * 0.5])
    whole = _call(field, x, w)
    halves = _call(field, x_split, w_split)
    np.testing.assert_allclose(halves[:N], whole, rtol=1e-9, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(halves[N], whole[split], rtol=1e-9, atol=1e-12)


def test_positional_split_with_the_bias_duplicated():
    """Positional bias: the copy inherits its original's bias row and column."""
    x, w = _tokens(), _weights()
    index = jnp.concatenate([jnp.arange(N), jnp.array([2])])
    whole = af.PositionalAttention(BETA, BIAS, V=VM)(0.0, x, w)
    split = af.PositionalAttention(BETA, BIAS[np.ix_(index, index)], V=VM)
    w_split = jnp.concatenate([w.at[2].multiply(0.5), w[2:3] * 0.5])
    np.testing.assert_allclose(split(0.0, x[index], w_split)[:N], whole, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_non_uniform_weights_change_the_output(name):
    make = CASES[name][0]
    field, x = make(), _tokens()
    uniform = _call(field, x, None)
    w = _weights()
    if name == "Hardmax":
        # Without ties the argmax sets ignore positive weights; a zero weight removes a leader.
        w = w.at[0].set(0.0)
    weighted = _call(field, x, w)
    assert float(jnp.abs(weighted - uniform).max()) > 1e-3, name


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_agrees_with_float64(name):
    make = CASES[name][0]
    field = make()
    x64 = _tokens()
    x32 = x64.astype(jnp.float32)
    f64 = _call(field, x64, _weights())
    f32 = _call(field, x32, _weights().astype(jnp.float32))
    assert f32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(f32), np.asarray(f64), rtol=0, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_vmap_grad(name):
    make = CASES[name][0]
    field = make()
    x = _tokens()
    w = _weights()
    eager = _call(field, x, w)
    jitted = eqx.filter_jit(_call)(field, x, w)
    np.testing.assert_allclose(jitted, eager, rtol=1e-12, atol=1e-14)
    batch = jnp.stack([x, af.random_tokens(jr.key(4), N, D)])
    mapped = jax.vmap(lambda xb: _call(field, xb, w))(batch)
    np.testing.assert_allclose(mapped[0], eager, rtol=1e-12, atol=1e-14)
    cotangent = jr.normal(jr.key(5), x.shape)
    grad = jax.grad(lambda xx: jnp.sum(_call(field, xx, w) * cotangent))(x)
    assert grad.shape == x.shape and bool(jnp.all(jnp.isfinite(grad)))
    if name not in ("Hardmax", "Sinkhorn"):
        # Central differences along one direction (hardmax is piecewise constant; Sinkhorn's
        # gradient is checked in its own test file).
        direction = jr.normal(jr.key(6), x.shape)
        h = 1e-6
        fd = (
            jnp.sum(_call(field, x + h * direction, w) * cotangent)
            - jnp.sum(_call(field, x - h * direction, w) * cotangent)
        ) / (2 * h)
        np.testing.assert_allclose(jnp.sum(grad * direction), fd, rtol=1e-6, atol=1e-8)


def test_every_public_attention_class_is_covered():
    """A new attention field must join CASES."""
    covered = {type(CASES[name][0]()).__name__ for name in CASES}
    public = {
        name
        for name in dir(af)
        if isinstance(getattr(af, name), type)
        and issubclass(getattr(af, name), af.AbstractAttention)
        and not name.startswith("Abstract")
    }
    assert public <= covered, public - covered
