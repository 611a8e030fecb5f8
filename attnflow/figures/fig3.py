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
import time

import numpy as np

PRESETS = {
    "quick": {
        "ds": [2, 16],
        "n": 6,
        "delta": 1e-3,
        "beta_range": [0.1, 9.0],
        "n_betas": 6,
        "t_max": 30.0,
        "n_ts": 9,
        "realizations": 8,
        "chunk_size": 4,
        "beta_block": 2,
        "rtol": 1e-5,
        "atol": 1e-7,
        "dtype": "float64",
    },
    "default": {
        "ds": [32],
        "n": 32,
        "delta": 1e-3,
        "beta_range": [0.1, 9.0],
        "n_betas": 90,
        "t_max": 30.0,
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
        "delta": 1e-3,
        "beta_range": [0.1, 9.0],
        "n_betas": 90,
        "t_max": 30.0,
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


def compute(params: dict, seed: int = 0, progress: bool = True) -> dict:
    """P for every d (len(ds), n_betas, n_ts), the grids, Γ_∞,δ and per-panel seconds."""
    import jax
    import jax.numpy as jnp
    import jax.random as jr

    import attnflow as af

    betas, ts = grids(params)
    panels, seconds = [], []
    # The presets' call sizes are for a CPU; an accelerator gets the engine's own layout.
    layout = {}
    if jax.default_backend() == "cpu":
        layout = dict(chunk_size=params["chunk_size"], beta_block=params["beta_block"])
    for d in params["ds"]:
        start = time.perf_counter()
        P = af.phase_diagram(
            jr.fold_in(jr.key(seed), d),
            n=params["n"],
            d=d,
            betas=betas,
            ts=ts,
            realizations=params["realizations"],
            delta=params["delta"],
            **layout,
            rtol=params["rtol"],
            atol=params["atol"],
            dtype=jnp.dtype(params["dtype"]),
            progress=progress,
        )
        panels.append(np.asarray(P))
        seconds.append(time.perf_counter() - start)
    curve_t, curve_beta = curve(params)
    return {
        "P": np.stack(panels),
        "beta": betas,
        "t": ts,
        "d": np.asarray(params["ds"]),
        "curve_t": curve_t,
        "curve_beta": curve_beta,
        "seconds": np.asarray(seconds),
    }


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
    from attnflow.figures._output import write_outputs

    use_all_cores()
    start = time.perf_counter()
    data = compute(params, seed)
    computed = time.perf_counter()
    fig = plot_panels(data, params)
    timings = {
        "compute": computed - start,
        "plot": time.perf_counter() - computed,
        "panels": dict(zip(panel_keys(data), map(float, data["seconds"]), strict=True)),
    }
    return write_outputs(out, stem, fig, data, {**params, "seed": seed}, timings)
