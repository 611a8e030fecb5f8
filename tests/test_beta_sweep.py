"""The β sweep of docs/api/solve.md: a Python-float β is static under eqx.filter_jit (a new value
traces again), an array β is traced (one trace for every value), and vmap over an array of β is
one trace whose values are those of separate solves."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af

X0 = af.random_tokens(jr.key(0), 4, 3)


def _counting():
    traces = []

    @eqx.filter_jit
    def value(field):
        traces.append(1)  # runs once per trace
        return jnp.sum(af.solve(field, X0, 1.0, rtol=1e-8, atol=1e-10).ys[-1][:, 0])

    return value, traces


def test_a_number_beta_traces_at_each_value_an_array_beta_once():
    value, traces = _counting()
    value(af.SelfAttention(1.0))
    value(af.SelfAttention(2.0))
    assert len(traces) == 2  # the documented cost of a Python-float β
    value, traces = _counting()
    a = value(af.SelfAttention(jnp.asarray(1.0)))
    b = value(af.SelfAttention(jnp.asarray(2.0)))
    assert len(traces) == 1
    assert float(a) != float(b)


def test_vmap_over_beta_is_one_trace_and_equals_separate_solves():
    traces = []

    def loss(b):
        traces.append(1)
        return jnp.sum(af.solve(af.SelfAttention(b), X0, 1.0, rtol=1e-8, atol=1e-10).ys[-1][:, 0])

    betas = jnp.array([0.5, 2.0, 4.0])
    values = eqx.filter_jit(jax.vmap(loss))(betas)
    assert len(traces) == 1
    single = eqx.filter_jit(loss)  # one system at a time (one more trace, for all three)
    for b, v in zip(betas, values, strict=True):
        np.testing.assert_allclose(v, single(b), rtol=1e-7)
