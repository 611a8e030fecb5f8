"""Fig. 4 of Rigollet's survey (arXiv:2512.01868, §6.2; from Karagodin, Ge, Polyanskiy,
Rigollet, arXiv:2510.22026): normalisation as speed regulation.

The mean cosine similarity across tokens, (1/(n(n − 1))) Σ_{i≠j} ⟨θ_i, θ_j⟩, against t, its
mean over random-weight realisations with the 5–95% band (the survey's "90% confidence
interval"), for six placements of the normalisation: Post-LN, Pre-LN, Mix-LN, Peri-LN, nGPT and
sqrt-scaling (:class:`attnflow.PostLN`, ..., :class:`attnflow.SqrtScaling`; speed factors
s = 1, r, 1 then r, r|A|, |A|, r√(t + 1) in θ̇_i = (1/s_i) P^⊥_{θ_i} A_i, eq. (7)).

The survey's caption gives d = 512, β = √d, d > n, random weights and random initial tokens;
its file name (``exp2_kaiming_h1_T10_midtemp``) says Kaiming-initialised weights, one head and
T = 10. The model (``weights="survey"``, the default), one head per layer, the same weights in
every layer (a random Transformer whose depth is the time t):

* Q, K and V with i.i.d. N(0, 1/d) entries: Kaiming (He) normal initialisation of a d × d linear
  map with the gain 1 of a linear layer, std = gain/√fan_in. The logits β⟨Qθ_i, Kθ_j⟩ of
  near-orthogonal unit tokens then have variance β² d (1/d)² = 1 at β = √d, and |Vθ| ≈ 1;
* n = 64 tokens drawn uniformly on S^{d−1} (d > n), β = √d;
* the discrete Transformer of each scheme (``scheme.layers``, the attention output Σ_j a_ij V θ_j
  as the sublayer) with step h = 0.05 (200 layers on [0, 10]); Mix-LN switches from post-LN to
  pre-LN at t* = T/4 (α = 0.25 of Li et al.); nGPT's rate is 1; sqrt-scaling scales the pre-LN
  update by 1/√(t + 1) (``SqrtScaling(1.0)``).

Measured against the digitised survey curves (benchmarks/RESULTS.md): at the full size the
means of Post-LN, Pre-LN, Mix-LN, Peri-LN and nGPT lie within the survey's band at t = 1, ..., 10;
sqrt-scaling follows it up to t ≈ 4 and then falls below (about −0.2 at t = 6–10): the survey
does not define its sqrt-scaling, and no reading of 1/√(layer) tried matches the late part.
Other laws measured (32 → 2 realisations, d = 512): PyTorch's nn.Linear default U(±1/√d)
(variance 1/(3d)) for Q, K, V makes Post-/Pre-LN too slow (ρ = 0.09 at t = 3 against 0.50);
N(0, 2/d) (Kaiming with the ReLU gain √2) makes nGPT and Peri-LN too slow (0.23 and 0.15 at
t = 1 against 0.47 and 0.41) and Post-LN too fast; V = I (``weights="identity-value"``, the model
of attnflow before issue #41, Q and K as above) makes Post-, Pre- and Mix-LN rise about 0.7
time units early. Reading the file name's "h1" as the step h = 1 (T = 10 layers of unit step,
plotted at the layer index) was measured too (``benchmarks/fig4_h1.py``): with this law Post-LN
is 0.45 at t = 4 against 0.89, and no weight law or temperature tried brings all six schemes
within 0.05, so "h1" is read as one head.

The ``.npz`` holds every curve and the model's description (``model``), the ``.json`` the same
description and the order of the schemes by their final mean cosine similarity.
"""

import pathlib
import time

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow._progress import Progress
from attnflow.figures import _survey_fig4 as survey
from attnflow.figures._output import write_outputs

PRESETS = {
    "quick": {"d": 16, "n": 8, "realisations": 4, "t1": 4.0, "step": 0.1, "weights": "survey"},
    "default": {
        "d": 128,
        "n": 32,
        "realisations": 16,
        "t1": 10.0,
        "step": 0.1,
        "weights": "survey",
    },
    "full": {
        "d": 512,
        "n": 64,
        "realisations": 32,
        "t1": 10.0,
        "step": 0.05,
        "weights": "survey",
    },
}

# The laws of the weights: "survey" draws Q, K, V; "identity-value" (attnflow before issue #41)
# draws Q, K and takes V = I.
WEIGHTS = ("survey", "identity-value")

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


def _check_weights(weights: str) -> str:
    if weights not in WEIGHTS:
        raise ValueError(f"weights: expected one of {WEIGHTS}, got {weights!r}")
    return weights


def draw(key, n: int, d: int, weights: str = "survey"):
    """One realisation ``(Q, K, V, tokens)``: Q, K (and V for ``weights="survey"``) with
    i.i.d. N(0, 1/d) entries, n uniform tokens on S^{d−1}; V is None (the identity) for
    ``weights="identity-value"``, which draws Q, K and the tokens as attnflow did before."""
    if _check_weights(weights) == "identity-value":
        kq, kk, kx = jr.split(key, 3)
        V = None
    else:
        kq, kk, kv, kx = jr.split(key, 4)
        V = jr.normal(kv, (d, d)) / np.sqrt(d)
    Q = jr.normal(kq, (d, d)) / np.sqrt(d)
    K = jr.normal(kk, (d, d)) / np.sqrt(d)
    return Q, K, V, af.random_tokens(kx, n, d)


def describe(params: dict) -> str:
    """The model of a run in one line: the law of Q, K, V, n, d, β, h, the depth and the
    realisations (written in the figure, its JSON and its npz)."""
    d, n, step, t1 = int(params["d"]), int(params["n"]), float(params["step"]), params["t1"]
    weights = _check_weights(params.get("weights", "survey"))
    law = (
        "Q, K, V i.i.d. N(0, 1/d) (Kaiming normal, gain 1)"
        if weights == "survey"
        else "Q, K i.i.d. N(0, 1/d), V = I"
    )
    return (
        f"{law}; d = {d}, n = {n} uniform tokens, β = √d = {np.sqrt(d):.3g}; one head, same "
        f"weights every layer; h = {step:g} ({round(t1 / step)} layers to T = {t1:g}); "
        f"{int(params['realisations'])} realisations; Mix-LN t* = T/4, nGPT rate 1, "
        "sqrt-scaling 1/√(t + 1)"
    )


def mean_cosine(zs):
    """(…, n, d) streams -> (…,) mean of ⟨θ_i, θ_j⟩ over the pairs i ≠ j."""
    theta = af.normalize(zs)
    n = zs.shape[-2]
    total = jnp.sum(jnp.sum(theta, axis=-2) ** 2, axis=-1)  # Σ_ij ⟨θ_i, θ_j⟩
    return (total - n) / (n * (n - 1))


def compute(params: dict, seed: int = 0, progress: bool = True) -> dict:
    """Mean cosine similarity (schemes, realisations, layers + 1) on the layer times t.

    ``params``: d, n, realisations, t1, step and ``weights`` (default ``"survey"``)."""
    d, n, t1, step = int(params["d"]), int(params["n"]), float(params["t1"]), params["step"]
    weights = _check_weights(params.get("weights", "survey"))
    beta = float(np.sqrt(d))
    num_layers = round(t1 / step)
    keys = jr.split(jr.key(seed), int(params["realisations"]))
    curves = np.zeros((len(NAMES), len(keys), num_layers + 1))
    with Progress("normalization", len(NAMES) * len(keys), "runs", enabled=progress) as bar:
        for s, scheme in enumerate(schemes(t1).values()):

            @jax.jit
            def run(key, scheme=scheme):
                Q, K, V, x0 = draw(key, n, d, weights)
                sublayer = af.AttentionSublayer(af.SelfAttention(beta, Q, K, V))
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
        "model": np.array(describe({**params, "weights": weights})),
    }


def order(data) -> list[str]:
    """The schemes from the highest final mean cosine similarity to the lowest."""
    final = data["cosine"][:, :, -1].mean(axis=1)
    return [str(data["names"][k]) for k in np.argsort(-final)]


def survey_deviation(data) -> dict:
    """Mean curve minus the digitised survey mean, by scheme, at the survey's times within the
    run (t ≤ t1): ``{name: {t: deviation}}``."""
    names = [str(name) for name in data["names"]]
    out = {}
    for name, reference in survey.MEANS.items():
        mean = data["cosine"][names.index(name)].mean(axis=0)
        out[name] = {
            t: float(np.interp(t, data["t"], mean) - ref)
            for t, ref in zip(survey.TIMES, reference, strict=True)
            if t <= data["t"][-1] + 1e-9
        }
    return out


def draw_figure(data, params, compare: bool = False):
    """The survey's layout: its title, axes, legend order and colours, the mean and the 5–95%
    band of each scheme; ``compare`` overlays the digitised survey means (dashed, circles)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.2))
    names = [str(name) for name in data["names"]]
    for name, colour in survey.STYLE:
        curves = data["cosine"][names.index(name)]
        lo, hi = np.quantile(curves, [0.05, 0.95], axis=0)
        ax.plot(data["t"], curves.mean(axis=0), lw=2, color=colour, label=name)
        ax.fill_between(data["t"], lo, hi, alpha=0.15, color=colour, lw=0)
    if compare:
        shown = np.asarray(survey.TIMES) <= data["t"][-1] + 1e-9  # within the run
        for name, colour in survey.STYLE:
            ax.plot(
                np.asarray(survey.TIMES)[shown],
                np.asarray(survey.MEANS[name])[shown],
                ls="--",
                lw=1,
                marker="o",
                ms=3,
                color=colour,
            )
        ax.plot([], [], "k--o", lw=1, ms=3, label="survey Fig. 4 (digitised)")
    ax.set(
        xlabel="time",
        ylabel="cos sim",
        ylim=(min(-0.05, float(data["cosine"].min())), 1.05),
        title="Cosine similarity with confidence intervals",
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.text(0.5, -0.01, describe(params), ha="center", va="top", fontsize=7, wrap=True)
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``normalization.{png,npz,json}`` (``params["compare"]``: overlay
    the survey's digitised curves)."""
    params = dict(params)
    compare = bool(params.pop("compare", False))
    params.setdefault("weights", "survey")
    start = time.perf_counter()
    data = compute(params, seed)
    computed = time.perf_counter()
    fig = draw_figure(data, params, compare=compare)
    final = data["cosine"][:, :, -1].mean(axis=1)
    record = {
        **params,
        "seed": seed,
        "beta": float(data["beta"]),
        "model": describe(params),
        "final_mean_cosine": {str(k): float(v) for k, v in zip(data["names"], final, strict=True)},
        "order": order(data),
        "minus_survey": {
            name: {str(t): round(v, 4) for t, v in dev.items()}
            for name, dev in survey_deviation(data).items()
        },
        "survey_source": survey.SOURCE,
    }
    timings = {"compute": computed - start, "plot": time.perf_counter() - computed}
    return write_outputs(out, "normalization", fig, data, record, timings)
