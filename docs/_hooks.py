"""MkDocs hooks: pages generated from files that live outside docs/.

- ``notebooks/*.py`` (jupytext percent scripts) become ``notebooks/NAME.md``, code and text, with
  an index page listing them;
- ``benchmarks/RESULTS.md`` becomes ``benchmarks/results.md``, with the pictures it references;
- public names of attnflow, attnflow.theory and attnflow.plot that no page of ``docs/api/``
  documents yet are collected on ``api/more.md`` ("More names"), so that a new name is documented
  from its docstring the moment it is exported. Give each a place on a topic page.

Pointers of the form "MATH.md §x.y" in these sources become links to the maths page.
"""

import importlib
import re
from pathlib import Path

import jupytext
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
_MATH_POINTER = re.compile(r"(?:MATH|docs/maths)\.md (§(\d+)(?:\.(\d+))?)")
_IMAGE_SUFFIXES = (".png", ".svg", ".gif", ".jpg")


_DIRECTIVE = re.compile(r"^::: (attnflow(?:\.[A-Za-z_]\w*)+)\s*$", re.MULTILINE)
PUBLIC_MODULES = (
    "attnflow",
    "attnflow.landscape",
    "attnflow.theory",
    "attnflow.models",
    "attnflow.measures",
    "attnflow.plot",
)


def public_names() -> list[str]:
    """Fully qualified public names: attributes of the public modules not starting with "_",
    submodules excluded."""
    names = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in dir(module):
            if name.startswith("_") or type(getattr(module, name)).__name__ == "module":
                continue
            names.append(f"{module_name}.{name}")
    return names


def documented_names() -> set[str]:
    """Identifiers of the ``::: attnflow.X`` directives on the pages of docs/api/."""
    found = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        found.update(_DIRECTIVE.findall(page.read_text()))
    return found


def undocumented_names() -> list[str]:
    documented = documented_names()
    return [name for name in public_names() if name not in documented]


def math_anchor(section: str, subsection: str | None) -> str:
    """The anchor of "§section.subsection" on the maths page (``math-1-12``, ``math-4``)."""
    return f"math-{section}" + (f"-{subsection}" if subsection else "")


def _link_math_pointers(text: str, maths_page: str) -> str:
    return _MATH_POINTER.sub(
        lambda m: f"[Mathematics {m.group(1)}]({maths_page}#{math_anchor(m.group(2), m.group(3))})",
        text,
    )


def notebook_markdown(path: Path) -> str:
    notebook = jupytext.read(path)
    notebook.metadata = {}
    text = jupytext.writes(notebook, fmt="md")
    source = f"`notebooks/{path.name}`"
    note = (
        f'\n\n!!! note "Source"\n    This page is the jupytext script {source}, rendered '
        "without outputs. Run it with `jupytext --to notebook` or as a plain Python script "
        "(`ATTNFLOW_QUICK=1` for a test-sized run).\n"
    )
    first_break = text.find("\n\n")
    if text.startswith("# ") and first_break > 0:
        text = text[:first_break] + note + text[first_break:]
    else:
        text = note + text
    return _link_math_pointers(text, "../maths.md")


def _title(markdown: str, fallback: str) -> str:
    for line in markdown.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return fallback


_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(([^)\s]+)\)")


def _results_link(match: re.Match) -> str:
    """Links of benchmarks/RESULTS.md, relative to benchmarks/, as links of the generated page
    benchmarks/results.md: pictures in benchmarks/ and docs/ are kept, web links too; links to
    other repository files (scripts, the README) become their text."""
    bang, text, target = match.groups()
    if re.match(r"https?://", target):
        return match.group(0)
    path = target.split("#")[0]
    for prefix in ("../docs/", "docs/"):
        if path.startswith(prefix) and (ROOT / "docs" / path[len(prefix) :]).exists():
            if not path.endswith(".md"):
                return f"{bang}[{text}](../{target[len(prefix) :]})"
    local = ROOT / "benchmarks" / path
    if ".." not in path and local.suffix in _IMAGE_SUFFIXES and local.exists():
        return match.group(0)
    return text if not bang else f"`{path}`"


def results_markdown() -> str:
    text = _LINK.sub(_results_link, (ROOT / "benchmarks" / "RESULTS.md").read_text())
    return _link_math_pointers(text, "../maths.md")


def on_files(files, config):
    index = [
        "# Notebooks",
        "",
        "The notebooks are jupytext percent scripts in `notebooks/`; the test suite executes each "
        "at a small size. Each page below shows the code and the text of one of them.",
        "",
    ]
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        content = notebook_markdown(path)
        uri = f"notebooks/{path.stem}.md"
        files.append(File.generated(config, uri, content=content))
        index.append(f"- [{_title(content, path.stem)}]({path.stem}.md)")
    files.append(File.generated(config, "notebooks/index.md", content="\n".join(index) + "\n"))
    files.append(File.generated(config, "benchmarks/results.md", content=results_markdown()))
    missing = undocumented_names()
    if missing:
        more = [
            "# More names",
            "",
            "Public names that no topic page lists yet, documented from their docstrings.",
        ]
        more += [f"\n::: {name}" for name in missing]
        files.append(File.generated(config, "api/more.md", content="\n".join(more) + "\n"))
    for path in sorted((ROOT / "benchmarks").rglob("*")):
        if path.suffix in _IMAGE_SUFFIXES:
            uri = path.relative_to(ROOT).as_posix()
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_config(config):
    """List every notebook under "Notebooks" in the navigation (titles from their first line)."""
    entries = ["notebooks/index.md"]
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        title = path.stem
        for line in path.read_text().splitlines():
            if line.startswith("# # "):
                title = line[4:].strip()
                break
        entries.append({title: f"notebooks/{path.stem}.md"})
    for i, item in enumerate(config.nav or []):
        if isinstance(item, dict) and "Notebooks" in item:
            config.nav[i] = {"Notebooks": entries}
        if isinstance(item, dict) and "API reference" in item and undocumented_names():
            item["API reference"] = [*item["API reference"], {"More names": "api/more.md"}]
    return config
