"""Every ``Example:`` in attnflow's docstrings runs and prints what it says (optax-style)."""

import doctest
import importlib
import importlib.util
import pathlib
import pkgutil

import pytest

import attnflow

MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(attnflow.__path__, "attnflow.")
    if not name.startswith(("attnflow.commands", "attnflow.figures"))
)


def examples(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [test for test in finder.find(module, module_name, extraglobs={}) if test.examples]


def has_examples(module_name):
    """Whether the module's source has a ``>>>`` (read, not imported, at collection)."""
    return ">>>" in pathlib.Path(importlib.util.find_spec(module_name).origin).read_text("utf-8")


# Each module's examples compile their own programs: release them after each module that has
# examples (one without compiles nothing, and a release costs a garbage collection).
CASES = [
    pytest.param(name, marks=[pytest.mark.release_compiled] if has_examples(name) else [])
    for name in MODULES
]


@pytest.mark.parametrize("module_name", CASES)
def test_docstring_examples(module_name):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in examples(module_name):
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
