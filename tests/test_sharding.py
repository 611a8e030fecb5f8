"""Sharded solves equal single-device solves (conftest gives 4 host CPU devices)."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import attnflow as af


def _mesh(devices: int) -> Mesh:
    assert len(jax.devices()) >= devices, "conftest sets jax_num_cpu_devices = 4"
    return Mesh(np.asarray(jax.devices()[:devices]), ("devices",))


# Both ensemble tests share one shape (6 members, 5 tokens in R^3, per-member weights, the same
# save times), so one compiled vmap(solve) serves as the reference for both.
MEMBERS, TS = 6, jnp.array([0.5, 2.0])


@eqx.filter_jit
def _vmapped_reference(fields, x0, weights):
    """The unsharded result: plain vmap of attnflow.solve over members (fields batched)."""
    return eqx.filter_vmap(lambda f, x, w: af.solve(f, x, TS[-1], ts=TS, args=w).ys)(
        fields, x0, weights
    )


def _ensemble(seed):
    k = jr.split(jr.key(seed))
    x0 = af.random_tokens(k[0], 5, 3, batch_shape=(MEMBERS,))
    return x0, jr.uniform(k[1], (MEMBERS, 5), minval=0.2, maxval=1.0)


def test_sharded_ensemble_shared_field_two_devices():
    x0, weights = _ensemble(0)
    field = af.SelfAttention(2.0)
    sol = af.sharded_ensemble_solve(field, x0, TS[-1], ts=TS, args=weights, mesh=_mesh(2))
    ref = _vmapped_reference(eqx.filter_vmap(af.SelfAttention)(jnp.full(MEMBERS, 2.0)), x0, weights)
    assert sol.ys.shape == (MEMBERS, 2, 5, 3)
    assert sol.ys.sharding.num_devices == 2
    np.testing.assert_allclose(sol.ys, ref, rtol=0, atol=1e-12)
    assert bool(jnp.all(sol.result == diffrax.RESULTS.successful))


def test_sharded_ensemble_batched_field_and_weights_four_devices():
    """Six members (not a multiple of 4: padded), one β and one weight vector per member."""
    x0, weights = _ensemble(1)
    fields = eqx.filter_vmap(af.SelfAttention)(jnp.array([0.5, 1.0, 2.0, 3.0, 4.0, 5.0]))
    sol = af.sharded_ensemble_solve(
        fields, x0, TS[-1], ts=TS, args=weights, batched_field=True, mesh=_mesh(4)
    )
    assert sol.ys.shape == (MEMBERS, 2, 5, 3)
    np.testing.assert_allclose(sol.ys, _vmapped_reference(fields, x0, weights), rtol=0, atol=1e-12)


def test_sharded_single_system_two_devices():
    """Rectangular Q, K, a value matrix and weights; 9 tokens on 2 devices (one padding token).

    (This is also the field contract's "SA-QKV" case of the test of every attention field
    below.) β is an array, as in the parameter sweep of the reuse test, which then compiles
    nothing new."""
    k = jr.split(jr.key(3), 5)
    x0 = af.random_tokens(k[0], 9, 4)
    Q, K = jr.normal(k[1], (2, 4)) / 2, jr.normal(k[2], (2, 4)) / 2
    V = jnp.eye(4) + 0.3 * jr.normal(k[3], (4, 4))
    w = jr.uniform(k[4], (9,), minval=0.2, maxval=1.0)
    field = af.SelfAttention(jnp.asarray(1.5, x0.dtype), Q, K, V)  # not weakly typed
    ts = jnp.array([0.5, 2.0])
    sol = af.sharded_solve(field, x0, 2.0, ts=ts, args=w, mesh=_mesh(2))
    ref = af.solve(field, x0, 2.0, ts=ts, args=w)
    assert sol.ys.shape == (2, 9, 4)
    np.testing.assert_allclose(sol.ys, ref.ys, rtol=0, atol=1e-12)
    assert int(sol.stats["num_steps"]) == int(ref.stats["num_steps"])


def test_sharded_single_system_four_devices_multihead_causal():
    """A causal SA head plus a USA head, block_size 2; 10 tokens on 4 devices (two padding)."""
    x0 = af.random_tokens(jr.key(4), 10, 3)
    field = af.MultiHeadAttention.from_heads(
        [af.SelfAttention(2.0, causal=True, block_size=2), af.SelfAttention(0.5, normalization="n")]
    )
    sol = af.sharded_solve(field, x0, 3.0, mesh=_mesh(4))
    ref = af.solve(field, x0, 3.0)
    np.testing.assert_allclose(sol.ys, ref.ys, rtol=0, atol=1e-12)
    assert int(sol.stats["num_steps"]) == int(ref.stats["num_steps"])
    assert float(jnp.max(jnp.abs(ref.ys[0] - x0))) > 0.05  # the tokens did move


def test_named_sharding_jit_for_any_field():
    """The docs' recipe for fields without a sharded path: jit(solve) on a sharded x0."""
    x0 = af.random_tokens(jr.key(5), 8, 3)
    field = af.GradientFlow(af.InteractionEnergy(1.0), af.AttentionMetric(1.0))
    solve = jax.jit(lambda x: af.solve(field, x, 1.0).ys)
    sharded = jax.device_put(x0, NamedSharding(_mesh(4), P("devices")))
    np.testing.assert_allclose(solve(sharded), solve(x0), rtol=0, atol=1e-12)


def test_bad_inputs():
    x0 = af.random_tokens(jr.key(6), 4, 3)
    with pytest.raises(ValueError, match="sharded_solve splits the particles of an attention"):
        af.sharded_solve(
            af.GradientFlow(af.InteractionEnergy(1.0), af.WassersteinMetric()), x0, 1.0
        )
    with pytest.raises(ValueError, match="stepsize_controller: sharded_solve builds its own"):
        af.sharded_solve(af.SelfAttention(1.0), x0, 1.0, stepsize_controller=None)
    with pytest.raises(ValueError, match=r"x0: expected an ensemble of shape \(batch, n, d\)"):
        af.sharded_ensemble_solve(af.SelfAttention(1.0), x0, 1.0)
    mesh2d = Mesh(np.asarray(jax.devices()[:4]).reshape(2, 2), ("a", "b"))
    with pytest.raises(ValueError, match="mesh: expected a one-axis"):
        af.sharded_solve(af.SelfAttention(1.0), x0, 1.0, mesh=mesh2d)


def _compilations(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)``; return its result and the names of the XLA compilations it
    triggered."""
    names = []

    def listener(event, duration_secs, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            names.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        result = jax.block_until_ready(fn(*args, **kwargs))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return result, names


def test_repeated_calls_reuse_the_compiled_program():
    """A parameter sweep compiles once: new x0, β, Q, K, V, weights and t1 only change inputs.

    Each sharded call runs twice with the same shapes and settings but new values; the second
    run must compile nothing (before the fix every call compiled its shard_map afresh). The
    ensembles have the shapes of the four-device ensemble test and the single systems those of
    the two-device test above."""
    mesh = _mesh(4)
    for seed, betas, t1 in (
        (1, [0.5, 1.0, 2.0, 3.0, 4.0, 5.0], 2.5),
        (2, [6, 0.1, 1.5, 2.5, 0, 3.5], 2.0),
    ):
        x0, weights = _ensemble(seed)
        fields = eqx.filter_vmap(af.SelfAttention)(jnp.asarray(betas, float))
        sol, compiled = _compilations(
            af.sharded_ensemble_solve,
            fields,
            x0,
            t1,
            ts=TS,
            args=weights,
            batched_field=True,
            mesh=mesh,
        )
    assert compiled == []
    np.testing.assert_allclose(sol.ys, _vmapped_reference(fields, x0, weights), rtol=0, atol=1e-12)

    for seed, t1 in ((3, 2.0), (7, 1.5)):
        k = jr.split(jr.key(seed), 6)
        x0 = af.random_tokens(k[0], 9, 4)
        Q, K = jr.normal(k[1], (2, 4)) / 2, jr.normal(k[2], (2, 4)) / 2
        V = jnp.eye(4) + 0.3 * jr.normal(k[3], (4, 4))
        w = jr.uniform(k[4], (9,), minval=0.2, maxval=1.0)
        field = af.SelfAttention(jr.uniform(k[5], minval=0.5, maxval=2.0), Q, K, V)
        ts = jnp.array([0.5, t1])
        sol, compiled = _compilations(af.sharded_solve, field, x0, t1, ts=ts, args=w, mesh=_mesh(2))
    assert compiled == []
    np.testing.assert_allclose(
        sol.ys, af.solve(field, x0, t1, ts=ts, args=w).ys, rtol=0, atol=1e-12
    )


def _attention_cases():
    """The field contract's attention fields, but "SA-QKV" (a SelfAttention with Q, K and V
    arrays): test_sharded_single_system_two_devices runs that field (rectangular Q, K, weights,
    a padding token on 2 devices) through the same code path."""
    from test_field_contract import CASES

    return {name: case[0] for name, case in CASES.items() if case[2] and name != "SA-QKV"}


@pytest.mark.parametrize("name", sorted(_attention_cases()))
def test_sharded_solve_runs_every_attention_field(name):
    """Every public attention field (the field contract's cases): sharded over 2 devices with
    7 tokens (one padding token) and non-uniform weights equals the single-device solve."""
    field = _attention_cases()[name]()
    assert isinstance(field, af.AbstractAttention)
    x0 = af.random_tokens(jr.key(11), 7, 3)
    w = jnp.linspace(0.5, 1.5, 7)
    ts = jnp.array([0.1, 0.4])
    sol = af.sharded_solve(field, x0, 0.4, ts=ts, args=w, mesh=_mesh(2))
    ref = af.solve(field, x0, 0.4, ts=ts, args=w)
    np.testing.assert_allclose(sol.ys, ref.ys, rtol=0, atol=1e-12)
    assert int(sol.stats["num_steps"]) == int(ref.stats["num_steps"])
    assert float(jnp.max(jnp.abs(ref.ys[-1] - x0))) > 1e-3  # the tokens did move
