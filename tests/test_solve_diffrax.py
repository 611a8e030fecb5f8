"""``solve`` passes diffrax's saveat / event / progress_meter / dense output through: each is
checked against ``diffrax.diffeqsolve`` called directly on the same ODE (the field read at y/|y|),
and the event time against a root of the clustering condition found by scipy on dense output."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy.optimize import brentq

import attnflow as af

RTOL, ATOL = 1e-8, 1e-10


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _unit(y):
    return y / jnp.linalg.norm(y, axis=-1, keepdims=True)


def _direct(field, x0, t1, saveat, event=None):
    """diffeqsolve on ẏ = field(t, y/|y|): the ODE solve documents, written out here."""
    return diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, args: field(t, _unit(y), args)),
        diffrax.Tsit5(),
        t0=0.0,
        t1=t1,
        dt0=None,
        y0=x0,
        saveat=saveat,
        stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
        event=event,
        max_steps=4096,
    )


def _problem():
    x0 = af.random_tokens(jr.key(3), 6, 3, dtype=jnp.float64)
    return af.SelfAttention(2.0), x0


def test_saveat_matches_diffrax_and_stays_on_sphere():
    field, x0 = _problem()
    ts = jnp.linspace(0.0, 3.0, 7)

    def stats(t, x, args):
        return jnp.mean(x @ x.T), jnp.linalg.norm(x, axis=-1)

    subs = [
        diffrax.SubSaveAt(t0=True, ts=ts),
        diffrax.SubSaveAt(steps=True, fn=stats),
    ]
    ours = af.solve(field, x0, 3.0, rtol=RTOL, atol=ATOL, saveat=diffrax.SaveAt(subs=subs))
    unit_subs = [
        diffrax.SubSaveAt(t0=True, ts=ts, fn=lambda t, y, a: _unit(y)),
        diffrax.SubSaveAt(steps=True, fn=lambda t, y, a: stats(t, _unit(y), a)),
    ]
    ref = _direct(field, x0, 3.0, diffrax.SaveAt(subs=unit_subs))
    (ys_ours, (mean_ours, norms_ours)), (ys_ref, (mean_ref, _)) = ours.ys, ref.ys
    assert ys_ours.shape == (1 + len(ts), 6, 3)
    np.testing.assert_allclose(ys_ours, ys_ref, atol=1e-13)
    np.testing.assert_allclose(ours.ts[0], ref.ts[0])
    steps = int(ours.stats["num_accepted_steps"])
    assert steps == int(ref.stats["num_accepted_steps"])
    np.testing.assert_allclose(mean_ours[:steps], mean_ref[:steps], atol=1e-13)
    # The user's fn saw unit tokens: the norms it saved are 1 to rounding.
    np.testing.assert_allclose(norms_ours[:steps], 1.0, atol=1e-14)
    np.testing.assert_allclose(jnp.linalg.norm(ys_ours, axis=-1), 1.0, atol=1e-14)


def test_dense_output_on_sphere_and_its_derivative():
    field, x0 = _problem()
    sol = af.solve(field, x0, 3.0, rtol=RTOL, atol=ATOL, saveat=diffrax.SaveAt(dense=True))
    ref = _direct(field, x0, 3.0, diffrax.SaveAt(dense=True))
    ts = jnp.array([0.0, 0.37, 1.5, 2.99])
    x = jax.vmap(sol.evaluate)(ts)
    np.testing.assert_allclose(x, _unit(jax.vmap(ref.evaluate)(ts)), atol=1e-14)
    np.testing.assert_allclose(jnp.linalg.norm(x, axis=-1), 1.0, atol=1e-14)
    # The dense output is the flow: it agrees with a solve saved at ts, and its derivative with
    # the field there (to interpolation accuracy) and with central differences of x.
    at_ts = af.solve(field, x0, 3.0, ts=ts, rtol=RTOL, atol=ATOL).ys
    np.testing.assert_allclose(x, at_ts, atol=1e-6)
    derivative = jax.vmap(sol.derivative)(ts)
    np.testing.assert_allclose(derivative, jax.vmap(field, (0, 0, None))(ts, x, None), atol=1e-5)
    # Times as arrays: evaluate is jitted, and each Python-float time would compile it again.
    h, t, half, one = 1e-5, *(jnp.asarray(s) for s in (1.2, 0.5, 1.0))
    central = (sol.evaluate(t + h) - sol.evaluate(t - h)) / (2 * h)
    np.testing.assert_allclose(sol.derivative(t), central, atol=1e-7)
    np.testing.assert_allclose(sol.evaluate(half, one), sol.evaluate(one) - sol.evaluate(half))


def test_clustered_event_stops_at_the_first_crossing():
    field, x0 = _problem()
    delta = 1e-2
    sol = af.solve(field, x0, 50.0, rtol=RTOL, atol=ATOL, event=af.clustered_event(delta))
    assert sol.result == diffrax.RESULTS.event_occurred
    t_event = float(sol.ts[-1])

    # Independent: the first root of min_ij <x_i, x_j> - (1 - delta) on a dense solve without
    # the event, located by scipy's brentq after a scan on a grid.
    dense = af.solve(field, x0, 50.0, rtol=RTOL, atol=ATOL, saveat=diffrax.SaveAt(dense=True))

    @jax.jit
    @jax.vmap
    def conditions(t):
        x = dense.evaluate(t)
        return jnp.min(x @ x.T) - (1 - delta)

    def condition(t):
        return float(conditions(jnp.full(1, t))[0])

    grid = np.linspace(0.0, 50.0, 2001)
    values = np.asarray(conditions(jnp.asarray(grid)))
    first = int(np.argmax(values >= 0))
    assert values[0] < 0 and first > 0
    t_root = brentq(condition, grid[first - 1], grid[first], xtol=1e-12)
    assert abs(t_event - t_root) < 1e-5
    x = sol.ys[-1]
    assert float(jnp.min(x @ x.T)) == pytest.approx(1 - delta, abs=1e-8)
    # The same event handed to diffrax directly stops at the same time.
    ref = _direct(field, x0, 50.0, diffrax.SaveAt(t1=True), event=af.clustered_event(delta))
    np.testing.assert_allclose(t_event, ref.ts[-1], rtol=1e-12)


def test_clustered_event_under_jit_and_vmap():
    field, _ = _problem()
    x0s = jax.vmap(lambda k: af.random_tokens(k, 6, 3, dtype=jnp.float64))(jr.split(jr.key(0), 3))

    @jax.jit
    @jax.vmap
    def stop_time(x0):
        sol = af.solve(field, x0, 50.0, event=af.clustered_event(1e-2), throw=False)
        return sol.ts[-1], sol.result == diffrax.RESULTS.event_occurred

    times, fired = stop_time(x0s)
    assert bool(jnp.all(fired))
    for x0, t in zip(x0s, times, strict=True):
        alone = af.solve(field, x0, 50.0, event=af.clustered_event(1e-2))
        np.testing.assert_allclose(t, alone.ts[-1], rtol=1e-10)


def test_progress_meter_passes_through(capsys):
    field, x0 = _problem()
    af.solve(field, x0, 1.0, progress_meter=diffrax.TextProgressMeter(minimum_increase=0.5))
    jax.effects_barrier()
    out = capsys.readouterr().out
    assert "100.00%" in out


def test_bad_saveat_and_event_are_named():
    field, x0 = _problem()
    with pytest.raises(ValueError, match="saveat, ts"):
        af.solve(field, x0, 1.0, ts=[0.0, 1.0], saveat=diffrax.SaveAt(t1=True))
    with pytest.raises(ValueError, match="saveat: expected an instance of diffrax.SaveAt"):
        af.solve(field, x0, 1.0, saveat=[0.0, 1.0])
    with pytest.raises(ValueError, match="event: expected an instance of diffrax.Event"):
        af.solve(field, x0, 1.0, event=lambda t, y, args: False)
    with pytest.raises(ValueError, match="delta"):
        af.clustered_event(-1.0)
    with pytest.raises(ValueError, match="ts"):
        af.solve(field, x0, 1.0, saveat=diffrax.SaveAt(ts=[0.5, 2.0]))


def test_filter_jit_gradient_compiles_once_and_matches_unjitted():
    field, x0 = _problem()
    traces = []

    def loss(field, x0):
        traces.append(None)
        return jnp.sum(af.solve(field, x0, 1.0, rtol=RTOL, atol=ATOL).ys[-1][:, 0])

    # beta as an array is a trainable leaf, so a new value reuses the compiled gradient
    # (a Python float beta is a static hyperparameter: a new value would retrace).
    field = af.SelfAttention(jnp.asarray(2.0))
    jitted = eqx.filter_jit(eqx.filter_grad(loss))
    g1 = jitted(field, x0)
    g2 = jitted(af.SelfAttention(jnp.asarray(2.5)), x0)
    assert len(traces) == 1  # the second call reused the compiled gradient
    plain = eqx.filter_grad(loss)(field, x0)
    np.testing.assert_allclose(g1.beta, plain.beta, rtol=1e-12)
    assert not np.allclose(g1.beta, g2.beta)
