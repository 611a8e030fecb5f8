"""StoredStepAdjoint: the default adjoint's gradient (rejected steps skipped, accepted steps
stored), checked against diffrax's RecursiveCheckpointAdjoint and central differences; its
memory budget, and the cases it refuses."""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

N, D, T1 = 24, 6, 5.0


def _problem(dtype, seed=0):
    keys = jr.split(jr.key(seed), 5)
    scale = 1 / np.sqrt(D)
    params = {
        name: (jnp.eye(D) + scale * jr.normal(k, (D, D))).astype(dtype)
        for name, k in zip("QKV", keys[:3], strict=True)
    }
    x0 = af.random_tokens(keys[3], N, D, dtype=dtype)
    target = jr.normal(keys[4], (1, N, D), dtype=dtype)  # broadcast over the saved times
    return params, x0, target


def _loss(target, adjoint, **solve_kwargs):
    def loss(params, x0):
        field = af.SelfAttention(jnp.asarray(2.0, x0.dtype), params["Q"], params["K"], params["V"])
        sol = af.solve(field, x0, T1, adjoint=adjoint, **solve_kwargs)
        return jnp.sum(target * sol.ys), sol.stats

    return loss


def _gradients(target, adjoint, params, x0, **solve_kwargs):
    grad = eqx.filter_jit(jax.grad(_loss(target, adjoint, **solve_kwargs), (0, 1), has_aux=True))
    return grad(params, x0)


# One default-adjoint reference per dtype (problem seed 0, the tolerances of the rejected-steps
# test below): the rejected-steps test and the checkpointing fall-back test compare against it,
# so its program compiles and runs once.
DEFAULT_TOLERANCES = {
    jnp.float64: {"rtol": 1e-6, "atol": 1e-9},
    jnp.float32: {"rtol": 1e-5, "atol": 1e-6},
}


@functools.cache
def _default_reference(dtype):
    """The default adjoint's gradient (diffrax's RecursiveCheckpointAdjoint) and its stats."""
    params, x0, target = _problem(dtype)
    return _gradients(target, None, params, x0, **DEFAULT_TOLERANCES[dtype])


def _assert_trees_close(a, b, rtol):
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=rtol * 1e-3)


@pytest.mark.parametrize(
    "dtype, rtol, atol, agreement",
    [(jnp.float64, 1e-6, 1e-9, 1e-12), (jnp.float32, 1e-5, 1e-6, 1e-5)],
)
def test_gradient_equals_the_default_adjoint_with_rejected_steps(dtype, rtol, atol, agreement):
    params, x0, target = _problem(dtype)
    tolerances = {"rtol": rtol, "atol": atol}
    assert tolerances == DEFAULT_TOLERANCES[dtype]
    expected, stats = _default_reference(dtype)
    got, stats_stored = _gradients(target, af.StoredStepAdjoint(), params, x0, **tolerances)
    # The comparison must cover the skipped steps: the solve rejects some.
    assert int(stats["num_rejected_steps"]) > 0
    assert int(stats_stored["num_accepted_steps"]) == int(stats["num_accepted_steps"])
    _assert_trees_close(got, expected, agreement)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(got))


def test_gradient_matches_central_differences():
    params, x0, target = _problem(jnp.float64, seed=1)
    tolerances = {"rtol": 1e-11, "atol": 1e-13}
    loss = _loss(target, af.StoredStepAdjoint(), **tolerances)
    (grad_params, grad_x0), _ = _gradients(target, af.StoredStepAdjoint(), params, x0, **tolerances)
    directions = jax.tree.map(lambda p: jr.normal(jr.key(7), p.shape), params)
    eps = 1e-5
    plus = jax.tree.map(lambda p, v: p + eps * v, params, directions)
    minus = jax.tree.map(lambda p, v: p - eps * v, params, directions)
    central = (loss(plus, x0)[0] - loss(minus, x0)[0]) / (2 * eps)
    predicted = sum(
        jnp.vdot(g, v)
        for g, v in zip(jax.tree.leaves(grad_params), jax.tree.leaves(directions), strict=True)
    )
    np.testing.assert_allclose(float(predicted), float(central), rtol=1e-6)
    # In x0, along a tangent direction (the flow reads x0 / |x0|).
    v = af.project_tangent(x0, jr.normal(jr.key(8), x0.shape))
    central_x = (loss(params, x0 + eps * v)[0] - loss(params, x0 - eps * v)[0]) / (2 * eps)
    np.testing.assert_allclose(float(jnp.vdot(grad_x0, v)), float(central_x), rtol=1e-6)


def test_saved_times_and_a_piecewise_field_with_jumps():
    params, x0, target = _problem(jnp.float64)
    ts = jnp.linspace(0.5, T1, 4)
    expected, _ = _gradients(target, None, params, x0, ts=ts, rtol=1e-7, atol=1e-9)
    got, _ = _gradients(target, af.StoredStepAdjoint(), params, x0, ts=ts, rtol=1e-7, atol=1e-9)
    _assert_trees_close(got, expected, 1e-12)

    # Steps clipped at the switching times (ClipStepSizeController), one field per piece.
    def loss(Q, adjoint):
        field = af.PiecewiseConstant.from_attention(1.0, jnp.stack([Q, Q.T]), switch_times=(1.0,))
        return jnp.sum(target * af.solve(field, x0, 2.0, adjoint=adjoint, rtol=1e-8).ys)

    Q = params["Q"]
    np.testing.assert_allclose(
        jax.grad(loss)(Q, af.StoredStepAdjoint()), jax.grad(loss)(Q, None), rtol=1e-11, atol=1e-14
    )


def test_multi_head_field_and_an_off_sphere_scheme():
    """Any field and any solve path: stacked heads (gradient in every head's Q, K, V) and the
    pre-LN residual stream in R^{n×d} (solve's off-sphere branch)."""
    params, x0, target = _problem(jnp.float64)
    keys = jr.split(jr.key(4), 3)
    heads = {name: 0.5 * jr.normal(k, (2, D, D)) for name, k in zip("QKV", keys, strict=True)}

    def loss(heads, adjoint):
        field = af.MultiHeadAttention(beta=jnp.array([1.0, 3.0]), **heads)
        return jnp.sum(target * af.solve(field, x0, 2.0, adjoint=adjoint, rtol=1e-8).ys)

    expected = jax.grad(loss)(heads, None)
    _assert_trees_close(jax.grad(loss)(heads, af.StoredStepAdjoint()), expected, 1e-11)

    def scheme_loss(V, adjoint):
        sublayer = af.SelfAttention(1.0, V=V)
        sol = af.PreLN().solve(sublayer, x0, 2.0, adjoint=adjoint, rtol=1e-8)
        return jnp.sum(target * sol.ys)

    V = params["V"]
    np.testing.assert_allclose(
        jax.grad(scheme_loss)(V, af.StoredStepAdjoint()),
        jax.grad(scheme_loss)(V, None),
        rtol=1e-11,
        atol=1e-14,
    )


def test_values_without_differentiation_are_the_default_solves():
    params, x0, _ = _problem(jnp.float64)
    field = af.SelfAttention(2.0, params["Q"], params["K"], params["V"])
    plain = af.solve(field, x0, T1)
    stored = af.solve(field, x0, T1, adjoint=af.StoredStepAdjoint())
    np.testing.assert_array_equal(stored.ys, plain.ys)
    assert int(stored.stats["num_steps"]) == int(plain.stats["num_steps"])


def test_more_accepted_steps_than_slots_fall_back_to_checkpointing():
    params, x0, target = _problem(jnp.float64)
    tolerances = DEFAULT_TOLERANCES[jnp.float64]  # the reference of the rejected-steps test
    expected, stats = _default_reference(jnp.float64)
    assert int(stats["num_accepted_steps"]) > 3
    # By the step count and by the byte cap (a step's linearisation is tens of kB here).
    for adjoint in (af.StoredStepAdjoint(steps=3), af.StoredStepAdjoint(max_memory=100_000)):
        got, _ = _gradients(target, adjoint, params, x0, **tolerances)
        _assert_trees_close(got, expected, 1e-12)


def test_memory_follows_the_slots_not_max_steps():
    params, x0, target = _problem(jnp.float32)

    def program_bytes(adjoint, max_steps=4096):
        loss = _loss(target, adjoint, max_steps=max_steps)
        grad = jax.jit(jax.grad(lambda p, x: loss(p, x)[0], (0, 1)))
        return grad.lower(params, x0).compile().memory_analysis().temp_size_in_bytes

    few, many = (
        program_bytes(af.StoredStepAdjoint(steps=8)),
        program_bytes(af.StoredStepAdjoint(steps=512)),
    )
    assert many > 8 * few
    # The byte cap and the step cap bound the slots too.
    assert program_bytes(af.StoredStepAdjoint(steps=512, max_memory=2**20)) < 2**20 + 2**18
    assert program_bytes(af.StoredStepAdjoint(steps=512), max_steps=8) < 2 * few


def test_refused_uses_name_what_to_do():
    params, x0, target = _problem(jnp.float64)
    field = af.SelfAttention(2.0)
    with pytest.raises(ValueError, match="adjoint: StoredStepAdjoint does not support an event"):
        af.solve(field, x0, 50.0, adjoint=af.StoredStepAdjoint(), event=af.clustered_event(1e-2))
    with pytest.raises(Exception, match="t1"):
        jax.grad(lambda t: jnp.sum(af.solve(field, x0, t, adjoint=af.StoredStepAdjoint()).ys))(
            jnp.asarray(1.0)
        )
    for bad in (0, -5, 2.5, "1GB", True):
        with pytest.raises((TypeError, ValueError), match="max_memory"):
            af.StoredStepAdjoint(max_memory=bad)
        with pytest.raises((TypeError, ValueError), match="steps"):
            af.StoredStepAdjoint(steps=bad)
    assert isinstance(af.StoredStepAdjoint(), diffrax.AbstractAdjoint)


def test_batches_of_solves_values_yes_gradients_refused_by_name():
    x0s = af.random_tokens(jr.key(3), 8, 3, (2,))
    betas = jnp.array([0.5, 3.0])

    def final(beta, x0, adjoint):
        return af.solve(af.SelfAttention(beta), x0, 2.0, adjoint=adjoint, throw=False).ys[-1]

    values = jax.vmap(final, in_axes=(0, 0, None))(betas, x0s, af.StoredStepAdjoint())
    np.testing.assert_array_equal(values, jax.vmap(final, in_axes=(0, 0, None))(betas, x0s, None))
    loss = lambda beta, x0: jnp.sum(final(beta, x0, af.StoredStepAdjoint())[0])
    with pytest.raises(ValueError, match="StoredStepAdjoint cannot differentiate a solve under"):
        jax.vmap(jax.grad(loss))(betas, x0s)
