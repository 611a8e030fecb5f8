"""Which parameters are trained (docs/conventions.md): an optax step on an attention field
updates Q, K, V and leaves a β given as a number unchanged; β given as an array is trained."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest

import attnflow as af

X = af.random_tokens(jr.key(0), 6, 3)
TARGET = af.random_tokens(jr.key(1), 6, 3)


def _loss(field):
    return jnp.sum((af.layers(field, X, 3, 0.2)[-1] - TARGET) ** 2)


def _one_step(field):
    optimiser = optax.sgd(0.5)
    params, static = eqx.partition(field, eqx.is_inexact_array)
    state = optimiser.init(params)
    grads = eqx.filter_grad(lambda p: _loss(eqx.combine(p, static)))(params)
    updates, _ = optimiser.update(grads, state, params)
    return eqx.combine(optax.apply_updates(params, updates), static)


def _matrices(seed):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.normal(size=(3, 3))) for _ in range(3)]


FIELDS = {
    "SelfAttention": lambda beta, Q, K, V: af.SelfAttention(beta, Q, K, V),
    "USA": lambda beta, Q, K, V: af.SelfAttention(beta, Q, K, V, normalization="n"),
    "MultiHead": lambda beta, Q, K, V: af.MultiHeadAttention(
        [af.SelfAttention(beta, Q, K, V), af.SelfAttention(beta, K, Q, V)]
    ),
    "Stacked": lambda beta, Q, K, V: af.MultiHeadAttention(
        beta=beta, Q=Q[None], K=K[None], V=V[None], scale=0.5
    ),
    "Positional": lambda beta, Q, K, V: af.PositionalAttention(
        beta, af.alibi_bias(6, 0.3), Q, K, V
    ),
    "Sinkhorn": lambda beta, Q, K, V: af.SinkhornAttention(beta, Q, K, V),
}


def _betas(field):
    return [
        leaf
        for path, leaf in jax.tree_util.tree_leaves_with_path(field)
        if "beta" in jax.tree_util.keystr(path)
    ]


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_an_optax_step_trains_qkv_and_leaves_a_number_beta_unchanged(name):
    field = FIELDS[name](0.9, *_matrices(0))
    stepped = _one_step(field)
    assert _betas(stepped) == _betas(field) and all(isinstance(b, float) for b in _betas(field))
    changed = [
        not np.allclose(a, b)
        for a, b in zip(
            jax.tree.leaves(eqx.filter(field, eqx.is_inexact_array)),
            jax.tree.leaves(eqx.filter(stepped, eqx.is_inexact_array)),
            strict=True,
        )
    ]
    assert changed and all(changed)  # every array (Q, K, V) moved


def test_beta_given_as_an_array_is_trained_and_differentiable():
    field = af.SelfAttention(jnp.asarray(0.9), *_matrices(0))
    stepped = _one_step(field)
    assert not np.isclose(float(stepped.beta), 0.9)
    grad = eqx.filter_grad(_loss)(field).beta
    step = 1e-6
    fd = (
        _loss(af.SelfAttention(0.9 + step, *_matrices(0)))
        - _loss(af.SelfAttention(0.9 - step, *_matrices(0)))
    ) / (2 * step)
    np.testing.assert_allclose(float(grad), float(fd), rtol=1e-6)
    # jax.grad with respect to a traced β works whatever the default
    by_jax = jax.grad(lambda b: _loss(af.SelfAttention(b, *_matrices(0))))(0.9)
    np.testing.assert_allclose(float(by_jax), float(fd), rtol=1e-6)


def test_piecewise_stack_of_number_betas_keeps_one_beta_per_piece():
    f = af.PiecewiseConstant.from_fields(
        [af.SelfAttention(1.0), af.SelfAttention(4.0)], switch_times=[0.5]
    )
    np.testing.assert_array_equal(f.field.beta, [1.0, 4.0])
