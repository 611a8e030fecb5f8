"""Seven behaviours that hand-made bugs went through unnoticed (issue #34), each pinned against
an independent computation: a direct ``solve`` and a NumPy statistic, a gradient by another
adjoint, a NumPy attention field, a measure pushed onto its target.

Each test was checked by breaking the behaviour by hand in the code (the mutation named in its
docstring) and seeing it fail."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

RUNTIME_ERRORS = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)
DELTA = 1e-2


def _fraction(x, delta=DELTA):
    """ClusteredFraction by hand: ordered pairs i ≠ j with ⟨x_i, x_j⟩ ≥ 1 − δ, / n(n − 1)."""
    x = np.asarray(x, np.float64)
    G = x @ x.T
    n = x.shape[0]
    return (np.sum(G >= 1 - delta) - n) / (n * (n - 1))


def _direct_fractions(x0, field_of_beta, betas, ts):
    """(len(betas), len(ts), R): the statistic of a direct ``solve`` of each system."""
    out = np.zeros((len(betas), len(ts), x0.shape[0]))
    for b, beta in enumerate(betas):
        field = field_of_beta(jnp.asarray(beta))  # an array β: one compilation for all β
        for r in range(x0.shape[0]):
            ys = af.solve(field, x0[r], ts[-1], ts=ts, rtol=1e-10, atol=1e-12).ys
            out[b, :, r] = [_fraction(y) for y in ys]
    return out


# n = 5 tokens in d = 3, four systems, β where clustering is under way at t = 6.
X0 = np.asarray(af.random_tokens(jr.key(11), 4 * 5, 3)).reshape(4, 5, 3)
BETAS = np.array([1.0, 4.0])
TS = np.array([0.0, 2.0, 6.0])
TIGHT = dict(rtol=1e-10, atol=1e-12, progress=False)


def test_one_head_causal_family_runs_causal_attention():
    """Broken by routing a one-head causal FieldFamily to the fast (non-causal) engine
    (``family.plain`` without ``not self.causal``): P is then the non-causal one."""
    P = af.phase_diagram_from_tokens(
        X0, betas=BETAS, ts=TS, delta=DELTA, family=af.FieldFamily(causal=True), **TIGHT
    )
    causal = _direct_fractions(X0, lambda b: af.SelfAttention(b, causal=True), BETAS, TS)
    np.testing.assert_allclose(P, causal.mean(axis=-1), atol=1e-12)


def test_median_clustered_fraction_is_the_median():
    """Broken by routing ClusteredFraction(reduce="median") to the fast engine (which sums
    counts: the mean)."""
    statistic = af.ClusteredFraction(DELTA, reduce="median")
    P = af.phase_diagram_from_tokens(X0, betas=BETAS, ts=TS, statistic=statistic, **TIGHT)
    direct = _direct_fractions(X0, af.SelfAttention, BETAS, TS)
    np.testing.assert_allclose(P, np.median(direct, axis=-1), atol=1e-12)
    assert np.abs(np.median(direct, -1) - direct.mean(-1)).max() > 0.02  # median ≠ mean here


@pytest.mark.parametrize("extra", [0, 1])
def test_stored_step_adjoint_at_capacity_and_one_past_it(extra):
    """Exactly ``steps`` accepted steps (the stored path) and ``steps + 1`` (the first solve
    that must fall back to recomputation): the gradient equals the default adjoint's. Broken by
    ``num_stored > capacity + 1`` (or ``>=``) in the fallback test."""
    capacity = 6
    x0 = af.random_tokens(jr.key(3), 5, 3)
    V = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)))
    weights = jnp.asarray(np.random.default_rng(1).normal(size=(5, 3)))
    num_steps = capacity + extra

    def loss(V, adjoint):
        sol = af.solve(
            af.SelfAttention(2.0, V=V),
            x0,
            1.0,
            dt0=1.0 / num_steps,
            stepsize_controller=diffrax.ConstantStepSize(),
            adjoint=adjoint,
        )
        return jnp.sum(weights * sol.ys[-1]), sol.stats["num_accepted_steps"]

    (_, accepted), stored = jax.value_and_grad(loss, has_aux=True)(
        V, af.StoredStepAdjoint(steps=capacity)
    )
    assert int(accepted) == num_steps
    _, default = jax.value_and_grad(loss, has_aux=True)(V, None)
    np.testing.assert_allclose(stored, default, rtol=1e-12, atol=1e-14)


def test_check_delta_refuses_zero_eager_and_traced():
    """Broken by ``0 <= value`` (or ``delta >= 0`` under jit) in check_delta."""
    x = af.random_tokens(jr.key(0), 4, 3)
    with pytest.raises(ValueError, match="delta: expected a threshold 0 < delta < 2"):
        af.count_clusters(x, 0.0)
    with pytest.raises(RUNTIME_ERRORS, match="0 < delta < 2"):
        jax.block_until_ready(jax.jit(af.count_clusters)(x, jnp.asarray(0.0)))
    # The smallest positive δ is accepted, in both paths.
    assert int(af.count_clusters(x, 1e-12)) == 4
    assert int(jax.jit(af.count_clusters)(x, jnp.asarray(1e-12))) == 4


def test_traced_decreasing_save_times_of_a_backward_solve():
    """A backward solve (t1 < t0) with decreasing save times under jit: accepted, and equal to
    one solve per save time; increasing ones refused. Broken by checking traced save times as
    non-decreasing whatever the direction (``sign = 1``)."""
    field = af.SelfAttention(1.5)
    x1 = af.random_tokens(jr.key(5), 5, 3)
    ts = jnp.array([2.0, 1.2, 0.5, 0.0])
    run = jax.jit(lambda ts: af.solve(field, x1, 0.0, t0=2.0, ts=ts, rtol=1e-10, atol=1e-12).ys)
    ys = run(ts)
    for k, t in enumerate(np.asarray(ts)):
        one = af.solve(field, x1, float(t), t0=2.0, rtol=1e-10, atol=1e-12).ys[-1]
        np.testing.assert_allclose(ys[k], one, atol=1e-9)
    with pytest.raises(RUNTIME_ERRORS, match="monotone from t0 to t1"):
        jax.block_until_ready(run(ts[::-1]))


def test_negative_measure_weights_under_jit():
    """Weights of a measure under jit: negative ones refused (as eagerly), valid ones give the
    weighted attention of the formula (NumPy). Broken by dropping ``weights < 0`` from the
    traced check."""
    x = af.random_tokens(jr.key(8), 4, 3)
    beta = 2.0
    field = jax.jit(lambda w: af.SelfAttention(beta)(0.0, x, w))
    with pytest.raises(RUNTIME_ERRORS, match="non-negative weights"):
        jax.block_until_ready(field(jnp.array([0.5, -0.1, 0.3, 0.3])))
    w = np.array([0.1, 0.2, 0.3, 0.4])
    xn = np.asarray(x)
    logits = beta * xn @ xn.T
    a = w[None, :] * np.exp(logits)
    a /= a.sum(axis=1, keepdims=True)
    v = a @ xn
    expected = v - np.sum(v * xn, axis=1, keepdims=True) * xn  # projected on the tangent space
    np.testing.assert_allclose(field(jnp.asarray(w)), expected, atol=1e-12)


@pytest.mark.parametrize("step_time", [0.5, 2.0])
def test_transport_steering_speed_scales_with_the_step_time(step_time):
    """The steering pieces move an atom one step per piece whatever the piece's length: at a
    step time other than 1 the measures still land on their targets. Broken by dropping the
    ``/ step_time`` of the steering speed."""
    kx, ky = jr.split(jr.key(2))
    x = af.random_tokens(kx, 2, 3).reshape(1, 2, 3)
    y = af.random_tokens(ky, 2, 3).reshape(1, 2, 3)
    plan = af.models.interpolate_measures(x, y, step_time=step_time, disentangle_time=0.0)
    end = af.solve(plan.field, x[0], plan.t1, rtol=1e-9, atol=1e-11).ys[-1]
    target = jnp.take_along_axis(y[0], plan.assignment[0][:, None], axis=0)
    np.testing.assert_allclose(end, target, atol=1e-6)
