"""Shared plotting helpers and simple curves.

The matplotlib backend is left alone (``plt.show()`` keeps working in interactive sessions);
the command line selects Agg itself before it plots.
"""

import os
import pathlib
import re

import matplotlib.pyplot as plt

from .._check import check_curve, check_int

OUTPUT_ENV = "ATTNFLOW_OUT"


def finish(fig, path):
    """Save ``fig`` to ``path`` (if given) and close it."""
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)


def save_figures(name: str, folder=None, *, dpi: int = 120) -> list[pathlib.Path]:
    """Save every open matplotlib figure as ``folder/name.png`` (then ``name-2.png``, …) and
    return the paths. The notebooks call it at their end, so that run as scripts
    (``ATTNFLOW_OUT=pictures python notebooks/fig3.py``) they leave their pictures in the
    folder the user names.

    Args:
        name: the file stem, e.g. the notebook's name.
        folder: where to write (created if missing); default the environment variable
            ``ATTNFLOW_OUT``. When neither is given nothing is saved and ``[]`` is returned.
        dpi: resolution of the PNGs.

    Example:
        >>> import tempfile, matplotlib.pyplot as plt
        >>> from attnflow import plot
        >>> plt.close("all")
        >>> fig = plt.figure()
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     [p.name for p in plot.save_figures("demo", folder)]
        ['demo.png']
        >>> plt.close("all")
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"name: expected a file stem of letters, digits, _ . -, got {name!r}")
    dpi = check_int(dpi, "dpi", low=1)
    folder = folder if folder is not None else os.environ.get(OUTPUT_ENV) or None
    if folder is None:
        return []
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, number in enumerate(plt.get_fignums()):
        path = folder / (f"{name}.png" if k == 0 else f"{name}-{k + 1}.png")
        plt.figure(number).savefig(path, dpi=dpi, bbox_inches="tight")
        paths.append(path)
    return paths


def clustered_fraction_curve(ts, fractions, *, ax=None, path=None, title=None):
    """Plot the clustered fraction against time; returns the axes."""
    ts, fractions = check_curve(ts, "ts", fractions=fractions)
    fig, ax = plt.subplots(figsize=(5, 3.2)) if ax is None else (ax.figure, ax)
    ax.plot(ts, fractions, lw=2)
    ax.set(xlabel="t (layers)", ylabel="clustered fraction", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    finish(fig, path)
    return ax
