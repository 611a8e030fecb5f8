"""The paper's figures. Each module ``attnflow/figures/<name>.py`` defines

- ``PRESETS``: dict mapping ``"quick"`` (test-sized), ``"default"`` (laptop, ~1 min) and
  ``"full"`` (paper resolution) to a dict of parameters;
- ``make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]``: compute, plot and
  write the PNG plus its data via :func:`attnflow.figures._output.write_outputs`.

Register the module in ``FIGURES`` below.
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
