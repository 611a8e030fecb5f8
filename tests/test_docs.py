"""The documentation site: ``mkdocs build --strict`` succeeds (no broken link or anchor, no
unresolved cross-reference), every public name is documented in the API reference, and every
pointer in a docstring or on the maths page resolves inside the repository."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")
pytest.importorskip("jupytext")


def _hooks():
    spec = importlib.util.spec_from_file_location(
        "attnflow_docs_hooks", ROOT / "docs" / "_hooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        # Notebook execution is checked by tests/test_site.py; this build checks links and names.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "ATTNFLOW_DOCS_EXECUTE": "0"},
    )
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert result.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or result.stderr.splitlines()[-30:]
    )
    return out


@pytest.mark.slow
def test_site_builds_strict_with_every_page(site):
    for page in ["index", "getting-started/index", "maths/index", "conventions/index"]:
        assert (site / f"{page}.html").exists() or (site / page.replace("/index", ".html")).exists()
    for notebook in (ROOT / "notebooks").glob("*.py"):
        assert (site / "notebooks" / notebook.stem / "index.html").exists(), notebook.name
    assert (site / "benchmarks" / "index.html").exists()


@pytest.mark.slow
def test_every_public_name_is_in_the_api_reference(site):
    """Each public name of attnflow, attnflow.theory and attnflow.plot has its own entry
    (heading id ``attnflow.NAME``) in the API reference, rendered from a non-empty docstring."""
    html = "\n".join(p.read_text() for p in (site / "api").rglob("*.html"))
    anchors = set(re.findall(r'id="(attnflow[\w.]*)"', html))
    names = _hooks().public_names()
    assert len(names) > 80
    missing = [name for name in names if name not in anchors]
    assert not missing, f"public names missing from the API reference: {missing}"

    extensions = griffe.load_extensions(
        f"{ROOT / 'docs' / '_griffe_examples.py'}:AttnflowDocstrings"
    )
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)], extensions=extensions)
    package = loader.load("attnflow")
    loader.resolve_aliases(implicit=True, external=False)
    undocumented = []
    for name in names:
        obj = package
        for part in name.split(".")[1:]:
            obj = obj.members[part]
        if obj.docstring is None or not obj.docstring.value.strip():
            undocumented.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"


def test_maths_page_points_nowhere_outside_the_repository():
    text = (ROOT / "docs" / "maths.md").read_text()
    for pointer in ["MATH.md", "DESIGN.md", "seeds/", "../", "github.com"]:
        assert pointer not in text, pointer
    assert not re.search(r"\]\(https?://", text)
    # the anchors docstrings and notebooks point to: one per section of the page
    anchors = set(re.findall(r"\{#(math-[\d-]+)\}", text))
    for section in range(13):
        assert f"math-{section}" in anchors


def _package_sources():
    return sorted((ROOT / "attnflow").rglob("*.py"))


def test_docstring_pointers_resolve_to_pages_of_the_site():
    """Docstrings point into the repository's documentation: "docs/maths.md §x.y" to an anchor
    of the maths page, "docs/PAGE.md#anchor" to an anchor of that page; nothing points to files
    that do not exist (MATH.md, DESIGN.md, benchmarks/RESULTS_*.md)."""
    maths = (ROOT / "docs" / "maths.md").read_text()
    anchors = {
        page.stem: set(re.findall(r"\{#([\w-]+)\}", page.read_text()))
        for page in (ROOT / "docs").glob("*.md")
    }
    stale, broken, count = [], [], 0
    for path in _package_sources():
        text = path.read_text()
        where = path.relative_to(ROOT)
        stale += [f"{where}: {m}" for m in re.findall(r"(?:MATH|DESIGN|RESULTS_\w+)\.md", text)]
        for section, subsection in re.findall(r"docs/maths\.md §(\d+)(?:\.(\d+))?", text):
            count += 1
            anchor = f"math-{section}" + (f"-{subsection}" if subsection else "")
            if f"{{#{anchor}}}" not in maths:
                broken.append(f"{where}: §{section}.{subsection} ({anchor})")
        for page, anchor in re.findall(r"docs/([\w-]+)\.md(?:#([\w-]+))?", text):
            count += 1
            if page not in anchors or (anchor and anchor not in anchors[page]):
                broken.append(f"{where}: docs/{page}.md#{anchor}")
    assert not stale, f"pointers to files that do not exist: {stale}"
    assert not broken, f"pointers to missing pages or anchors: {broken}"
    assert count > 40
