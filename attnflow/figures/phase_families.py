"""Fig. 3-style phase diagrams for other attention families and another statistic.

Four panels on the (t, β) axes of paper Fig. 3 (arXiv:2312.10794), uniform initial tokens,
the same tokens for every β (common random numbers):

    (a) P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) for (SA), one head, Q = K = V = I (Fig. 3 itself);
    (b) the same for multi-head attention, paper (2.7): H heads with their own QᵀK
        (GOE, drawn per system and head, :class:`attnflow.AttentionEnsemble`) and V = I;
    (c) the same for causal attention (token i attends to j ≤ i), Q = K = V = I;
    (d) the mean number of clusters (connected components of ⟨x_i, x_j⟩ ≥ 1 − δ) for (a).

The curve Γ_∞,δ = {t = t*(β)} of (6.12) is drawn on (a) and (d). Panel (a) runs on the reduced
log-distance engine, the others on the general engine of :func:`attnflow.phase_diagram` (one
:func:`attnflow.solve` per system).
"""

import pathlib

from attnflow.figures.fig3 import (
    FIG3_AXES,
    FLOAT64_TOLERANCES,
    make_timed,
    phase_panels,
    with_curve,
)

PRESETS = {
    "quick": {
        "d": 4,
        "n": 4,
        "heads": 2,
        **FIG3_AXES,
        "n_betas": 3,
        "n_ts": 7,
        "realizations": 3,
        "chunk_size": 3,
        **FLOAT64_TOLERANCES,
    },
    "default": {
        "d": 32,
        "n": 32,
        "heads": 4,
        **FIG3_AXES,
        "n_betas": 12,
        "n_ts": 61,
        "realizations": 8,
        "chunk_size": 8,
        "rtol": 1e-4,
        "atol": 1e-6,
        "dtype": "float64",
    },
    "full": {
        "d": 32,
        "n": 32,
        "heads": 4,
        **FIG3_AXES,
        "n_betas": 90,
        "n_ts": 200,
        "realizations": 256,
        "chunk_size": 64,
        "rtol": 1e-3,
        "atol": 1e-6,
        "dtype": "float32",
    },
}

PANELS = ("single", "multihead", "causal", "clusters")


def compute(params: dict, seed: int = 0, progress: bool = True) -> dict:
    """The four panels (4, n_betas, n_ts), the grids, Γ_∞,δ and per-panel seconds."""
    import jax.random as jr

    import attnflow as af

    delta = params["delta"]
    runs = {
        "single": dict(delta=delta),
        "multihead": dict(
            delta=delta,
            ensemble=af.AttentionEnsemble("goe", "identity"),
            family=af.FieldFamily(heads=params["heads"]),
        ),
        "causal": dict(delta=delta, family=af.FieldFamily(causal=True)),
        "clusters": dict(statistic=af.ClusterCount(delta)),
    }
    key = jr.key(seed)
    panels = ((key, runs[name]) for name in PANELS)
    values, seconds = phase_panels(
        panels, params, progress, d=params["d"], chunk_size=params["chunk_size"]
    )
    return with_curve({"values": values, "seconds": seconds}, params)


def plot_panels(data: dict, params: dict):
    """A 2 × 2 grid of heatmaps; returns the figure."""
    from attnflow import plot
    from attnflow.plot._common import plt

    n = params["n"]
    fig, axes = plt.subplots(2, 2, figsize=(9.6, 7.0), constrained_layout=True)
    titles = {
        "single": "(a) one head (Fig. 3)",
        "multihead": f"(b) {params['heads']} heads, QᵀK GOE, V = I",
        "causal": "(c) causal, one head",
        "clusters": "(d) mean number of clusters, one head",
    }
    line = (data["curve_t"], data["curve_beta"])
    for ax, name, values in zip(axes.flat, PANELS, data["values"], strict=True):
        if name == "clusters":
            # Reversed colours: one cluster is red, as P = 1 is on the other panels.
            mesh = ax.pcolormesh(
                data["t"], data["beta"], values, cmap="RdBu", vmin=1, vmax=n,
                shading="nearest", rasterized=True,
            )  # fmt: skip
            ax.plot(*line, color="k", lw=1.6, label=r"$\Gamma_{\infty,\delta}$")
            ax.legend(loc="upper right", fontsize=8, framealpha=0.8)
            ax.set(
                xlim=(data["t"].min(), data["t"].max()),
                ylim=(data["beta"].min(), data["beta"].max()),
                xlabel="t",
                ylabel=r"$\beta$",
                title=titles[name],
            )
            fig.colorbar(mesh, ax=ax, label="clusters")
        else:
            plot.phase_diagram_heatmap(
                values,
                data["beta"],
                data["t"],
                ax=ax,
                curve=line if name == "single" else None,
                title=titles[name],
                colorbar=name != "single",
            )
    fig.suptitle(
        f"Phase diagrams of attention families, d = {params['d']}, n = {n}, "
        f"δ = {params['delta']:g}, {params['realizations']} realisations"
    )
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``phase-families.{png,npz,json}``."""
    return make_timed(
        "phase-families", compute, plot_panels, params, out, seed, lambda data: PANELS
    )
