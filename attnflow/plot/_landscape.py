"""Pictures of the energy landscape: Hessian spectra of critical points."""

import numpy as np

from .._check import check_tolerance
from ._common import finish, plt

_SIGN_COLORS = {1: "tab:red", -1: "tab:blue", 0: "0.5"}


def critical_point_spectra(spectra, labels, *, tol=1e-12, ax=None, path=None, title=None):
    """One column of dots per critical point: its Hessian eigenvalues (orbit modes removed).

    Red dots are positive eigenvalues (ascent directions: the paper's strict-saddle witness),
    blue negative, grey zero (|λ| ≤ tol·max|λ| over the column). The y axis is symlog, since
    spectra of clustered points span many decades. Returns the axes.

    Args:
        spectra: a sequence of 1-d arrays (e.g. ``Classification.eigenvalues``).
        labels: one x tick label per spectrum.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> ax = plot.critical_point_spectra([np.array([-1.0, 2.0]), np.array([-3.0])], ["a", "b"])
        >>> [t.get_text() for t in ax.get_xticklabels()]
        ['a', 'b']
    """
    tol = float(check_tolerance(tol, "tol"))
    spectra = [np.asarray(s, dtype=float).ravel() for s in spectra]
    labels = list(labels)
    if len(labels) != len(spectra):
        raise ValueError(
            f"labels: expected one label per spectrum ({len(spectra)}), got {len(labels)}"
        )
    fig, ax = (
        # Constrained layout makes room for the rotated tick labels below the axes.
        plt.subplots(figsize=(max(4.0, 0.5 * len(spectra) + 2), 3.6), layout="constrained")
        if ax is None
        else (ax.figure, ax)
    )
    smallest = np.inf
    for column, values in enumerate(spectra):
        scale = np.max(np.abs(values)) if values.size else 0.0
        sign = np.where(np.abs(values) <= tol * scale, 0, np.sign(values)).astype(int)
        ax.scatter(
            np.full(values.size, column),
            values,
            s=18,
            c=[_SIGN_COLORS[s] for s in sign],
            edgecolors="k",
            linewidths=0.3,
        )
        nonzero = np.abs(values[sign != 0])
        if nonzero.size:
            smallest = min(smallest, float(nonzero.min()))
    ax.axhline(0.0, color="0.6", lw=0.8)
    linthresh = smallest if np.isfinite(smallest) else 1.0
    ax.set_yscale("symlog", linthresh=linthresh)
    # Keep 0 and the decades beyond the linear band: labels at ±linthresh would sit on top of
    # the 0 label.
    ticks = [v for v in ax.get_yticks() if v == 0 or abs(v) >= 10 * linthresh]
    ax.set_yticks(ticks)
    ax.set_xticks(range(len(spectra)), labels, rotation=60, ha="right")
    ax.set(ylabel="Hessian eigenvalues", title=title)
    ax.grid(alpha=0.3, axis="y")
    finish(fig, path)
    return ax
