"""The docs build's notebook execution (docs/_hooks.py): test size by default, full size only with
ATTNFLOW_DOCS_FULL=1, a cache per notebook that only the attnflow modules the notebook imported
invalidate, and a line on stderr saying which notebook runs."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs")
pytest.importorskip("jupytext")


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NOTEBOOK = """# %%
import os

import attnflow.theory._metastability as m

print(os.environ.get("ATTNFLOW_QUICK"), m.__name__)
"""


def test_notebooks_run_at_test_size_cached_per_imported_module(tmp_path, monkeypatch, capsys):
    hooks = _hooks()
    monkeypatch.setenv("ATTNFLOW_DOCS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNFLOW_DOCS_FULL", raising=False)
    monkeypatch.delenv("ATTNFLOW_QUICK", raising=False)
    notebook = tmp_path / "tiny.py"
    notebook.write_text(NOTEBOOK)

    out, outputs = hooks.execute_notebook(notebook)
    assert outputs[0]["stdout"].split() == ["1", "attnflow.theory._metastability"]  # test size
    assert "notebooks/tiny.py (test size): executing" in capsys.readouterr().err
    modules = json.loads((out / "modules.json").read_text())
    assert "attnflow/theory/_metastability.py" in modules
    assert "attnflow/pretrained/_compare.py" not in modules  # its edits keep this cache

    hooks.execute_notebook(notebook)
    assert "(test size): cached" in capsys.readouterr().err
    # An imported module changed: the notebook runs again.
    modules["attnflow/theory/_metastability.py"] = "0" * 16
    (out / "modules.json").write_text(json.dumps(modules))
    assert not hooks._cache_valid(out)

    monkeypatch.setenv("ATTNFLOW_DOCS_FULL", "1")
    _, outputs = hooks.execute_notebook(notebook)
    assert outputs[0]["stdout"].split()[0] == "None"  # full size: no ATTNFLOW_QUICK
    assert "(full size): executing" in capsys.readouterr().err
