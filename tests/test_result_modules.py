"""Results are eqx.Modules with named fields (issue #36): the old dict keys, tuple positions and
the ``statistics=True`` flag keep working for one release with a DeprecationWarning naming the
replacement; closed forms that moved from attnflow.models to attnflow.theory warn from the old
namespace and are the very same objects."""

import importlib
import warnings

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
from attnflow import landscape, models, pretrained, theory

ANGLES = np.array([0.0, 0.3, 1.2, 2.0])


@pytest.mark.parametrize("name", sorted(models._MOVED))
def test_moved_model_names_warn_and_are_the_same_object(name):
    home = models._MOVED[name]
    assert home == "attnflow.theory"
    new = getattr(importlib.import_module(home), name)
    with pytest.warns(DeprecationWarning, match=rf"attnflow\.models\.{name} moved to {home}"):
        old = getattr(models, name)
    assert old is new
    assert name not in vars(models)


def test_models_names_that_stay_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("rescaled_staircase", "collision_model", "modified_usa", "StaircaseRun"):
            getattr(models, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        models.no_such_name  # noqa: B018


def test_result_types_are_modules():
    for kind in (
        models.StaircaseRun,
        models.StaircaseMerge,
        models.CollisionEvent,
        theory.StaircasePlateaus,
        theory.MetastabilityBounds,
        landscape.SurveyPoint,
        landscape.LandscapeSurvey,
        pretrained.HiddenStates,
        af.PhaseDiagramResult,
    ):
        assert issubclass(kind, eqx.Module), kind


def test_rescaled_staircase_keys_warn_and_map_to_fields():
    run = models.rescaled_staircase(ANGLES, 100.0)
    assert run.clock == "s" and len(run.merges) == 3
    with pytest.warns(DeprecationWarning, match=r"StaircaseRun\['s'\].*\.time"):
        assert run["s"] is run.time
    for key in ("theta", "energy", "levels", "counts", "merges", "steps", "finished"):
        with pytest.warns(DeprecationWarning, match=rf"\.{key}"):
            assert run[key] is getattr(run, key)
    merge = run.merges[0]
    with pytest.warns(DeprecationWarning, match=r"StaircaseMerge\['s'\].*\.time"):
        assert merge["s"] == merge.time
    with pytest.raises(KeyError):
        run["t"]  # the clock of modified_usa, not of this run
    with pytest.raises(TypeError, match="not iterable"):
        list(run)
    events = models.collision_model(ANGLES, 100.0)
    assert [e.tokens for e in events] == [[0, 1], [2, 3], [0, 2]]
    with pytest.warns(DeprecationWarning, match=r"CollisionEvent\['tokens'\]"):
        assert events[0]["tokens"] == [0, 1]


def test_modified_usa_and_plateaus_keys_warn():
    theta0 = np.array([0.0, 0.4])
    run = models.modified_usa(theta0, 100.0)
    assert run.clock == "t"
    with pytest.warns(DeprecationWarning, match=r"StaircaseRun\['t'\]"):
        assert run["t"] is run.time
    with pytest.warns(DeprecationWarning, match=r"StaircaseMerge\['t'\]"):
        assert run.merges[0]["t"] == run.merges[0].time
    plateaus = theory.staircase_plateaus(theta0, 100.0)
    with pytest.warns(DeprecationWarning, match=r"StaircasePlateaus\['times'\].*\.times"):
        assert plateaus["times"] is plateaus.times
    # n = 2: one merge, at the closed-form pair time of the lemma (c = 1/2).
    np.testing.assert_allclose(plateaus.times, [theory.pair_merge_time(0.4, 100.0, 0.5)])


def test_hidden_states_positions_and_unpacking_warn():
    x = af.random_tokens(jr.key(0), 3, 4)
    out = pretrained.HiddenStates(
        hidden_states=jnp.stack([x, x]),
        tokens=("a", "b", "c"),
        attention_mask=jnp.ones(3, bool),
        input_ids=jnp.arange(3),
    )
    with pytest.warns(DeprecationWarning, match=r"HiddenStates\[0\].*\.hidden_states"):
        assert out[0] is out.hidden_states
    with pytest.warns(DeprecationWarning, match=r"HiddenStates\[-1\].*\.input_ids"):
        assert out[-1] is out.input_ids
    with pytest.warns(DeprecationWarning, match="unpacking"):
        states, tokens, mask, ids = out
    assert tokens == ("a", "b", "c") and ids is out.input_ids
    with pytest.raises(KeyError):
        out[4]


GRID = dict(n=4, d=3, betas=[0.5, 4.0], ts=[0.0, 2.0, 20.0], realizations=3, progress=False)


def test_phase_diagram_result_entry_point_and_deprecated_flag():
    key = jr.key(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        P = af.phase_diagram(key, **GRID)
        result = af.phase_diagram_result(key, **GRID)
    assert isinstance(result, af.PhaseDiagramResult)
    assert result.accepted.shape == (2, 3) and np.all(np.asarray(result.accepted) > 0)
    np.testing.assert_array_equal(np.asarray(result.probability), np.asarray(P))
    with pytest.warns(DeprecationWarning, match="phase_diagram_result"):
        flagged = af.phase_diagram(key, **GRID, statistics=True)
    assert isinstance(flagged, af.PhaseDiagramResult)
    np.testing.assert_array_equal(np.asarray(flagged.accepted), np.asarray(result.accepted))
    x0 = af.random_tokens(jr.key(2), 4, 3, batch_shape=(2,))
    tokens = dict(betas=[1.0], ts=[0.0, 5.0])
    with pytest.warns(DeprecationWarning, match="statistics=True"):
        old = af.phase_diagram_from_tokens(x0, **tokens, statistics=True)
    new = af.phase_diagram_from_tokens_result(x0, **tokens)
    np.testing.assert_array_equal(np.asarray(old.rejected), np.asarray(new.rejected))
    np.testing.assert_array_equal(np.asarray(old.probability), np.asarray(new.probability))


def test_phase_diagram_result_signature_and_refusals():
    import inspect

    params = inspect.signature(af.phase_diagram_result).parameters
    assert "statistics" not in params
    assert list(params) == [p for p in inspect.signature(af.phase_diagram).parameters][:-1]
    with pytest.raises(TypeError, match="statistics"):
        af.phase_diagram_result(jr.key(0), **GRID, statistics=True)
    with pytest.raises(ValueError, match="general engine"):
        af.phase_diagram_result(jr.key(0), **GRID, statistic=af.ClusterCount())
