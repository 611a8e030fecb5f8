"""Fig. 3: the phase diagram of (SA) with Q = K = V = I,

    P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ)  on  β ∈ [0.1, 9] × t ∈ [0, 30],

for n = 32 tokens drawn uniformly on S^{d−1}, d ∈ {2, 8, 32, 128, 512, 1024}, δ = 10⁻³, 2¹⁰
realisations (``full`` preset). The statistic is the clustered fraction over ordered pairs
averaged over realisations (:func:`attnflow.phase_diagram`), with the same initial tokens for
every β. Each panel carries the exact curve Γ_∞,δ = {t = t*(β)} of (6.12) in closed form
(:func:`attnflow.theory.clustering_time`) for the same n — the published figure's curve matches
neither n = 32 nor n = 128 (cause unknown: docs/maths.md §9, §11.7). Solves are adaptive DP5(4)
with error control (float32, rtol = 1e-3: |ΔP| ≤ 0.003 against a tight reference,
docs/benchmarks.md#bench-phase), not the authors' Euler steps of 0.1, which cluster 5–10%
late (|ΔP| up to 0.4).

Presets: ``quick`` (seconds, two small panels), ``default`` (one panel, d = 32,
90 β × 100 t × 512 realisations: about 20 s on two cores) and ``full`` (paper resolution,
six panels: about 2 minutes on two cores).
"""

import os
import pathlib
import string
import sys
import time

import numpy as np

# δ and the (β, t) ranges of paper Fig. 3, shared by the phase diagrams drawn on its axes.
FIG3_AXES = {"delta": 1e-3, "beta_range": [0.1, 9.0], "t_max": 30.0}
# The small presets' solver: float64 at tolerances that leave P exact to far below a pixel.
FLOAT64_TOLERANCES = {"rtol": 1e-5, "atol": 1e-7, "dtype": "float64"}

PRESETS = {
    "quick": {
        "ds": [2, 16],
        "n": 6,
        **FIG3_AXES,
        "n_betas": 6,
        "n_ts": 9,
        "realizations": 8,
        "chunk_size": 4,
        "beta_block": 2,
        **FLOAT64_TOLERANCES,
    },
    "default": {
        "ds": [32],
        "n": 32,
        **FIG3_AXES,
        "n_betas": 90,
        "n_ts": 100,
        "realizations": 512,
        "chunk_size": 128,
        "beta_block": 8,
        "rtol": 1e-3,
        "atol": 1e-6,
        "dtype": "float32",
    },
    "full": {
        "ds": [2, 8, 32, 128, 512, 1024],
        "n": 32,
        **FIG3_AXES,
        "n_betas": 90,
        "n_ts": 200,
        "realizations": 1024,
        "chunk_size": 128,
        "beta_block": 8,
        "rtol": 1e-3,
        "atol": 1e-6,
        "dtype": "float32",
    },
}


def use_all_cores():
    """Give JAX one CPU device per core so that chunks run in parallel; only possible before
    JAX initialises its backends (otherwise the current devices are kept)."""
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", max(1, os.cpu_count() or 1))
    except RuntimeError:
        pass


def grids(params):
    betas = np.linspace(*params["beta_range"], params["n_betas"])
    ts = np.linspace(0.0, params["t_max"], params["n_ts"])
    return betas, ts


def curve(params, points: int = 400):
    """Γ_∞,δ as arrays (t*(β), β) on a fine β grid over the plotted range."""
    import attnflow.theory as theory

    beta = np.linspace(0.0, params["beta_range"][1], points)
    t = np.asarray(theory.clustering_time(beta, params["n"], params["delta"]))
    return t, beta


def phase_panels(panels, params: dict, progress: bool, **common):
    """One timed :func:`attnflow.phase_diagram` per panel: ``panels`` yields (key, options);
    every panel shares the preset's grids, n, realizations, tolerances and dtype, and
    ``common``. Returns (the stacked panels, the seconds of each)."""
    import jax.numpy as jnp

    import attnflow as af

    betas, ts = grids(params)
    values, seconds = [], []
    panels = list(panels)
    for index, (key, options) in enumerate(panels):
        if progress and len(panels) > 1:
            label = ", ".join(f"{name} = {value}" for name, value in options.items())
            print(f"panel {index + 1}/{len(panels)}: {label}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        P = af.phase_diagram(
            key,
            n=params["n"],
            betas=betas,
            ts=ts,
            realizations=params["realizations"],
            rtol=params["rtol"],
            atol=params["atol"],
            dtype=jnp.dtype(params["dtype"]),
            progress=progress,
            **common,
            **options,
        )
        values.append(np.asarray(P))
        seconds.append(time.perf_counter() - start)
    return np.stack(values), np.asarray(seconds)


def with_curve(data: dict, params: dict) -> dict:
    """``data`` with Γ_∞,δ (``curve_t``, ``curve_beta``) and the grids (``beta``, ``t``)."""
    betas, ts = grids(params)
    curve_t, curve_beta = curve(params)
    return {**data, "beta": betas, "t": ts, "curve_t": curve_t, "curve_beta": curve_beta}


def compute(params: dict, seed: int = 0, progress: bool = True) -> dict:
    """P for every d (len(ds), n_betas, n_ts), the grids, Γ_∞,δ and per-panel seconds."""
    import jax
    import jax.random as jr

    # The presets' call sizes are for a CPU; an accelerator gets the engine's own layout.
    layout = {}
    if jax.default_backend() == "cpu":
        layout = dict(chunk_size=params["chunk_size"], beta_block=params["beta_block"])
    panels = ((jr.fold_in(jr.key(seed), d), dict(d=d)) for d in params["ds"])
    P, seconds = phase_panels(panels, params, progress, delta=params["delta"], **layout)
    return with_curve({"P": P, "d": np.asarray(params["ds"]), "seconds": seconds}, params)


def heatmap_grid(data: dict, titles, *, cols: int, width: float, suptitle: str, curve=None):
    """One ``phase_diagram_heatmap`` per entry of ``data["P"]`` on a grid of ``cols`` columns,
    panel ``i`` titled ``({letter}) titles[i]``, colour bars on the last column; returns the
    figure."""
    from attnflow import plot
    from attnflow.plot._common import plt

    k = len(titles)
    cols = min(cols, k)
    rows = -(-k // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols, 3.4 * rows), squeeze=False, constrained_layout=True
    )
    for i, title in enumerate(titles):
        plot.phase_diagram_heatmap(
            data["P"][i],
            data["beta"],
            data["t"],
            curve=curve,
            ax=axes.flat[i],
            title=f"({string.ascii_lowercase[i]}) {title}",
            colorbar=(i % cols == cols - 1) or i == k - 1,
        )
    for ax in axes.flat[k:]:
        ax.set_visible(False)
    fig.suptitle(suptitle)
    return fig


def plot_panels(data: dict, params: dict):
    """The grid of heatmaps with Γ_∞,δ; returns the figure."""
    return heatmap_grid(
        data,
        [f"d = {int(d)}" for d in data["d"]],
        cols=3,
        width=4.4,
        curve=(data["curve_t"], data["curve_beta"]),
        suptitle=f"Fig. 3 (SA): n = {params['n']}, δ = {params['delta']:g}, "
        f"{params['realizations']} realisations; black: exact Γ∞,δ",
    )


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``fig3.{png,npz,json}``."""
    return make_timed(
        "fig3",
        compute,
        plot_panels,
        params,
        out,
        seed,
        lambda data: [str(int(d)) for d in data["d"]],
    )


def make_timed(stem, compute, plot_panels, params, out, seed, panel_keys):
    """Compute and plot a figure, timing both, and write ``<stem>.{png,npz,json}``.

    ``panel_keys(data)`` names the panels whose compute times are ``data["seconds"]``.
    """
    from attnflow.figures._output import compute_plot_write

    use_all_cores()
    return compute_plot_write(
        out,
        stem,
        compute,
        plot_panels,
        params,
        seed,
        timings=lambda data: {
            "panels": dict(zip(panel_keys(data), map(float, data["seconds"]), strict=True))
        },
    )
