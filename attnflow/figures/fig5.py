"""Fig. 5: phase diagrams P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) of (SA) with random Q, K, V,
d = 128, n = 32, on the axes of Fig. 3, for the four ensembles of the caption
(:data:`attnflow.FIG5_ENSEMBLES`, conventions in :class:`attnflow.AttentionEnsemble`):

    (a) Q, K, V real Ginibre (V = G/√d; the authors' code has no Ginibre V, docs/maths.md §9);
    (b) QᵀK Wigner (GOE), V = GGᵀ/√d ⪰ 0 (Wishart);
    (c) Q, K Ginibre, V = QᵀK/√d;
    (d) QᵀK Wigner, V = QᵀK/√(d+1).

Each system draws its own matrices, kept for every β and fixed in time (common random numbers).
With V ≠ I the flow leaves the span of the initial tokens, so these run in R^d: the ``full``
preset (90 β, 200 times, 2¹⁰ realisations per panel; float32, rtol 1e-4) costs hours on a
2-core CPU (estimated 2.8 h from a 32-realisation × 9-β sample, 75% of it panel (b), whose
Wishart V has eigenvalues up to about 4√d and so a fast time scale; float64 at rtol 1e-5 would
take about 3× longer for the same accuracy, max |ΔP| ≤ 0.01 against a float64 rtol 1e-8
reference on that sample); ``default`` is a coarse laptop version (float64, about 30 s) and
``quick`` a test-sized one.
"""

import pathlib

from attnflow.figures.fig3 import (
    FIG3_AXES,
    FLOAT64_TOLERANCES,
    grids,
    heatmap_grid,
    make_timed,
    phase_panels,
)

PRESETS = {
    "quick": {
        "panels": ["a", "b", "c", "d"],
        "d": 6,
        "n": 4,
        **FIG3_AXES,
        "n_betas": 4,
        "n_ts": 9,
        "realizations": 4,
        "shared_weights": False,
        "chunk_size": 4,
        "beta_block": 2,
        **FLOAT64_TOLERANCES,
    },
    "default": {
        "panels": ["a", "b", "c", "d"],
        "d": 128,
        "n": 32,
        **FIG3_AXES,
        "n_betas": 10,
        "n_ts": 60,
        "realizations": 8,
        "shared_weights": False,
        "chunk_size": 8,
        "beta_block": 5,
        **FLOAT64_TOLERANCES,
    },
    "full": {
        "panels": ["a", "b", "c", "d"],
        "d": 128,
        "n": 32,
        **FIG3_AXES,
        "n_betas": 90,
        "n_ts": 200,
        "realizations": 1024,
        "shared_weights": False,
        "chunk_size": 64,
        "beta_block": 8,
        "rtol": 1e-4,
        "atol": 1e-6,
        "dtype": "float32",
    },
}

CAPTIONS = {
    "a": "Q, K, V Ginibre",
    "b": "QᵀK Wigner, V Wishart",
    "c": "Q, K Ginibre, V = QᵀK",
    "d": "QᵀK Wigner, V = QᵀK",
}


def compute(params: dict, seed: int = 0, progress: bool = True) -> dict:
    """P for every panel (len(panels), n_betas, n_ts), the grids and per-panel seconds."""
    import jax.random as jr

    import attnflow as af

    panels = (
        (jr.fold_in(jr.key(seed), i), dict(ensemble=af.FIG5_ENSEMBLES[name]))
        for i, name in enumerate(params["panels"])
    )
    P, seconds = phase_panels(
        panels,
        params,
        progress,
        d=params["d"],
        delta=params["delta"],
        shared_weights=params["shared_weights"],
        chunk_size=params["chunk_size"],
        beta_block=params["beta_block"],
    )
    betas, ts = grids(params)
    return {"P": P, "beta": betas, "t": ts, "seconds": seconds}


def plot_panels(data: dict, params: dict):
    """A 2 × 2 grid of heatmaps; returns the figure."""
    return heatmap_grid(
        data,
        [CAPTIONS[name] for name in params["panels"]],
        cols=2,
        width=4.6,
        suptitle=f"Fig. 5: (SA) with random Q, K, V, d = {params['d']}, n = {params['n']}, "
        f"{params['realizations']} realisations",
    )


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``fig5.{png,npz,json}``."""
    return make_timed(
        "fig5", compute, plot_panels, params, out, seed, lambda data: params["panels"]
    )
