"""Fig. 4 of Rigollet's survey (arXiv:2512.01868, §6.2; after Karagodin, Ge, Polyanskiy,
Rigollet, arXiv:2510.22026): normalisation as speed regulation.

The mean cosine similarity across tokens, (1/(n(n − 1))) Σ_{i≠j} ⟨θ_i, θ_j⟩, against t, its
mean over random-weight realisations with the 5–95% band (90%), for six placements of the
normalisation: Post-LN, Pre-LN, Mix-LN, Peri-LN, nGPT and sqrt-scaling
(:class:`attnflow.PostLN`, ..., :class:`attnflow.SqrtScaling`; speed factors s = 1, r, 1 then r,
r|A|, |A|, r√(t + 1) in θ̇_i = (1/s_i) P^⊥_{θ_i} A_i, eq. (7)).

Setting (full preset): d = 512, β = √d, t ∈ [0, 10] as the survey states. What it does not
state here is chosen as follows: n = 64 tokens drawn uniformly on S^{d−1}; in each realisation
Q and K have i.i.d. N(0, 1/d) entries (so that the logits β⟨Qθ_i, Kθ_j⟩ are of order one) and
V = I (a random V need not contract the tokens at all); 32 realisations; the discrete
Transformer of each scheme (``scheme.layers``, the attention output as the sublayer) with step
h = 0.05, i.e. 200 layers; Mix-LN switches from post-LN to pre-LN at t* = T/4 (α = 0.25 of
Li et al.); nGPT's rate is 1, sqrt-scaling's offset 1. The ``.npz`` holds every curve, the
``.json`` the order of the schemes by their final mean cosine similarity.

nGPT's place depends on its rate α: its speed factor is |A|/α, and with V = I, |A_i| ≤ 1, so
at α = 1 it is the fastest of the six; nGPT's eigen learning rates start small in practice, and
a rate α < 1 slows it in proportion (``NGPT(rate)``).
"""

import pathlib
import time

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow._progress import Progress
from attnflow.figures._output import write_outputs

PRESETS = {
    "quick": {"d": 16, "n": 8, "realisations": 4, "t1": 4.0, "step": 0.1},
    "default": {"d": 128, "n": 32, "realisations": 16, "t1": 10.0, "step": 0.1},
    "full": {"d": 512, "n": 64, "realisations": 32, "t1": 10.0, "step": 0.05},
}

NAMES = ("Post-LN", "Pre-LN", "Mix-LN", "Peri-LN", "nGPT", "sqrt-scaling")


def schemes(t1: float) -> dict:
    """The six schemes of the figure, by name (Mix-LN switches at t1/4)."""
    return {
        "Post-LN": af.PostLN(),
        "Pre-LN": af.PreLN(),
        "Mix-LN": af.MixLN(0.25 * t1),
        "Peri-LN": af.PeriLN(),
        "nGPT": af.NGPT(1.0),
        "sqrt-scaling": af.SqrtScaling(1.0),
    }


def draw(key, n: int, d: int):
    """One realisation: Q, K with i.i.d. N(0, 1/d) entries and n uniform tokens on S^{d−1}."""
    kq, kk, kx = jr.split(key, 3)
    Q = jr.normal(kq, (d, d)) / np.sqrt(d)
    K = jr.normal(kk, (d, d)) / np.sqrt(d)
    return Q, K, af.random_tokens(kx, n, d)


def mean_cosine(zs):
    """(…, n, d) streams -> (…,) mean of ⟨θ_i, θ_j⟩ over the pairs i ≠ j."""
    theta = af.normalize(zs)
    n = zs.shape[-2]
    total = jnp.sum(jnp.sum(theta, axis=-2) ** 2, axis=-1)  # Σ_ij ⟨θ_i, θ_j⟩
    return (total - n) / (n * (n - 1))


def compute(params: dict, seed: int = 0, progress: bool = True) -> dict:
    """Mean cosine similarity (schemes, realisations, layers + 1) on the layer times t."""
    d, n, t1, step = int(params["d"]), int(params["n"]), float(params["t1"]), params["step"]
    beta = float(np.sqrt(d))
    num_layers = round(t1 / step)
    keys = jr.split(jr.key(seed), int(params["realisations"]))
    curves = np.zeros((len(NAMES), len(keys), num_layers + 1))
    with Progress("normalization", len(NAMES) * len(keys), "runs", enabled=progress) as bar:
        for s, scheme in enumerate(schemes(t1).values()):

            @jax.jit
            def run(key, scheme=scheme):
                Q, K, x0 = draw(key, n, d)
                sublayer = af.AttentionSublayer(af.SelfAttention(beta, Q, K))
                return mean_cosine(scheme.layers(sublayer, x0, num_layers, step))

            with bar.compiling():
                curves[s, 0] = np.asarray(run(keys[0]))
            bar.update(1)
            for r in range(1, len(keys)):
                curves[s, r] = np.asarray(run(keys[r]))
                bar.update(1)
    return {
        "t": step * np.arange(num_layers + 1),
        "cosine": curves,
        "names": np.array(NAMES),
        "beta": np.float64(beta),
    }


def order(data) -> list[str]:
    """The schemes from the highest final mean cosine similarity to the lowest."""
    final = data["cosine"][:, :, -1].mean(axis=1)
    return [str(data["names"][k]) for k in np.argsort(-final)]


def draw_figure(data, params):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for k, name in enumerate(data["names"]):
        curves = data["cosine"][k]
        lo, hi = np.quantile(curves, [0.05, 0.95], axis=0)
        (line,) = ax.plot(data["t"], curves.mean(axis=0), lw=2, label=str(name))
        ax.fill_between(data["t"], lo, hi, alpha=0.2, color=line.get_color(), lw=0)
    ax.set(
        xlabel="t (layer × step)",
        ylabel="mean cosine similarity",
        ylim=(min(0.0, float(data["cosine"].min())), 1.02),
        title=f"Normalisation as speed (d = {params['d']}, n = {params['n']}, β = √d)",
    )
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, loc="lower right")
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``normalization.{png,npz,json}``."""
    start = time.perf_counter()
    data = compute(params, seed)
    computed = time.perf_counter()
    fig = draw_figure(data, params)
    final = data["cosine"][:, :, -1].mean(axis=1)
    record = {
        **params,
        "seed": seed,
        "beta": float(data["beta"]),
        "final_mean_cosine": {str(k): float(v) for k, v in zip(data["names"], final, strict=True)},
        "order": order(data),
    }
    timings = {"compute": computed - start, "plot": time.perf_counter() - computed}
    return write_outputs(out, "normalization", fig, data, record, timings)
