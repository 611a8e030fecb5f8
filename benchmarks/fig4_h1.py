"""The survey's Fig. 4 read as a discrete Transformer of T = 10 layers with unit step (issue 41):
does ``exp2_kaiming_h1_T10_midtemp``'s "h1" mean the step h = 1 rather than one head?

Each scheme's own layer map (``scheme.layers``, no second loop) is iterated 10 times with h = 1
(Post-LN x ← N(x + A(x)), Pre-LN z ← z + A(N(z)), ...), at d = 512, n = 64 uniform tokens, for
each defensible weight law and inverse temperature, and compared at the layer indices with the
digitised survey means (``attnflow/figures/_survey_fig4.py``): at the integers t = 1, ..., 10
(exact layer values) and at the half-integers 0.5, ..., 3.5 the straight segments plt.plot draws.

Readings (none fitted):

* weights: Q, K, V i.i.d. N(0, 1/d) (Kaiming normal, gain 1; the figure's default), U(±1/√d)
  (PyTorch's ``nn.Linear`` default, Kaiming uniform with a = √5), N(0, 2/d) (Kaiming with the ReLU
  gain), V = I with Q, K N(0, 1/d);
* temperature: β = √d on unit tokens (logit variance 1), or β = 1/√d (the usual 1/√d_head
  scaling of qᵀk applied to unit tokens);
* Mix-LN: post-LN for the first ⌊0.25 L⌋ = 2 layers (Li et al.'s α = 0.25), pre-LN after;
  nGPT with α = h·rate = 1 (then x ← N(A(x)));
* sqrt-scaling: pre-LN with layer ℓ = 1, ..., 10 scaled by 1/√ℓ (``SqrtScaling()`` at h = 1),
  or every layer by Noci et al.'s 1/√L, L = 10 (pre-LN with step 1/√10).

``--png`` also traces the published nGPT curve (its red pixels, axes calibrated on the ticks
0 and 10, 0 and 1 of the 2400 × 1500 PNG) and compares it on [0, 4] with the curves drawn
through its values at the integer layers: straight segments (what ``plt.plot`` draws through
11 points) and cubic/PCHIP interpolants.

Counted values only (deterministic given the seed; nothing is timed)::

    python benchmarks/fig4_h1.py [--realisations 16] \
        [--png /work/shared/refs/survey-2512.01868/fig4-normalization.png]
"""

import argparse
import functools

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures import _survey_fig4 as survey, normalization as fig

D, N, LAYERS = 512, 64, 10

# name in the survey -> (scheme, step): every curve is plotted at the layer index k (time k).
SCHEMES = {
    "Post-LN": (af.PostLN(), 1.0),
    "Pre-LN": (af.PreLN(), 1.0),
    "Mix-LN": (af.MixLN(float(int(0.25 * LAYERS))), 1.0),  # layers 0, 1 post-LN
    "Peri-LN": (af.PeriLN(), 1.0),
    "nGPT": (af.NGPT(1.0), 1.0),
    "sqrt-scaling 1/√ℓ": (af.SqrtScaling(1.0), 1.0),
    "sqrt-scaling 1/√L": (af.PreLN(), 1.0 / np.sqrt(LAYERS)),
}

LAWS = ("N(0, 1/d)", "U(±1/√d)", "N(0, 2/d)", "V = I")


def draw(key, law: str):
    """(Q, K, V, tokens) of one realisation under ``law`` (V = I as the identity matrix)."""
    kq, kk, kv, kx = jr.split(key, 4)
    shape = (D, D)
    if law == "U(±1/√d)":
        Q, K, V = (jr.uniform(k, shape, minval=-1.0, maxval=1.0) / np.sqrt(D) for k in (kq, kk, kv))
    else:
        scale = np.sqrt((2.0 if law == "N(0, 2/d)" else 1.0) / D)
        Q, K, V = (scale * jr.normal(k, shape) for k in (kq, kk, kv))
        if law == "V = I":
            V = jnp.eye(D)
    return Q, K, V, af.random_tokens(kx, N, D)


@functools.cache
def _runner(name: str):
    """The compiled run of ``name``, vmapped over realisations (one compilation per scheme)."""
    scheme, step = SCHEMES[name]

    @jax.jit
    @functools.partial(jax.vmap, in_axes=(None, 0, 0, 0, 0))
    def run(beta, Q, K, V, x0):
        sublayer = af.AttentionSublayer(af.SelfAttention(beta, Q, K, V))
        return fig.mean_cosine(scheme.layers(sublayer, x0, LAYERS, step))

    return run


def curves(name: str, law: str, beta: float, realisations: int, seed: int = 0):
    """(realisations, LAYERS + 1) mean cosine similarity of ``name`` at layers 0..LAYERS."""
    keys = jr.split(jr.key(seed), realisations)
    Q, K, V, x0 = (jnp.stack(a) for a in zip(*(draw(k, law) for k in keys), strict=True))
    return np.asarray(_runner(name)(jnp.asarray(beta), Q, K, V, x0))


def deviations(mean: np.ndarray, reference: str) -> dict:
    """{t: our mean − survey mean}: exact at the integer layers, linear between them."""
    layers = np.arange(LAYERS + 1)
    return {
        t: float(np.interp(t, layers, mean)) - ref
        for t, ref in zip(survey.TIMES, survey.MEANS[reference], strict=True)
    }


def main(realisations: int) -> None:
    jax.config.update("jax_enable_x64", True)
    shown = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
    for beta_name, beta in (("β = √d", np.sqrt(D)), ("β = 1/√d", 1.0 / np.sqrt(D))):
        for law in LAWS:
            print(f"\n### h = 1, T = 10 layers; {law}, {beta_name}; {realisations} realisations")
            print(
                "| scheme | " + " | ".join(f"t = {t:g}" for t in shown) + " | worst integer"
                " t | worst t = 0.5–3.5 |"
            )
            print("|---|" + "---|" * (len(shown) + 2))
            for name in SCHEMES:
                mean = curves(name, law, beta, realisations).mean(axis=0)
                reference = "sqrt-scaling" if name.startswith("sqrt") else name
                dev = deviations(mean, reference)
                cells = [f"{mean[int(t)]:.2f} ({dev[t]:+.2f})" for t in shown]
                whole = {t: v for t, v in dev.items() if t == int(t)}
                half = {t: v for t, v in dev.items() if t != int(t)}
                wi = max(whole, key=lambda t: abs(whole[t]))
                wh = max(half, key=lambda t: abs(half[t]))
                print(
                    f"| {name} | "
                    + " | ".join(cells)
                    + f" | {whole[wi]:+.2f} (t = {wi:g}) | {half[wh]:+.2f} (t = {wh:g}) |"
                )


def trace_ngpt(png: str) -> None:
    """How far the published nGPT curve is from a curve drawn through 11 layer values."""
    from PIL import Image
    from scipy.interpolate import CubicSpline, PchipInterpolator

    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    scale = image.shape[1] / 1389  # ticks read at 1389 px wide: t = 0, 10 at x = 171, 1306
    x0, x10, y0, y1 = 171 * scale, 1306 * scale, 735 * scale, 97 * scale  # ρ = 0, 1 at y0, y1
    red = np.abs(image - np.array([214, 39, 40])).sum(-1) < 40  # matplotlib's tab:red
    t, rho = [], []
    for col in range(int(x0), int(x10) + 1):
        rows = np.nonzero(red[:, col])[0]
        if len(rows):
            t.append((col - x0) / (x10 - x0) * 10)
            rho.append((y0 - rows.mean()) / (y0 - y1))
    t, rho = np.array(t), np.array(rho)
    knots = np.arange(0.0, 11.0)
    values = np.array([0.0, *(rho[np.argmin(abs(t - k))] for k in knots[1:-1]), 1.0])
    inside = t <= 4
    read = ", ".join(f"{rho[np.argmin(abs(t - x))]:.3f}" for x in (0.25, 0.5, 1, 2))
    print(f"\ntraced nGPT: ρ = {read} at t = 0.25, 0.5, 1, 2")
    drawn = {
        "straight segments": lambda s: np.interp(s, knots, values),
        "cubic spline, not-a-knot": CubicSpline(knots, values),
        "cubic spline, natural": CubicSpline(knots, values, bc_type="natural"),
        "cubic spline, clamped (ρ' = 0 at 0, 10)": CubicSpline(knots, values, bc_type="clamped"),
        "PCHIP": PchipInterpolator(knots, values),
    }
    for name, curve in drawn.items():
        gap = np.abs(curve(t[inside]) - rho[inside])
        print(
            f"{name}: largest |traced − drawn| on [0, 4] {gap.max():.3f} at t = "
            f"{t[inside][gap.argmax()]:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realisations", type=int, default=16)
    parser.add_argument("--png", help="the published fig4-normalization.png, to trace nGPT")
    arguments = parser.parse_args()
    if arguments.png:
        trace_ngpt(arguments.png)
    main(arguments.realisations)
