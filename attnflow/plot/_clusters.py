"""Pictures of clustering: cluster counts over time and across seeds, the energy staircase of
dynamic metastability, and Fig. 1-style histograms of pairwise inner products."""

import numpy as np
from matplotlib.ticker import MaxNLocator

from .._check import check_bool, check_curve, check_real_values
from ._common import finish, plt


def cluster_count_curve(
    ts, counts, *, ax=None, path=None, label=None, color=None, title=None, logx=False
):
    """Number of clusters against time. ``counts`` is (T,) for one run, or (seeds, T): then the
    median is drawn with the 10–90% band across seeds. Returns the axes.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> ax = plot.cluster_count_curve(np.arange(3.0), np.array([[5, 3, 2], [4, 2, 2]]))
        >>> ax.get_ylabel()
        'clusters'
    """
    logx = check_bool(logx, "logx")
    ts, counts = np.asarray(ts), np.asarray(counts)
    if counts.shape[-1] != ts.shape[0] or counts.ndim not in (1, 2):
        raise ValueError(
            f"counts: expected shape (T,) or (seeds, T) with T = {ts.shape[0]}, got {counts.shape}"
        )
    fig, ax = plt.subplots(figsize=(4.5, 3)) if ax is None else (ax.figure, ax)
    if counts.ndim == 1:
        ax.step(ts, counts, where="post", lw=2, label=label, color=color)
    else:
        lo, mid, hi = np.quantile(counts, [0.1, 0.5, 0.9], axis=0)
        (line,) = ax.step(ts, mid, where="post", lw=2, label=label, color=color)
        ax.fill_between(ts, lo, hi, step="post", alpha=0.25, color=line.get_color(), lw=0)
    ax.set(xlabel="t", ylabel="clusters", title=title)
    if logx:
        ax.set_xscale("log")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    if label is not None:
        ax.legend(frameon=False)
    finish(fig, path)
    return ax


def cluster_count_histogram(counts, *, labels=None, ax=None, path=None, title=None):
    """Distribution of the number of clusters across seeds (metastability): one bar series per
    row of ``counts`` (a list of 1-d integer arrays, e.g. one per β). Returns the axes.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> ax = plot.cluster_count_histogram([np.array([2, 2, 3]), np.array([3, 4, 3])],
        ...                                   labels=["β = 4", "β = 9"])
        >>> ax.get_xlabel()
        'clusters'
    """
    rows = [np.asarray(c).ravel().astype(int) for c in counts]
    if labels is not None and len(labels) != len(rows):
        raise ValueError(f"labels: expected {len(rows)} labels, got {len(labels)}")
    fig, ax = plt.subplots(figsize=(4.5, 3)) if ax is None else (ax.figure, ax)
    lo = min(int(r.min()) for r in rows)
    hi = max(int(r.max()) for r in rows)
    values = np.arange(lo, hi + 1)
    width = 0.8 / len(rows)
    for k, row in enumerate(rows):
        freq = np.array([(row == v).mean() for v in values])
        ax.bar(
            values + (k - (len(rows) - 1) / 2) * width,
            freq,
            width=width,
            label=None if labels is None else labels[k],
        )
    ax.set(xlabel="clusters", ylabel="fraction of seeds", xticks=values, title=title)
    if labels is not None:
        ax.legend(frameon=False)
    finish(fig, path)
    return ax


def energy_staircase(
    ts,
    energy,
    *,
    levels=None,
    merge_times=None,
    ax=None,
    path=None,
    title=None,
    ylabel=r"$2\beta e^{-\beta} E_\beta$",
):
    """The normalised energy against log time, with the plateau levels Σ_q m_q² (``levels``:
    (T,), drawn dashed) and vertical lines at the cluster merges (``merge_times``). Times ≤ 0
    are not drawn on the log axis. Returns the axes.

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> ts = np.logspace(-2, 2, 5)
        >>> ax = plot.energy_staircase(ts, [0.2, 0.3, 0.5, 0.5, 1.0], merge_times=[1.0])
        >>> ax.get_xscale()
        'log'
    """
    ts, energy, levels = check_curve(ts, "ts", energy=energy, levels=levels)
    if merge_times is not None:
        merge_times = np.ravel(check_real_values(merge_times, "merge_times"))
    keep = ts > 0
    fig, ax = plt.subplots(figsize=(6, 3.4)) if ax is None else (ax.figure, ax)
    ax.plot(ts[keep], energy[keep], lw=2, label="energy")
    if levels is not None:
        ax.step(
            ts[keep],
            levels[keep],
            where="post",
            ls="--",
            color="k",
            lw=1,
            label="Σ m_q² of the clusters",
        )
    for t in [] if merge_times is None else merge_times:
        ax.axvline(t, color="C3", lw=0.7, alpha=0.6)
    ax.set(xscale="log", xlabel="t", ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, loc="upper left")
    finish(fig, path)
    return ax


def inner_product_histograms(hist, edges, *, labels=None, axes=None, path=None, color="C0"):
    """Fig. 1 style: one bar histogram of pairwise inner products per row of ``hist``
    ((k, bins), e.g. one per layer, from :func:`attnflow.inner_product_histogram`), side by side.
    Returns the axes (an array of k).

    Example:
        >>> import numpy as np
        >>> from attnflow import plot
        >>> axes = plot.inner_product_histograms(np.ones((2, 4)) / 2, np.linspace(-1, 1, 5),
        ...                                      labels=["layer 0", "layer 6"])
        >>> len(axes)
        2
    """
    hist, edges = np.atleast_2d(np.asarray(hist)), np.asarray(edges)
    if hist.ndim != 2 or hist.shape[1] != len(edges) - 1:
        raise ValueError(
            f"hist: expected shape (k, bins) with bins = len(edges) - 1 = "
            f"{len(edges) - 1}, got {hist.shape}"
        )
    k = hist.shape[0]
    if axes is None:
        fig, axes = plt.subplots(1, k, figsize=(2.4 * k, 2.4), sharey=True, squeeze=False)
        axes = axes[0]
    fig = axes[0].figure
    for j in range(k):
        axes[j].bar(edges[:-1], hist[j], width=np.diff(edges), align="edge", color=color)
        axes[j].set(
            xlabel="⟨x_i, x_j⟩",
            xlim=(edges[0], edges[-1]),
            title=None if labels is None else labels[j],
        )
    finish(fig, path)
    return axes
