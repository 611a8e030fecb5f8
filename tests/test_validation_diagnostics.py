"""Clustering diagnostics validate their input as solve does: a NaN row, rows off the sphere
or a bad threshold δ raise instead of changing the count silently."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

# Two clusters of two tokens each.
X = af.normalize(jnp.array([[1.0, 0.0, 0.0], [1.0, 1e-3, 0.0], [0.0, 0.0, 1.0], [0.0, 1e-3, 1.0]]))
# Under jit: EquinoxRuntimeError, or the CPU callback's JaxRuntimeError (ValueError on jit's C++
# fast path); the traced messages matched below differ from the eager ones.
RUNTIME_ERRORS = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)
NAN = float("nan")
DIAGNOSTICS = [af.count_clusters, af.clustered_fraction, af.cluster_labels, af.cluster_centers]


def test_the_system_has_two_clusters():
    assert int(af.count_clusters(X)) == 2
    assert float(af.clustered_fraction(X)) == pytest.approx(4 / 12)


@pytest.mark.parametrize("diagnostic", DIAGNOSTICS)
@pytest.mark.parametrize(
    "bad, delta, message",
    [
        (X.at[1, 0].set(NAN), 1e-3, r"x: tokens contain NaN or inf \(first at row 1, col 0\)"),
        (0.5 * X, 1e-3, r"x: tokens must lie on the unit sphere.*\|x_\d\| - 1 = -5.00e-01"),
        (X, -1e-3, r"delta: expected a threshold 0 < delta < 2, got -0.001"),
        (X, NAN, r"delta: expected a threshold 0 < delta < 2, got nan"),
        (X.tolist(), "1e-3", r"delta: expected a real scalar"),
    ],
)
def test_bad_input_raises(diagnostic, bad, delta, message):
    with pytest.raises(ValueError, match=message):
        diagnostic(bad, delta)


def test_bad_input_raises_under_jit():
    count = jax.jit(af.count_clusters)
    assert int(count(X, 1e-3)) == 2
    with pytest.raises(RUNTIME_ERRORS, match="x: tokens contain NaN or inf"):
        count(X.at[1, 0].set(NAN), 1e-3)
    with pytest.raises(RUNTIME_ERRORS, match="x: tokens must lie on the unit sphere"):
        count(0.5 * X, 1e-3)
    with pytest.raises(RUNTIME_ERRORS, match="delta: expected a threshold 0 < delta < 2"):
        count(X, NAN)
    fraction = jax.jit(af.clustered_fraction)
    with pytest.raises(RUNTIME_ERRORS, match="delta: expected a threshold 0 < delta < 2"):
        fraction(X, -1.0)


def test_lists_are_accepted():
    np.testing.assert_array_equal(af.gram(X.tolist()), X @ X.T)
    assert int(af.count_clusters(X.tolist())) == 2
    assert float(af.clustered_fraction(X.tolist())) == pytest.approx(4 / 12)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(rtol=-1.0), r"rtol: expected a finite tolerance > 0, got -1.0"),
        (dict(rtol=NAN), r"rtol: expected a finite tolerance > 0, got nan"),
        (dict(atol=0.0), r"atol: expected a finite tolerance > 0, got 0.0"),
        (dict(delta=2.0), r"delta: expected a threshold 0 < delta < 2, got 2.0"),
        (dict(delta=0.0), r"delta: expected a threshold 0 < delta < 2, got 0.0"),
        (dict(delta=NAN), r"delta: expected a threshold 0 < delta < 2, got nan"),
        (dict(max_steps=0), r"max_steps: expected a positive integer, got 0"),
    ],
)
def test_phase_diagram_rejects_bad_settings(kwargs, message):
    settings = dict(n=3, d=3, betas=[1.0], ts=[0.0, 1.0], realizations=2, progress=False)
    with pytest.raises(ValueError, match=message):
        af.phase_diagram(jr.key(0), **settings, **kwargs)


def test_phase_diagram_accepts_delta_up_to_two():
    # δ = 1.5 counts pairs with ⟨x_i, x_j⟩ ≥ −0.5, as count_clusters / clustered_fraction do.
    x0 = af.random_tokens(jr.key(1), 3, 3, batch_shape=(4,))
    P = af.phase_diagram_from_tokens(x0, betas=[1.0], ts=[0.0], delta=1.5, progress=False)
    expected = jnp.mean(jax.vmap(lambda x: af.clustered_fraction(x, 1.5))(x0))
    assert 0 < float(expected) < 1
    np.testing.assert_allclose(P[0, 0], expected, atol=1e-12)
