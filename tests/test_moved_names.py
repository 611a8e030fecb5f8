"""Names moved to a public subpackage stay importable from ``attnflow`` with a
DeprecationWarning naming the new home, and are the very same object."""

import importlib
import warnings

import pytest

import attnflow as af

CONTRACT = {"normalize", "tangent", "random_tokens", "orthogonal_tokens", "InteractionEnergy"}


@pytest.mark.parametrize("name", sorted(af._MOVED))
def test_moved_name_warns_and_is_the_same_object(name):
    home = af._MOVED[name]
    new = getattr(importlib.import_module(home), name)
    with pytest.warns(DeprecationWarning, match=rf"attnflow\.{name} moved to {home}\.{name}"):
        old = getattr(af, name)
    assert old is new
    assert name not in vars(af), "a moved name must go through the deprecation hook"


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("kde_mode_count", "attnflow.measures"),
        ("squared_mmd", "attnflow.measures"),
        ("limit_geometry", "attnflow.models"),
        ("rescaled_staircase", "attnflow.models"),
        ("two_body_log_time", "attnflow.theory"),
    ],
)
def test_follow_up_names_have_their_new_homes(name, home):
    assert af._MOVED[name] == home


def test_contract_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in CONTRACT:
            getattr(af, name)


def test_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        af.no_such_name  # noqa: B018
