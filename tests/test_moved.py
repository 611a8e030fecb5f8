"""Names that moved to a public subpackage stay importable from the top level, warn with a
DeprecationWarning naming their new home, and are the very same objects."""

import importlib

import pytest

import attnflow


@pytest.mark.parametrize("name", sorted(attnflow._MOVED))
def test_moved_name_warns_and_is_the_same_object(name):
    home = importlib.import_module(attnflow._MOVED[name])
    with pytest.warns(DeprecationWarning, match=f"{attnflow._MOVED[name]}.{name}"):
        old = getattr(attnflow, name)
    assert old is getattr(home, name)
    assert name not in dir(attnflow)


def test_landscape_contract_names_stay_top_level_without_warning(recwarn):
    for name in ["riemannian_hessian", "find_critical_point", "classify_critical_point"]:
        assert getattr(attnflow, name) is getattr(attnflow.landscape, name)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        attnflow.no_such_name  # noqa: B018
