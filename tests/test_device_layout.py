"""The device layout as one argument (issue #36): ``layout=DeviceLayout(...)`` lays the systems
out as the four keywords do, and no result depends on it (bitwise in float64, against the preset
layout); the keywords still work; the layout is given once and checked."""

import jax.random as jr
import numpy as np
import pytest

import attnflow as af

GRID = dict(n=4, d=3, betas=[0.5, 9.0], ts=[0.0, 1.0, 10.0], realizations=4, progress=False)
SMALL = dict(backend="cpu", chunk_size=2, beta_block=1, slots=2)


def test_layout_is_the_keywords_and_changes_no_result():
    key = jr.key(3)
    other = af.phase_diagram_result(key, **GRID, backend="cpu", chunk_size=4, slots=3)
    layout = af.DeviceLayout(**SMALL)
    grouped = af.phase_diagram_result(key, **GRID, layout=layout)
    spelt = af.phase_diagram_result(key, **GRID, **SMALL)
    # the layout changes the work of the slots (2 in flight instead of 3) and no result
    assert grouped.slot_steps == spelt.slot_steps != other.slot_steps
    for result in (grouped, spelt):
        np.testing.assert_array_equal(np.asarray(result.probability), np.asarray(other.probability))
        np.testing.assert_array_equal(np.asarray(result.accepted), np.asarray(other.accepted))
    x0 = af.random_tokens(jr.key(4), 4, 3, batch_shape=(2,))
    P = af.phase_diagram_from_tokens(x0, betas=[1.0], ts=[0.0, 5.0], layout=layout)
    Q = af.phase_diagram_from_tokens(x0, betas=[1.0], ts=[0.0, 5.0], **SMALL)
    np.testing.assert_array_equal(np.asarray(P), np.asarray(Q))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: af.DeviceLayout(chunk_size=0), "chunk_size"),
        (lambda: af.DeviceLayout(slots=2.5), "slots"),
        (lambda: af.DeviceLayout(beta_block=True), "beta_block"),
        (lambda: af.DeviceLayout(backend="abacus"), "backend"),
    ],
)
def test_layout_checks_its_fields(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_layout_is_given_once():
    with pytest.raises(ValueError, match="layout: give the device layout once"):
        af.phase_diagram(jr.key(0), **GRID, layout=af.DeviceLayout(), slots=4)
    with pytest.raises(ValueError, match="layout: expected a DeviceLayout"):
        af.phase_diagram(jr.key(0), **GRID, layout={"slots": 4})
