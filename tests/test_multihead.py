"""The one multi-head class, paper (2.7): ``MultiHeadAttention.from_heads(heads)`` and the
stacked arrays ``MultiHeadAttention(beta, Q, K, V, scale=...)`` are the same field, equal to the
sum of the heads written out in NumPy; the deprecated ``StackedMultiHeadAttention`` warns and
builds a ``MultiHeadAttention``; gradients reach the stacked Q, K and V."""

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

N, D = 7, 4
_rng = np.random.default_rng(21)
Q2, K2 = _rng.normal(size=(2, 2, D))  # head dimension k = 2
Q3, K3 = _rng.normal(size=(2, 3, D))  # k = 3
V1, V2 = _rng.normal(size=(2, D, D)) / np.sqrt(D)
BETAS = (0.7, 1.9, 0.4)


def _heads():
    """One head with Q = K = None (identity, k = d), heads of k = 2 and k = 3, three β."""
    return [
        af.SelfAttention(BETAS[0], V=V1),
        af.SelfAttention(BETAS[1], Q2, K2),
        af.SelfAttention(BETAS[2], Q3, K3, V2),
    ]


def _np_head(x, beta, Q=None, K=None, V=None, normalization="softmax", causal=False):
    Q, K, V = (np.eye(D) if m is None else np.asarray(m) for m in (Q, K, V))
    s = beta * (x @ Q.T) @ (x @ K.T).T
    if causal:
        s = np.where(np.tril(np.ones_like(s, bool)), s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    if normalization == "softmax":
        a = e / e.sum(axis=1, keepdims=True)
    else:
        a = e * np.exp(s.max(axis=1, keepdims=True)) / len(x)
    return a @ x @ V.T, a


def _np_sum(x):
    parts = [
        _np_head(x, BETAS[0], V=V1),
        _np_head(x, BETAS[1], Q2, K2),
        _np_head(x, BETAS[2], Q3, K3, V2),
    ]
    return sum(out for out, _ in parts), np.stack([a for _, a in parts])


def test_heads_and_stacked_arrays_are_the_numpy_sum_of_the_heads():
    x = af.random_tokens(jr.key(0), N, D)
    want, matrices = _np_sum(np.asarray(x))
    from_heads = af.MultiHeadAttention.from_heads(_heads())
    # The stacked form of the same heads: identity materialised, k padded with zero rows.
    pad = lambda m: np.pad(m, [(0, D - m.shape[0]), (0, 0)])  # noqa: E731
    stacked = af.MultiHeadAttention(
        beta=list(BETAS),
        Q=np.stack([np.eye(D), pad(Q2), pad(Q3)]),
        K=np.stack([np.eye(D), pad(K2), pad(K3)]),
        V=np.stack([V1, np.eye(D), V2]),
    )
    assert from_heads.num_heads == stacked.num_heads == 3
    assert from_heads.Q.shape == (3, D, D) and from_heads.V.shape == (3, D, D)
    assert from_heads.beta == BETAS
    for field in (from_heads, stacked):
        np.testing.assert_allclose(field.attention_output(x), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(field.attention_matrix(x), matrices, rtol=1e-12, atol=1e-12)
        tangent = want - np.sum(want * np.asarray(x), axis=1, keepdims=True) * np.asarray(x)
        np.testing.assert_allclose(field(0.0, x, None), tangent, rtol=1e-12, atol=1e-12)
        assert field.logits(x).shape == (3, N, N)


def test_scale_and_shared_beta_and_identity_in_every_head():
    x = af.random_tokens(jr.key(1), N, D)
    Q = _rng.normal(size=(3, 2, D))
    field = af.MultiHeadAttention(beta=1.1, Q=Q, K=Q[::-1], scale=0.25)
    assert field.V is None and field.beta == 1.1 and field.scale == 0.25
    want = 0.25 * sum(_np_head(np.asarray(x), 1.1, Q[h], Q[2 - h])[0] for h in range(3))
    np.testing.assert_allclose(field.attention_output(x), want, rtol=1e-12, atol=1e-12)
    # The heads given back are the same field (c folded into V_h).
    again = af.MultiHeadAttention.from_heads(field.heads)
    np.testing.assert_allclose(again.attention_output(x), want, rtol=1e-12, atol=1e-12)


def test_heads_with_different_masks_and_normalisations():
    x = af.random_tokens(jr.key(2), N, D)
    heads = [
        af.SelfAttention(2.0, causal=True),
        af.SelfAttention(0.5, normalization="n"),
        af.SelfAttention(0.9, Q2, K2, normalization="n"),
        af.SelfAttention(1.2, V=V1, causal=True),
    ]
    field = af.MultiHeadAttention.from_heads(heads)
    assert field.causal == (True, False, False, True)
    assert field.normalization == ("softmax", "n", "n", "softmax")
    xn = np.asarray(x)
    parts = [
        _np_head(xn, 2.0, causal=True),
        _np_head(xn, 0.5, normalization="n"),
        _np_head(xn, 0.9, Q2, K2, normalization="n"),
        _np_head(xn, 1.2, V=V1, causal=True),
    ]
    want = sum(out for out, _ in parts)
    np.testing.assert_allclose(field.attention_output(x), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        field.attention_matrix(x), np.stack([a for _, a in parts]), rtol=1e-12, atol=1e-12
    )
    stacked = af.MultiHeadAttention(
        beta=[2.0, 0.5],
        normalization=["softmax", "n"],
        causal=[True, False],
        V=np.stack([np.eye(D), np.eye(D)]),
    )
    np.testing.assert_allclose(
        stacked.attention_output(x), parts[0][0] + parts[1][0], rtol=1e-12, atol=1e-12
    )


def test_deprecated_stacked_name_warns_and_agrees():
    Q = _rng.normal(size=(3, 2, D))
    V = _rng.normal(size=(3, D, D))
    x = af.random_tokens(jr.key(3), N, D)
    with pytest.warns(DeprecationWarning, match=r"attnflow\.MultiHeadAttention\(beta=beta"):
        old = af.StackedMultiHeadAttention(1.3, Q, Q[::-1], V, 0.5)
    assert isinstance(old, af.MultiHeadAttention)
    assert "StackedMultiHeadAttention" not in dir(af)
    new = af.MultiHeadAttention(beta=1.3, Q=Q, K=Q[::-1], V=V, scale=0.5)
    np.testing.assert_array_equal(old(0.0, x), new(0.0, x))


def test_from_heads_refuses_bad_heads_naming_the_argument():
    cases = [
        ([], "heads: expected at least one SelfAttention head"),
        (af.SelfAttention(1.0), "heads: expected a sequence of SelfAttention"),
        ([af.SelfAttention(1.0), 3.0], r"heads\[1\]: expected a SelfAttention"),
    ]
    for heads, message in cases:
        with pytest.raises(ValueError, match=message):
            af.MultiHeadAttention.from_heads(heads)


def test_deprecated_heads_call_forms_warn_and_agree():
    x = af.random_tokens(jr.key(6), N, D)
    new = af.MultiHeadAttention.from_heads(_heads(), scale=0.5, block_size=3)
    for old_call in (
        lambda: af.MultiHeadAttention(_heads(), scale=0.5, block_size=3),
        lambda: af.MultiHeadAttention(heads=_heads(), scale=0.5, block_size=3),
        lambda: af.MultiHeadAttention(iter(_heads()), scale=0.5, block_size=3),
    ):
        with pytest.warns(DeprecationWarning, match=r"MultiHeadAttention\.from_heads\(heads\)"):
            old = old_call()
        assert old.block_size == new.block_size == 3 and old.scale == new.scale == 0.5
        np.testing.assert_array_equal(old(0.0, x, None), new(0.0, x, None))
    with pytest.warns(DeprecationWarning):
        with pytest.raises(ValueError, match="heads: give either the heads or"):
            af.MultiHeadAttention(heads=_heads(), beta=1.0)
    with pytest.warns(DeprecationWarning):
        with pytest.raises(ValueError, match="heads: give either the heads or.*causal"):
            af.MultiHeadAttention(_heads(), causal=True)


def test_gradients_reach_the_stacked_q_k_v_and_an_array_beta():
    x = af.random_tokens(jr.key(4), N, D)
    target = af.random_tokens(jr.key(5), N, D)
    field = af.MultiHeadAttention.from_heads(
        [
            af.SelfAttention(jnp.asarray(0.7), Q2, K2, V1),
            af.SelfAttention(jnp.asarray(1.4), Q3, K3),
        ]
    )
    assert field.beta.shape == (2,)

    def loss(f):
        return jnp.sum((f(0.0, x, None) - target) ** 2)

    grads = eqx.filter_grad(loss)(field)
    for name in ("Q", "K", "V", "beta"):
        g = np.asarray(getattr(grads, name))
        assert g.shape == np.shape(getattr(field, name)) and np.all(np.isfinite(g))
        assert np.any(g != 0), name
    # Zero rows of padding (head 0 has k = 2 of 3) stay outside ⟨Q x, K y⟩: no gradient there.
    np.testing.assert_array_equal(np.asarray(grads.Q)[0, 2:], 0.0)
    # Against a finite difference of one entry.
    step = 1e-6
    bumped = eqx.tree_at(lambda f: f.Q, field, field.Q.at[1, 0, 0].add(step))
    fd = (loss(bumped) - loss(field)) / step
    assert float(grads.Q[1, 0, 0]) == pytest.approx(float(fd), rel=1e-4, abs=1e-6)


def test_jit_and_vmap_over_a_batch_of_stacked_fields():
    Q = jnp.asarray(_rng.normal(size=(5, 3, 2, D)))
    fields = eqx.filter_vmap(lambda q: af.MultiHeadAttention(beta=1.0, Q=q, K=q))(Q)
    x = af.random_tokens(jr.key(6), N, D)
    out = eqx.filter_jit(eqx.filter_vmap(lambda f: f(0.0, x, None)))(fields)
    one = af.MultiHeadAttention(beta=1.0, Q=Q[3], K=Q[3])(0.0, x, None)
    np.testing.assert_allclose(out[3], one, rtol=1e-12, atol=1e-12)
    assert fields.Q.shape == (5, 3, 2, D) and fields.beta == 1.0


def test_bad_construction_names_the_argument():
    Q = jnp.ones((2, 2, D))
    cases = [
        (dict(), "beta: expected β .* MultiHeadAttention.from_heads"),
        (dict(beta=1.0), "beta: expected one β per head when Q, K and V are all None"),
        (dict(beta=[1.0, 2.0, 3.0], Q=Q, K=Q), r"beta: expected a scalar or one β per head"),
        (dict(beta=[1.0, float("nan")], Q=Q, K=Q), r"beta\[1\]: expected a finite value"),
        (dict(beta=1.0, Q=Q, K=jnp.ones((2, 3, D))), "Q, K: expected the same shape"),
        (dict(beta=1.0, Q=Q), "K: is missing"),
        (dict(beta=1.0, Q=jnp.ones((2, D))), r"Q: expected a matrix of shape \(H, k, d\)"),
        (dict(beta=1.0, Q=Q, K=Q, normalization="max"), "normalization: expected 'softmax'"),
        (dict(beta=1.0, Q=Q, K=Q, causal=[True]), "causal: expected one value for every head"),
        (dict(beta=1.0, Q=Q, K=Q, causal="no"), "causal: expected a bool"),
        (dict(beta=1.0, Q=Q, K=Q, scale=jnp.ones(2)), "scale: expected a real scalar"),
        (dict(beta=1.0, Q=Q, K=Q, block_size=0), "block_size: expected None or a positive"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            af.MultiHeadAttention(**kwargs)
