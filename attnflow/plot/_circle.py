"""Pictures of tokens on the circle S¹ and the sphere S², and of the circle kernel g of App. B."""

import numpy as np

from .._check import (
    check_bool,
    check_finite_scalar,
    check_real_values,
    check_tokens,
)
from ._common import finish, plt

_TAB = plt.get_cmap("tab10")


def _token_colors(labels, n):
    if labels is None:
        return "C0"
    labels = np.asarray(labels).reshape(n)
    # Clusters of two or more tokens are coloured by the rank of their label (stable across
    # frames); lone tokens are grey, so an unclustered start is not a rainbow.
    _, rank, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    shared = np.cumsum(sizes > 1) - 1
    return ["0.55" if sizes[r] == 1 else _TAB(int(shared[r]) % 10) for r in rank]


def tokens_on_circle(x, *, labels=None, ax=None, path=None, title=None, size=28):
    """Scatter tokens x: (n, 2) on the unit circle, coloured by ``labels`` (e.g.
    :func:`attnflow.cluster_labels`) if given. Returns the axes.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> ax = plot.tokens_on_circle(np.array([[1.0, 0.0], [0.0, 1.0]]), title="t = 0")
        >>> ax.get_title()
        't = 0'
    """
    x = np.asarray(check_real_values(x, "x"))
    if x.ndim != 2 or x.shape[1] != 2:
        raise ValueError(f"x: expected tokens on the circle, shape (n, 2), got {x.shape}")
    fig, ax = plt.subplots(figsize=(3, 3)) if ax is None else (ax.figure, ax)
    angle = np.linspace(0, 2 * np.pi, 256)
    ax.plot(np.cos(angle), np.sin(angle), color="0.75", lw=1, zorder=0)
    ax.scatter(
        x[:, 0],
        x[:, 1],
        s=size,
        c=_token_colors(labels, len(x)),
        edgecolors="k",
        linewidths=0.4,
        zorder=2,
    )
    ax.set(
        xlim=(-1.15, 1.15), ylim=(-1.15, 1.15), aspect="equal", xticks=[], yticks=[], title=title
    )
    for spine in ax.spines.values():
        spine.set_visible(False)
    finish(fig, path)
    return ax


def tokens_on_sphere(
    x, *, labels=None, ax=None, path=None, title=None, size=22, elev=20.0, azim=35.0
):
    """Scatter tokens x: (n, 3) on the unit sphere S² over a light wireframe (a 3-d axes is
    created if ``ax`` is None). Returns the axes.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> ax = plot.tokens_on_sphere(np.eye(3))
        >>> ax.name
        '3d'
    """
    x = np.asarray(check_real_values(x, "x"))
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"x: expected tokens on the sphere S², shape (n, 3), got {x.shape}")
    x = np.asarray(check_tokens(x, "x"))
    if ax is None:
        fig = plt.figure(figsize=(3.4, 3.4))
        ax = fig.add_subplot(projection="3d")
    fig = ax.figure
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.5)
    ax.scatter(
        x[:, 0],
        x[:, 1],
        x[:, 2],
        s=size,
        c=_token_colors(labels, len(x)),
        edgecolors="k",
        linewidths=0.3,
        depthshade=True,
    )
    ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1), xticks=[], yticks=[], zticks=[], title=title)
    ax.set_box_aspect((1, 1, 1), zoom=1.25)
    elev, azim = check_finite_scalar(elev, "elev"), check_finite_scalar(azim, "azim")
    ax.view_init(elev=elev, azim=azim)
    ax.set_axis_off()
    finish(fig, path)
    return ax


def hessian_kernel_curves(
    taus,
    values,
    betas,
    tau_stars=None,
    *,
    normalize=True,
    ax=None,
    path=None,
    colors=("m", "c", "C2", "C3"),
):
    """Fig. 6: the kernel g_β(τ) = (cos τ − β sin² τ) e^{β cos τ} of App. B, one curve per β,
    with dashed lines at ±τ*_β.

    Args:
        taus: (m,) angles.
        values: (len(betas), m) values of g_β.
        betas: the β of each row.
        tau_stars: optional τ*_β per β (:func:`attnflow.theory.tau_star`).
        normalize: plot g_β(τ) e^{−β} (so g(0) = 1 for every β; zeros and signs unchanged).

    Returns the axes.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> t = np.linspace(-np.pi, np.pi, 5)
        >>> g = np.stack([(np.cos(t) - b * np.sin(t) ** 2) * np.exp(b * np.cos(t)) for b in (2, 6)])
        >>> len(plot.hessian_kernel_curves(t, g, [2.0, 6.0]).get_lines())
        3
    """
    normalize = check_bool(normalize, "normalize")
    taus, values = np.asarray(taus), np.atleast_2d(np.asarray(values))
    if values.shape != (len(betas), len(taus)):
        raise ValueError(
            f"values: expected shape (len(betas), len(taus)) = "
            f"{(len(betas), len(taus))}, got {values.shape}"
        )
    fig, ax = plt.subplots(figsize=(5.5, 3.4)) if ax is None else (ax.figure, ax)
    ax.axhline(0, color="0.6", lw=0.8)
    for k, beta in enumerate(betas):
        color = colors[k % len(colors)]
        scale = np.exp(-beta) if normalize else 1.0
        ax.plot(taus, values[k] * scale, color=color, lw=2, label=rf"$\beta = {beta:g}$")
        if tau_stars is not None:
            for sign in (-1, 1):
                ax.axvline(sign * tau_stars[k], color=color, ls="--", lw=1)
    ax.set(
        xlabel=r"$\tau$",
        ylabel=r"$g_\beta(\tau)\, e^{-\beta}$" if normalize else r"$g_\beta(\tau)$",
        xlim=(taus[0], taus[-1]),
    )
    ax.legend(frameon=False)
    finish(fig, path)
    return ax
