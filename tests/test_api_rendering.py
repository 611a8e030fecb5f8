"""The API pages render what the docstrings say (issue #43 item 4): formulas in indented blocks
keep their brackets, grouped parameters ("rtol, atol: ...") get their defaults, a class without
an __init__ docstring shows no "Initialize self", plain-text help() shows no Markdown escapes,
and signatures are formatted to a width."""

import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest

import attnflow.meanfield as mf
from attnflow import theory

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("griffe")


def _extension():
    spec = importlib.util.spec_from_file_location(
        "docs_griffe_examples", ROOT / "docs" / "_griffe_examples.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_formula_blocks_keep_their_brackets_and_prose_is_still_escaped():
    ext = _extension()
    text = ext.rewrite(inspect.getdoc(mf.solve_density))
    assert "    X[ρ](x) = P_x ∫" in text and "X\\[ρ\\]" not in text
    prose = ext.rewrite("The field 𝒳[μ](x) of a measure.\n\n    y = 𝒳[μ](x)\n\nThen A[i][j].")
    assert "𝒳\\[μ\\](x) of" in prose and "    y = 𝒳[μ](x)" in prose and "A\\[i\\]\\[j\\]" in prose
    # the entries of a section are not a code block
    args = ext.rewrite("Summary.\n\nArgs:\n\n    f: the map 𝒳[μ](x).\n")
    assert "𝒳\\[μ\\](x)" in args


def test_grouped_parameters_become_one_entry_each():
    ext = _extension()
    text = ext.rewrite(inspect.getdoc(mf.solve_density))
    rtol = [line for line in text.splitlines() if line.strip().startswith(("rtol", "atol"))]
    assert [line.split(":")[0].strip() for line in rtol] == ["rtol", "atol"]
    assert "rtol, atol:" not in text
    two = ext.rewrite("S.\n\nArgs:\n    a, b (float): shared,\n        continued.\n    c: own.\n")
    assert two.split("\n")[3:-1] == [
        "    a (float): shared,",
        "        continued.",
        "    b (float): shared,",
        "        continued.",
        "    c: own.",
    ]


def test_no_inherited_initialize_self_docstring():
    ext = _extension()

    class Obj:
        module = type("M", (), {"path": "attnflow.meanfield"})
        path = "attnflow.meanfield.CircleGrid.__init__"

    assert ext._runtime_docstring(Obj) is None
    Obj.path = "attnflow.meanfield.CircleGrid"
    assert ext._runtime_docstring(Obj).startswith("Fourier modes")


def test_help_text_has_no_markdown_escapes():
    for module in (theory, mf):
        for name in dir(module):
            doc = inspect.getdoc(getattr(module, name)) or ""
            assert "\\|" not in doc, f"{module.__name__}.{name}"


def test_signatures_are_formatted_to_a_width():
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"separate_signature: true", config)
    assert re.search(r"line_length: \d+", config)
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("ruff") for r in project["optional-dependencies"]["docs"])
