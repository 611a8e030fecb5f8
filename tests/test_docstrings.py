"""Every ``Example:`` in attnflow's docstrings runs and prints what it says (optax-style)."""

import doctest
import importlib
import importlib.util
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


# The modules' examples share one worker's compiled programs (a solve of SelfAttention on a few
# tokens recurs across modules): no release between modules, only the per-file one of
# conftest.py. Measured alone (-n 0): 112 s and 0.7 GB peak with a release after each module,
# 78 s and 3.5 GB peak without.
CASES = list(MODULES)


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
