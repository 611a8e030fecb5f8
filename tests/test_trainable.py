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
    "MultiHead": lambda beta, Q, K, V: af.MultiHeadAttention.from_heads(
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


# --- Every class that stores a β, walked with the documented recipe (issue #34) -----------------

W = jnp.asarray(np.random.default_rng(5).normal(size=(6, 3)))
A = jnp.asarray(np.random.default_rng(6).normal(size=(3, 3)))
A = A + A.T + 6.0 * jnp.eye(3)  # symmetric positive definite (energies and the metric need it)


def _field_loss(field):
    # Two times: a PiecewiseConstant with a switch at 0.5 is read in both pieces.
    return sum(jnp.sum(W * field(t, X)) for t in (0.1, 0.7))


def _energy_loss(energy):
    return energy(X + 0.1 * W)


def _metric_loss(metric):
    return metric(X, W, W[::-1])


def _piecewise_attention(beta, Q, K, V):
    betas = beta if isinstance(beta, float) else jnp.stack([beta, beta + 1.0])
    betas = [beta, beta + 1.0] if isinstance(beta, float) else betas
    return af.PiecewiseConstant.from_attention(
        betas, Q=jnp.stack([Q, K]), K=jnp.stack([K, Q]), V=jnp.stack([V, V]), switch_times=[0.5]
    )


def _piecewise_shared(beta, Q, K, V):  # one β for all pieces
    return af.PiecewiseConstant.from_attention(
        beta, Q=jnp.stack([Q, K]), K=jnp.stack([K, Q]), V=jnp.stack([V, V]), switch_times=[0.5]
    )


def _piecewise_fields(beta, Q, K, V):
    return af.PiecewiseConstant.from_fields(
        [
            af.MultiHeadAttention.from_heads(
                [af.SelfAttention(beta, Q, K, V), af.SelfAttention(beta, K, Q)]
            )
        ]
        * 2,
        switch_times=[0.5],
    )


# name: (build(beta, Q, K, V), loss). Every public class of `attnflow` that takes a β must be here.
WALK = {
    "SelfAttention": (lambda b, Q, K, V: af.SelfAttention(b, Q, K, V), _field_loss),
    "MultiHeadAttention": (
        lambda b, Q, K, V: af.MultiHeadAttention(beta=b, Q=Q[None], K=K[None], V=V[None]),
        _field_loss,
    ),
    "PositionalAttention": (
        lambda b, Q, K, V: af.PositionalAttention(b, af.alibi_bias(6, 0.3), Q, K, V),
        _field_loss,
    ),
    "SinkhornAttention": (lambda b, Q, K, V: af.SinkhornAttention(b, Q, K, V), _field_loss),
    "CausalALiBiAttention": (lambda b, Q, K, V: af.CausalALiBiAttention(b, 0.3), _field_loss),
    "PureSelfAttention": (lambda b, Q, K, V: af.PureSelfAttention(b, Q, K, V), _field_loss),
    "RescaledSelfAttention": (
        lambda b, Q, K, V: af.RescaledSelfAttention(b, Q, K, V),
        _field_loss,
    ),
    "InteractionEnergy": (lambda b, Q, K, V: af.InteractionEnergy(b, A), _energy_loss),
    "SinkhornEnergy": (lambda b, Q, K, V: af.SinkhornEnergy(b, A), _energy_loss),
    "AttentionMetric": (lambda b, Q, K, V: af.AttentionMetric(b, A), _metric_loss),
    # Containers of a β-carrying field.
    "GradientFlow": (
        lambda b, Q, K, V: af.GradientFlow(af.InteractionEnergy(b, A), af.AttentionMetric(b, A)),
        _field_loss,
    ),
    "TransformerBlock": (
        lambda b, Q, K, V: af.TransformerBlock(
            af.SelfAttention(b, Q, K, V), af.FeedForward(Q, K, jnp.ones(3))
        ),
        _field_loss,
    ),
    "PiecewiseConstant.from_attention": (_piecewise_attention, _field_loss),
    "PiecewiseConstant.from_attention(shared)": (_piecewise_shared, _field_loss),
    "PiecewiseConstant.from_fields(multi-head)": (_piecewise_fields, _field_loss),
}


def _recipe_step(obj, loss):
    """The recipe of docs/conventions.md: partition on eqx.is_inexact_array, one optax step."""
    optimiser = optax.sgd(0.3)
    params, static = eqx.partition(obj, eqx.is_inexact_array)
    grads = eqx.filter_grad(lambda p: loss(eqx.combine(p, static)))(params)
    updates, _ = optimiser.update(grads, optimiser.init(params), params)
    return eqx.combine(optax.apply_updates(params, updates), static)


def _beta_values(obj):
    """Every β stored in obj, as floats (numbers, per-piece numbers and arrays alike)."""
    found = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(obj):
        if "beta" in jax.tree_util.keystr(path):
            found.append(leaf)
    # Per-piece numbers are static: read them from the attribute itself.
    for sub in jax.tree.leaves(obj, is_leaf=lambda x: type(x).__name__ == "_PerPiece"):
        if type(sub).__name__ == "_PerPiece":
            found.append(np.asarray(sub))
    return found


def test_every_public_class_with_a_beta_is_walked():
    import dataclasses
    import inspect

    takes_beta = set()
    for name in dir(af):
        cls = getattr(af, name, None)
        if inspect.isclass(cls) and issubclass(cls, eqx.Module) and not inspect.isabstract(cls):
            params = inspect.signature(cls).parameters
            fields = [f.name for f in dataclasses.fields(cls)]
            if "beta" in params or "beta" in fields:
                takes_beta.add(name)
    assert takes_beta, "no class found: the walk is broken"
    assert takes_beta <= {name.split(".")[0] for name in WALK}, takes_beta - set(WALK)


@pytest.mark.parametrize("name", sorted(WALK))
def test_recipe_freezes_a_number_beta_and_trains_an_array_beta(name):
    build, loss = WALK[name]
    matrices = _matrices(1)
    field = build(0.9, *matrices)
    stepped = _recipe_step(field, loss)
    before, after = _beta_values(field), _beta_values(stepped)
    assert before, f"{name}: no β found"
    trainable = [
        jax.tree_util.keystr(path)
        for path, leaf in jax.tree_util.tree_leaves_with_path(field)
        if "beta" in jax.tree_util.keystr(path) and eqx.is_inexact_array(leaf)
    ]
    assert not trainable, f"{name}: a number β became a trainable array leaf: {trainable}"
    for b0, b1 in zip(before, after, strict=True):
        np.testing.assert_array_equal(np.asarray(b1), np.asarray(b0))
    # Something did train (the recipe is not vacuous), unless the class has no other array.
    arrays = jax.tree.leaves(eqx.filter(field, eqx.is_inexact_array))
    moved = jax.tree.leaves(eqx.filter(stepped, eqx.is_inexact_array))
    assert any(not np.allclose(a, b) for a, b in zip(arrays, moved, strict=True)) or not arrays

    # β given as an array: a parameter, moved by the same step (d loss/dβ ≠ 0 here).
    array_field = build(jnp.asarray(0.9), *matrices)
    stepped = _recipe_step(array_field, loss)
    moved_betas = [
        not np.allclose(np.asarray(b0), np.asarray(b1))
        for b0, b1 in zip(_beta_values(array_field), _beta_values(stepped), strict=True)
    ]
    assert moved_betas and all(moved_betas), name


def test_switch_times_get_a_zero_gradient_through_solve():
    """The solver steps to each switch time (jump_ts); without stop_gradient their
    discretisation-error gradient is non-zero and Adam moves them by the learning rate per step
    (measured in the transport notebook: 1.5 → 2.26 in 30 steps)."""
    Q, K, V = _matrices(2)
    field = af.PiecewiseConstant.from_attention(
        0.9, Q=jnp.stack([Q, K]), K=jnp.stack([K, Q]), V=jnp.stack([V, V]), switch_times=[0.7]
    )

    def loss(f):
        return jnp.sum(W * af.solve(f, X, 1.5, rtol=1e-4, atol=1e-6).ys[-1])

    grads = eqx.filter_grad(loss)(field)
    assert float(jnp.abs(grads.switch_times).max()) == 0.0
    assert float(jnp.abs(grads.field.V).max()) > 0.0
