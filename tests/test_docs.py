"""Pointers in docstrings and on the maths page resolve inside the repository. The site build
itself (``mkdocs build --strict``, every page, every public name in the API reference) is checked
by tests/test_site.py, which builds it once for the browser tests too."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
