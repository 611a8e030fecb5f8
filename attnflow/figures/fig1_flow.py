"""Fig. 1, flow panel (``attnflow figure fig1-flow``): does the attention flow with trained
weights reproduce the trained Transformer's hidden states, layer by layer?

From the model's own embeddings x_i(0) = h_i^(0)/|h_i^(0)| (all-MiniLM-L6-v2, the shipped
paragraph, see :mod:`attnflow.figures.fig1`), attnflow simulates L = 6 layers with the trained
attention fields of :func:`attnflow.pretrained.attention_field` (per-head Q_h, K_h; output
projection folded into V_h; biases, feed-forward blocks and LayerNorm centring/gains dropped),
one unit of time per layer, in two ways:

- ``layers``: :func:`attnflow.layers` with step 1, the discrete post-LN Transformer
  x_{k+1} = normalize(x_k + attention update of layer k): the real layer's residual update with
  LayerNorm replaced by x ↦ x/|x| (the update is Σ_h Σ_j a^h_ij V_h x_j, or its tangent part,
  as :func:`attnflow.layers` defines it for this field: the two forms differ, by up to 0.17 in
  the final mean cosine of the fixed rescaled field at 128 tokens, but the conclusions drawn in
  ``notebooks/fig1.py`` hold for both);
- ``solve``: :func:`attnflow.solve`, the continuous flow (2.7) on [0, L], saved at t = 0 … L.

Four fields: the stack in sequence (:func:`attnflow.pretrained.attention_stack`, a
``PiecewiseConstant`` whose piece k is layer k) and one fixed layer (``fixed_layer``, applied for
all L units of time), each with β = 1/√d_h (the model's logit scale for unit tokens) and with
β_k = r_k²/√d_h, where r_k² is the mean squared norm of the real hidden states entering layer k
(the logit scale the trained layer sees on its tokens of norm r_k ≈ 10–13; biases aside).

Each simulated layer is compared with the real normalised hidden states of the same layer:
per-token agreement mean_i ⟨x_i^sim, x_i^real⟩, the squared MMD with kernel e^{κ(⟨x,y⟩−1)}
(:func:`attnflow.measures.squared_mmd`), the sliced 2-Wasserstein distance
(:func:`attnflow.measures.sliced_wasserstein`), mean cosine, cluster counts and histograms. The
baseline "identity" keeps the embeddings unchanged (x^sim(k) = x(0)): a simulation that does
not beat it has not explained the layer's effect.
"""

import pathlib

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures import fig1

PRESETS = {
    "quick": {
        "model": "all-MiniLM-L6-v2",
        "max_length": 24,
        "fixed_layer": 0,
        "rtol": 1e-4,
        "atol": 1e-6,
        "kappa": 1.0,
        "num_projections": 64,
        "bins": 20,
        "deltas": [0.05, 0.1, 0.2],
    },
    "default": {
        "model": "all-MiniLM-L6-v2",
        "max_length": 128,
        "fixed_layer": 0,
        "rtol": 1e-5,
        "atol": 1e-6,
        "kappa": 1.0,
        "num_projections": 256,
        "bins": 40,
        "deltas": [0.05, 0.1, 0.2],
    },
    "full": {
        "model": "all-MiniLM-L6-v2",
        "max_length": 512,
        "fixed_layer": 0,
        "rtol": 1e-5,
        "atol": 1e-6,
        "kappa": 1.0,
        "num_projections": 1024,
        "bins": 60,
        "deltas": [0.05, 0.1, 0.2],
    },
}

VARIANTS = ("stack", "fixed", "stack_rescaled", "fixed_rescaled")
METHODS = ("layers", "solve")


@eqx.filter_jit
def _simulate(field, x0, num_layers: int, rtol: float, atol: float):
    discrete = af.layers(field, x0, num_layers, 1.0)
    ts = jnp.arange(num_layers + 1, dtype=x0.dtype)
    continuous = af.solve(field, x0, float(num_layers), ts=ts, rtol=rtol, atol=atol).ys
    return discrete, continuous


def distances(key, sim, real, *, kappa: float, num_projections: int) -> dict:
    """Layer-by-layer ``agreement`` mean_i ⟨y_i, x_i⟩, ``mmd`` MMD²_κ and ``sw`` sliced W₂
    between simulated states ``sim`` and real states ``real`` (both (L + 1, n, d), unit rows):
    :func:`attnflow.pretrained.layer_distances`."""
    from attnflow import pretrained

    values = pretrained.layer_distances(
        key, jnp.asarray(sim), jnp.asarray(real), float(kappa), int(num_projections)
    )
    agreement, mmd, sw = (np.asarray(v) for v in values)
    return {"agreement": agreement, "mmd": mmd, "sw": sw}


def fields(model, params: dict, real_states):
    """The four fields of the module docstring, each a ``PiecewiseConstant`` of L pieces (so
    that one compiled simulation serves them all)."""
    from attnflow import pretrained

    num_layers = model.config.num_hidden_layers
    scale = 1.0 / np.sqrt(model.config.head_dim)
    r2 = np.mean(np.sum(np.asarray(real_states, np.float64) ** 2, axis=-1), axis=-1)
    fixed = [int(params["fixed_layer"])] * num_layers
    return {
        "stack": pretrained.attention_stack(model),
        "fixed": pretrained.attention_stack(model, fixed),
        "stack_rescaled": pretrained.attention_stack(model, beta=list(r2[:num_layers] * scale)),
        "fixed_rescaled": pretrained.attention_stack(
            model, fixed, beta=float(r2[fixed[0]] * scale)
        ),
    }, r2


def compute(model, text: str, params: dict, seed: int = 0) -> dict:
    """Real hidden states, the simulations of every variant and method, and their comparisons."""
    out = model.hidden_states(text, max_length=params["max_length"])
    real = fig1.unit(out.hidden_states)
    num_layers = model.config.num_hidden_layers
    x0 = jnp.asarray(real[0], out.hidden_states.dtype)
    variants, r2 = fields(model, params, out.hidden_states)
    sim = np.zeros((len(VARIANTS), len(METHODS), *real.shape))
    for v, name in enumerate(VARIANTS):
        discrete, continuous = _simulate(
            variants[name], x0, num_layers, float(params["rtol"]), float(params["atol"])
        )
        # Float32 simulations, compared in float64 (renormalised to float64 rounding).
        sim[v, 0], sim[v, 1] = fig1.unit(discrete), fig1.unit(continuous)
    key = jr.key(seed)
    compare = {"kappa": params["kappa"], "num_projections": params["num_projections"]}
    keys = {k: params[k] for k in ("bins", "deltas")}
    data = {
        "real_states": real.astype(np.float32),
        "sim_states": sim.astype(np.float32),
        "tokens": np.asarray(out.tokens),
        "r2": r2,
    }
    stats = fig1.statistics(real, energy_beta=1.0, **keys)
    data |= {"edges": stats["edges"], "real_hist": stats["hist"]}
    data |= {f"real_{k}": stats[k] for k in ("mean_cosine", "clusters")}
    identity = distances(key, np.broadcast_to(real[0], real.shape), real, **compare)
    data |= {f"identity_{k}": v for k, v in identity.items()}
    fields_ = ("agreement", "mmd", "sw", "hist", "mean_cosine", "clusters")
    collected = {k: np.zeros((len(VARIANTS), len(METHODS)), object) for k in fields_}
    for v in range(len(VARIANTS)):
        for m in range(len(METHODS)):
            d = distances(key, sim[v, m], real, **compare)
            s = fig1.statistics(sim[v, m], energy_beta=1.0, **keys)
            for k in fields_:
                collected[k][v, m] = d[k] if k in d else s[k]
    for k, grid in collected.items():
        data[f"sim_{k}"] = np.stack([np.stack(list(row)) for row in grid])
    return data


def plot_figure(data: dict, params: dict):
    """Histogram rows (real, then simulations) over layers; bottom: MMD², agreement and mean
    cosine against layer for every simulation and the identity baseline."""
    from attnflow import plot
    from attnflow.plot._common import plt

    layers = data["real_hist"].shape[0]
    rows = [("real hidden states", data["real_hist"], "C0")]
    shown = [
        ("stack", "layers"),
        ("stack", "solve"),
        ("fixed", "solve"),
        ("stack_rescaled", "layers"),
    ]
    for variant, method in shown:
        v, m = VARIANTS.index(variant), METHODS.index(method)
        rows.append((f"{variant}, {method}", data["sim_hist"][v, m], f"C{len(rows)}"))
    columns = max(layers, 3)
    fig = plt.figure(figsize=(2.0 * columns, 1.9 * (len(rows) + 1.4)), layout="constrained")
    grid = fig.add_gridspec(len(rows) + 1, columns, height_ratios=[1] * len(rows) + [1.4])
    for r, (label, hist, color) in enumerate(rows):
        axes = [fig.add_subplot(grid[r, k]) for k in range(layers)]
        plot.inner_product_histograms(
            hist,
            data["edges"],
            labels=[f"layer {k}" for k in range(layers)] if r == 0 else None,
            axes=axes,
            color=color,
        )
        axes[0].set_ylabel(label, fontsize=8)
    thirds = grid[len(rows), :].subgridspec(1, 3)
    ax_mmd, ax_agree, ax_cos = (fig.add_subplot(thirds[0, k]) for k in range(3))
    k = np.arange(layers)
    for v, variant in enumerate(VARIANTS):
        for m, method in enumerate(METHODS):
            style = dict(color=f"C{v}", ls="-" if method == "layers" else "--", marker=".")
            label = f"{variant} ({method})"
            ax_mmd.plot(k, data["sim_mmd"][v, m], label=label, **style)
            ax_agree.plot(k, data["sim_agreement"][v, m], **style)
            ax_cos.plot(k, data["sim_mean_cosine"][v, m], **style)
    ax_mmd.plot(k, data["identity_mmd"], color="k", lw=2, label="identity (embeddings)")
    ax_agree.plot(k, data["identity_agreement"], color="k", lw=2)
    ax_cos.plot(k, data["real_mean_cosine"], color="k", lw=2, marker="o", label="real")
    ax_mmd.set(xlabel="layer", ylabel=f"MMD² to real (κ = {params['kappa']:g})")
    # Two short lines: one long label ran past the panel into the histogram row above.
    ax_agree.set(xlabel="layer", ylabel="⟨x_i^sim, x_i^real⟩\n(mean over i)")
    ax_cos.set(xlabel="layer", ylabel="mean cosine")
    ax_mmd.legend(frameon=False, fontsize=6)
    ax_cos.legend(frameon=False, fontsize=7)
    for ax in (ax_mmd, ax_agree, ax_cos):
        ax.grid(alpha=0.3)
    return fig


check_requirements = fig1.check_requirements


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Load the model, simulate, compare, plot and write ``fig1-flow.{png,npz,json}``; ``seed``
    draws the sliced-Wasserstein directions."""
    return fig1.load_compute_write(
        out,
        "fig1-flow",
        params,
        seed,
        lambda model, text: compute(model, text, params, seed),
        plot_figure,
        _summarize,
    )


def _summarize(model, data: dict) -> dict:
    def rounded(a):
        return np.round(np.asarray(a, float), 4).tolist()

    summary = {
        "tokens": int(data["real_states"].shape[1]),
        "real_mean_cosine": rounded(data["real_mean_cosine"]),
        "identity": {k: rounded(data[f"identity_{k}"]) for k in ("agreement", "mmd", "sw")},
    }
    for v, variant in enumerate(VARIANTS):
        for m, method in enumerate(METHODS):
            summary[f"{variant}/{method}"] = {
                k: rounded(data[f"sim_{k}"][v, m])
                for k in ("agreement", "mmd", "sw", "mean_cosine")
            }
    return {
        "variants": list(VARIANTS),
        "methods": list(METHODS),
        "beta": float(1 / np.sqrt(model.config.head_dim)),
        "rescaled_beta": rounded(
            data["r2"][: model.config.num_hidden_layers] / np.sqrt(model.config.head_dim)
        ),
        "summary": summary,
    }
