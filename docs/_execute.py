"""Execute a jupytext notebook cell by cell and record what each cell shows, for the site.

``python docs/_execute.py NOTEBOOK.py OUT_DIR`` runs the code cells of the notebook in order, in
one namespace (``__name__ == "__main__"``, as when it runs as a script), with the working
directory set to ``OUT_DIR``. For each code cell it records what the cell printed and saves the
matplotlib figures it left open, closed or showed as ``cell<i>_<k>.png``, as Jupyter's inline
backend does (figures are closed after each cell). ``OUT_DIR/outputs.json`` lists, per cell
(in notebook order), ``{"stdout": str, "images": [file names]}``. A cell that raises stops the
run: the traceback is printed and the exit status is 1.

The documentation hooks (``docs/_hooks.py``) run this in a subprocess per notebook, so that
each notebook gets a fresh JAX and its memory is returned when it ends. ``OUT_DIR/modules.json``
lists the attnflow source files the notebook imported, with their hashes (the cache key).
"""

import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path


def execute(notebook: Path, out: Path) -> list[dict]:
    os.environ["MPLBACKEND"] = "Agg"
    import jupytext
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = jupytext.read(notebook).cells
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)
    namespace = {"__name__": "__main__", "__file__": str(notebook)}
    records: list[dict] = []
    saved: set[int] = set()
    images: list[str] = []
    original_close, original_show = plt.close, plt.show
    index = 0

    def save(figure) -> None:
        if id(figure) in saved or not figure.get_axes():
            return
        saved.add(id(figure))
        name = f"cell{index}_{len(images)}.png"
        figure.savefig(out / name, dpi=80, bbox_inches="tight")
        images.append(name)

    def close(fig=None):
        if fig is None:
            targets = [plt.gcf()] if plt.get_fignums() else []
        elif fig == "all":
            targets = [plt.figure(n) for n in plt.get_fignums()]
        elif isinstance(fig, int | str):
            targets = [plt.figure(fig)] if plt.fignum_exists(fig) else []
        else:
            targets = [fig]
        for figure in targets:
            save(figure)
        return original_close(fig)

    def show(*args, **kwargs):
        close("all")

    plt.close, plt.show = close, show
    try:
        for index, cell in enumerate(cells):
            if cell.cell_type != "code":
                continue
            images = []
            saved.clear()
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                try:
                    code = compile(cell.source, f"{notebook.name}, cell {index}", "exec")
                    exec(code, namespace)
                except Exception:
                    sys.stdout = sys.__stdout__
                    print(buffer.getvalue())
                    traceback.print_exc()
                    raise SystemExit(1) from None
            close("all")
            records.append({"cell": index, "stdout": buffer.getvalue(), "images": images})
    finally:
        plt.close, plt.show = original_close, original_show
    # The attnflow modules the notebook used, with their hashes: the docs cache reruns the
    # notebook only when one of these (or the notebook) changes, not at every edit of attnflow.
    package = Path(__file__).resolve().parent.parent / "attnflow"
    used = {}
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if source and Path(source).resolve().is_relative_to(package) and source.endswith(".py"):
            path = Path(source).resolve()
            used[str(path.relative_to(package.parent))] = file_hash(path)
    (out / "modules.json").write_text(json.dumps(dict(sorted(used.items())), indent=1))
    (out / "outputs.json").write_text(json.dumps(records, indent=1))
    return records


def file_hash(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


if __name__ == "__main__":
    execute(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
