"""The paper's figures. Each module ``attnflow/figures/<name>.py`` defines

- ``PRESETS``: dict mapping ``"quick"`` (test-sized), ``"default"`` (laptop, ~1 min) and
  ``"full"`` (paper resolution) to a dict of parameters;
- ``make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]``: compute, plot and
  write the PNG plus its data via :func:`attnflow.figures._output.write_outputs`.

- optionally ``check_requirements(params)``: raise ``ModelNotInstalledError`` (with the pip
  command) before any work when an optional dependency or model is missing.

Register the module in ``FIGURES`` and a one-line description in ``DESCRIPTIONS`` below.
"""

FIGURES: dict[str, str] = {
    "fig3": "attnflow.figures.fig3",
    "fig5": "attnflow.figures.fig5",
    "fig4": "attnflow.figures.fig4",
    "fig6": "attnflow.figures.fig6",
    "staircase": "attnflow.figures.staircase",
    "movie": "attnflow.figures.movie",
    "limit-geometries": "attnflow.figures.limit_geometries",
    "homogenized": "attnflow.figures.homogenized",
    "lost-in-the-middle": "attnflow.figures.lost_in_the_middle",
    "metastable-clusters": "attnflow.figures.metastable_clusters",
    "fig1": "attnflow.figures.fig1",
    "fig1-flow": "attnflow.figures.fig1_flow",
    "measure-landscape": "attnflow.figures.measure_landscape",
    "phase-families": "attnflow.figures.phase_families",
    "normalization": "attnflow.figures.normalization",
    "meanfield": "attnflow.figures.meanfield",
    "noisy-phase": "attnflow.figures.noisy_phase",
}

# One line per figure for ``attnflow figure --help`` (no import of the modules: --help stays fast).
DESCRIPTIONS: dict[str, str] = {
    "fig1": "a trained Transformer's (MiniLM) hidden states cluster layer by layer "
    "(needs the MiniLM weights)",
    "fig1-flow": "does the attention flow with trained weights reproduce MiniLM's hidden states?",
    "fig3": "phase diagram P(<x1, x2> >= 1 - delta) of (SA) over (t, beta), Q = K = V = I",
    "fig4": "(SA) on the circle at beta = 4 and 9: tokens over time and the cluster count",
    "fig5": "phase diagrams of (SA) with random Q, K, V (the four ensembles of the caption)",
    "fig6": "the kernel g of the torus Hessian (App. B) and its root",
    "homogenized": "representation collapse in the homogenised limit of deep random attention",
    "limit-geometries": "limit geometries by the spectrum of V (GLPR23 Table 1)",
    "lost-in-the-middle": "the U-shaped retrieval profile of causal ALiBi attention",
    "meanfield": "the first metastable plateau: the density PDE against particles, bump counts",
    "measure-landscape": "maximisers and minimisers of E(mu) over measures on the circle",
    "metastable-clusters": "cluster count of the first plateau against KDE modes of the start",
    "movie": "a movie of tokens clustering under (SA) on the circle or the sphere",
    "noisy-phase": "noisy attention in (beta, kappa): Fokker-Planck order parameter from two "
    "starts (hysteresis), theory curves, bump counts",
    "normalization": "survey Fig. 4: normalisation schemes as speed regulation",
    "phase-families": "Fig. 3-style phase diagrams for other attention families",
    "staircase": "the energy staircase of (USA) on the circle at large beta (metastability)",
}
