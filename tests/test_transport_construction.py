"""models.interpolate_measures: the constructed parameters, pushed through ``solve``, land every
input measure on its target (W2 by brute-force assignment), with the stated switch count."""

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

import attnflow as af
from attnflow.models._transport import _cap_time_per_speed

N, n, d = 2, 4, 3


def w2(p, q):
    """W2 between two uniform empirical measures of equal size, by optimal assignment."""
    p, q = np.asarray(p), np.asarray(q)
    cost = np.sum((p[:, None] - q[None]) ** 2, axis=-1)
    rows, cols = scipy.optimize.linear_sum_assignment(cost)
    return float(np.sqrt(cost[rows, cols].mean()))


def push(field, x, ts):
    return np.stack(
        [np.asarray(af.solve(field, xi, ts[-1], ts=ts, rtol=1e-9, atol=1e-11).ys) for xi in x]
    )


@pytest.fixture(scope="module")
def case():
    kx, ky = jr.split(jr.key(3))
    x = af.random_tokens(kx, N * n, d).reshape(N, n, d)
    x = x.at[1, 0].set(x[0, 0])  # overlapping supports: the perceptron alone cannot split them
    y = af.random_tokens(ky, N * n, d).reshape(N, n, d)
    plan = af.models.interpolate_measures(x, y)
    ts = jnp.append(plan.field.switch_times, plan.t1)
    return x, y, plan, ts, push(plan.field, x, ts)


def test_measures_land_on_their_targets(case):
    x, y, plan, ts, path = case
    errors = [w2(path[i, -1], y[i]) for i in range(N)]
    assert max(errors) < 1e-6, errors
    # A wrong construction fails the same check: measure 0's parameters used as if its target
    # were measure 1's (two targets swapped) ...
    assert w2(path[0, -1], y[1]) > 0.1
    # ... and the same pieces without the attention phase, which alone separates the shared atom.
    no_attention = eqx.tree_at(
        lambda f: f.field.attention.V, plan.field, plan.field.field.attention.V.at[0].set(0.0)
    )
    broken = push(no_attention, x, ts)
    assert np.allclose(broken[0, -1, 0], broken[1, -1, 0])  # one point cannot land on two targets
    assert max(w2(broken[i, -1], y[i]) for i in range(N)) > 0.1


def test_switch_count(case):
    x, y, plan, ts, path = case
    segments = np.asarray(plan.segments)
    assert plan.num_switches == plan.field.num_pieces - 1 == segments.sum()  # 1 + Σ steps pieces
    # Observed, not recounted: each steering piece moves exactly one atom, and atom (i, j)
    # moves in exactly segments[i, j] pieces.
    path = np.concatenate([np.asarray(x)[:, None], path], axis=1)  # states at piece ends
    moved = np.linalg.norm(np.diff(path, axis=1), axis=-1) > 1e-7  # (N, pieces, n)
    assert moved[:, 0].all()  # the attention phase moves every atom
    per_piece = moved[:, 1:].sum(axis=(0, 2))
    assert (per_piece == 1).all()
    np.testing.assert_array_equal(moved[:, 1:].sum(axis=1), segments)
    # Σ_arcs ⌈length/h⌉ over at most two arcs of length ≤ π each.
    steps, lengths = np.asarray(plan.steps), np.asarray(plan.lengths)
    lower = np.ceil(lengths / steps - 1e-12)
    assert (segments >= lower).all() and (segments <= lower + 1).all()
    assert plan.num_switches <= 2 * N * n * np.ceil(np.pi / steps.min())
    assert plan.t1 == pytest.approx(1.0 + segments.sum())


def test_cap_crossing_time_against_quadrature():
    """The closed-form time of a steering piece against quadrature of dθ/dt =
    −c (cos θ − cos r) sin θ, for a large and a small cap (half-angle forms keep digits)."""
    for h in (0.3, 1e-3):
        r = 1.75 * h
        exact = scipy.integrate.quad(
            lambda t, r=r: 1 / ((np.cos(t) - np.cos(r)) * np.sin(t)),
            0.5 * h,
            1.5 * h,
            epsabs=0,
            epsrel=1e-12,
        )[0]
        assert _cap_time_per_speed(1.5 * h, 0.5 * h, r) == pytest.approx(exact, rel=1e-9)


def test_errors(case):
    x, y, *_ = case
    with pytest.raises(ValueError, match="d >= 3"):
        af.models.interpolate_measures(af.normalize(x[..., :2]), af.normalize(y[..., :2]))
    with pytest.raises(ValueError, match="equal shapes"):
        af.models.interpolate_measures(x, y[:, :3])
    with pytest.raises(ValueError, match="y: atoms"):
        af.models.interpolate_measures(x, y.at[1, 2].set(y[0, 1]))
    with pytest.raises(ValueError, match="after the attention phase"):  # equal measures
        af.models.interpolate_measures(x.at[1].set(x[0]), y)
    with pytest.raises(ValueError, match="x: atoms"):  # shared atom, no attention phase
        af.models.interpolate_measures(x, y, disentangle_time=0.0)
