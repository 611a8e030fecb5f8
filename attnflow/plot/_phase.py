"""Phase diagrams on the (t, β) plane (paper Fig. 3 and Fig. 5)."""

import numpy as np

from .._check import check_bool
from ._common import finish, plt


def phase_diagram_heatmap(
    P,
    betas,
    ts,
    *,
    curve=None,
    ax=None,
    path=None,
    title=None,
    colorbar=True,
    curve_label=r"$\Gamma_{\infty,\delta}$",
):
    r"""Heatmap of P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) over (t, β) in the paper's colours (RdBu_r: red
    ≈ 1 clustered, blue ≈ 0), with an optional curve drawn on the same axes.

    Args:
        P: (len(betas), len(ts)) probabilities, e.g. from :func:`attnflow.phase_diagram`.
        betas, ts: the grids (β on the vertical axis, t on the horizontal one).
        curve: optional ``(t, beta)`` arrays of a curve to overlay, e.g. Γ_∞,δ as
            ``(attnflow.theory.clustering_time(b, n, δ), b)`` for a fine grid b; points outside
            the plotted t range are clipped by the axes.
        ax: axes to draw on (a new figure otherwise).
        path: save the figure there.
        colorbar: add a colour bar for P.

    Returns:
        The axes.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> ax = plot.phase_diagram_heatmap(np.zeros((3, 4)), [1.0, 2.0, 3.0], [0, 1, 2, 3],
        ...                                 curve=([0.5, 2.5], [1.0, 3.0]), title="d = 32")
        >>> ax.get_title(), len(ax.lines)
        ('d = 32', 1)
    """
    colorbar = check_bool(colorbar, "colorbar")
    P = np.asarray(P, dtype=float)
    betas = np.asarray(betas, dtype=float)
    ts = np.asarray(ts, dtype=float)
    if P.shape != (betas.size, ts.size):
        raise ValueError(
            f"P: expected shape (len(betas), len(ts)) = ({betas.size}, {ts.size}), got {P.shape}"
        )
    fig, ax = plt.subplots(figsize=(5, 3.6)) if ax is None else (ax.figure, ax)
    mesh = ax.pcolormesh(
        ts, betas, P, cmap="RdBu_r", vmin=0.0, vmax=1.0, shading="nearest", rasterized=True
    )
    if curve is not None:
        t_curve, beta_curve = (np.asarray(c, dtype=float) for c in curve)
        ax.plot(t_curve, beta_curve, color="k", lw=1.6, label=curve_label)
        ax.legend(loc="upper right", fontsize=8, framealpha=0.8)
    ax.set(
        xlim=(ts.min(), ts.max()),
        ylim=(betas.min(), betas.max()),
        xlabel="t",
        ylabel=r"$\beta$",
        title=title,
    )
    if colorbar:
        fig.colorbar(mesh, ax=ax, label=r"P($\langle x_1, x_2\rangle \geq 1-\delta$)")
    finish(fig, path)
    return ax
