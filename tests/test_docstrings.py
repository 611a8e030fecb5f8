"""Every ``Example:`` in attnflow's docstrings runs and prints what it says (optax-style)."""

import doctest
import importlib
import pkgutil

import pytest

import attnflow

# Each module's examples compile their own programs: release them after each test.
pytestmark = pytest.mark.release_compiled

MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(attnflow.__path__, "attnflow.")
    if not name.startswith(("attnflow.commands", "attnflow.figures"))
)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, module_name, extraglobs={}):
        if test.examples:
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"


def test_every_public_name_is_documented():
    undocumented = [
        name
        for name in dir(attnflow)
        if not name.startswith("_")
        and callable(getattr(attnflow, name))
        and not (getattr(attnflow, name).__doc__ or "").strip()
    ]
    assert not undocumented, f"public names without a docstring: {undocumented}"
