"""Shared plotting helpers and simple curves."""

import matplotlib

if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def finish(fig, path):
    """Save ``fig`` to ``path`` (if given) and close it."""
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)


def clustered_fraction_curve(ts, fractions, *, ax=None, path=None, title=None):
    """Plot the clustered fraction against time; returns the axes."""
    fig, ax = plt.subplots(figsize=(5, 3.2)) if ax is None else (ax.figure, ax)
    ax.plot(ts, fractions, lw=2)
    ax.set(xlabel="t (layers)", ylabel="clustered fraction", ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    finish(fig, path)
    return ax
