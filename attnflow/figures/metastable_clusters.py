"""How many metastable clusters: the cluster count of the circle dynamics on its first metastable
plateau against the mode count of the kernel density estimate of the initial angles
(Geshkovski, Rigollet, Sun, arXiv:2412.09080; docs/maths.md §10).

On the circle, e^{β cos(θ − θ_j)} is the von Mises kernel with bandwidth ~ β^{-1/2}, and (USA)
moves each token up the gradient of f(θ) = Σ_j e^{β cos(θ − θ_j)} (SA up the gradient of log f):
early on, tokens climb to the modes of this density estimate, and the clusters so formed are
metastable. Measured here, for i.i.d. uniform angles and each β:

- the number of modes of f at t = 0 (:func:`attnflow.measures.kde_mode_count`, ``circular=True``);
- the number of δ-clusters on the first metastable plateau: the angles are integrated (L-stable
  Kvaerno5 on the angle ODE (7.1), log-spaced save times as in the staircase figure) and the
  plateau is the first save time at which the tokens form tight clusters no two of which are
  within about 2β^{-1/2} (:func:`first_plateau`).

Beside them, the prediction of the linear theory (Bruno, Pasqualotto, Agazzi,
arXiv:2410.23228, Theorem 4.3): from the uniform measure the fastest-growing Fourier mode is
k_max = argmax_k k² I_k(β) (:func:`attnflow.theory.metastable_cluster_count`), so k_max equally
spaced clusters form first in the mean-field limit n → ∞; drawn as a dotted step.

The paper proves E[#modes] = Θ(√(β log β)) for Gaussian samples on the line (no constant); for
uniform angles on the circle the Rice formula gives the mode count itself,
:func:`attnflow.theory.uniform_circle_mode_count` (→ √(3β/2)), which the figure draws as the
reference, with the counts against β and their ratio (one colour per model in both panels).
"""

import functools
import pathlib

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optimistix as optx

import attnflow as af
from attnflow.figures._output import compute_plot_write

PRESETS = {
    "quick": {
        "n": 16,
        "betas": [3.0, 6.0],
        "realizations": 2,
        "delta": 1e-3,
        "num_times": 60,
    },
    "default": {
        "n": 32,
        "betas": [2.0, 3.0, 4.0, 6.0, 8.0, 10.0],
        "realizations": 6,
        "delta": 1e-3,
        "num_times": 100,
    },
    "full": {
        "n": 64,
        "betas": [2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0],
        "realizations": 16,
        "delta": 1e-3,
        "num_times": 140,
    },
}


def save_times(beta: float, normalization: str, num_times: int) -> np.ndarray:
    """0, then log-spaced over 7 decades from before the first collapse: 10^{-2} e^{−β} for
    USA (rates ~ e^β), 10^{-3} for SA (rates O(1))."""
    start = -2 - beta / np.log(10) if normalization == "n" else -3.0
    return np.concatenate([[0.0], np.logspace(start, start + 7, num_times)])


@functools.partial(jax.jit, static_argnames=("normalization",))
def _integrate(theta0, beta, ts, normalization):
    def field(t, theta, args):
        return af.landscape.circle_field(theta, beta, normalization=normalization)

    def one(theta):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Kvaerno5(root_finder=optx.Newton(rtol=1e-8, atol=1e-10)),
            ts[0],
            ts[-1],
            None,
            theta,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10),
            max_steps=20000,
            throw=False,
        )
        return sol.ys, sol.result == diffrax.RESULTS.successful

    return jax.vmap(one)(theta0)


def first_plateau(fine, coarse) -> int:
    """The cluster count at the first save time (after t = 0) where the tokens form tight,
    separated clusters: the δ-cluster count equals the count at the coarse threshold 2/β (no two
    clusters within about 2β^{-1/2}, whose merge would not be metastable); the last fine count if
    that never happens."""
    fine, coarse = np.asarray(fine), np.asarray(coarse)
    same = np.flatnonzero(fine[1:] == coarse[1:])
    return int(fine[1 + same[0]] if len(same) else fine[-1])


def plateau_counts(theta0, beta: float, normalization: str, params: dict) -> np.ndarray:
    """First-plateau cluster counts for a batch of initial angles (R, n). ``params["models"]``
    (default both) selects ``"usa"`` and/or ``"sa"`` in :func:`compute`."""
    ts = save_times(beta, normalization, params["num_times"])
    theta, ok = _integrate(jnp.asarray(theta0), jnp.float64(beta), jnp.asarray(ts), normalization)
    if not bool(np.all(ok)):
        raise RuntimeError(f"metastable_clusters: a solve failed at β = {beta} ({normalization})")
    tokens = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=-1)

    def counts(delta):
        return np.asarray(jax.vmap(jax.vmap(lambda x: af.count_clusters(x, delta)))(tokens))

    fine, coarse = counts(params["delta"]), counts(min(2.0 / beta, 1.0))
    return np.array([first_plateau(f, c) for f, c in zip(fine, coarse, strict=True)])


def compute(params: dict, seed: int) -> dict:
    betas = np.asarray(params["betas"], float)
    theta0 = np.asarray(
        jr.uniform(jr.key(seed), (params["realizations"], params["n"]), jnp.float64, 0, 2 * np.pi)
    )
    modes = np.stack([af.measures.kde_mode_count(theta0, b, circular=True) for b in betas])
    kmax = np.array([af.theory.metastable_cluster_count(b) for b in betas])
    data = {"betas": betas, "theta0": theta0, "kde_modes": modes, "bpa_kmax": kmax}
    for key, normalization in (("usa", "n"), ("sa", "softmax")):
        if key in params.get("models", ("usa", "sa")):
            data[key] = np.stack([plateau_counts(theta0, b, normalization, params) for b in betas])
    return data


SERIES = (
    ("kde_modes", "KDE modes at t = 0", "o"),
    ("usa", "USA clusters, first plateau", "s"),
    ("sa", "SA clusters, first plateau", "^"),
)
# One colour per model in both panels.
COLORS = {"kde_modes": "C0", "usa": "C1", "sa": "C2"}


def plot(data: dict, params: dict):
    from attnflow.plot._common import plt

    betas = data["betas"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key, label, marker in SERIES:
        if key not in data:
            continue
        mean = data[key].mean(axis=1)
        err = data[key].std(axis=1, ddof=1) / np.sqrt(data[key].shape[1])
        color = COLORS[key]
        axes[0].errorbar(
            betas, mean, yerr=2 * err, marker=marker, capsize=2, color=color, label=label
        )
        if key != "kde_modes":
            ratio = (data[key] / np.maximum(data["kde_modes"], 1)).mean(axis=1)
            axes[1].plot(betas, ratio, marker=marker, color=color, label=label.split(",")[0])
    # Uniform angles on the circle: the Rice formula, not the √(β log β) of Gaussian data.
    grid = np.linspace(betas.min(), betas.max(), 100)
    axes[0].plot(
        grid,
        af.theory.uniform_circle_mode_count(grid),
        "k--",
        lw=0.8,
        label="Rice formula, uniform angles (→ √(3β/2))",
    )
    # Bruno–Pasqualotto–Agazzi's k_max: the fastest-growing Fourier mode of the mean-field
    # equation linearised at the uniform measure (argmax_k k² I_k(β), arXiv:2410.23228 Thm 4.3).
    fine = np.linspace(betas.min(), betas.max(), 200)
    axes[0].step(
        fine,
        [af.theory.metastable_cluster_count(b) for b in fine],
        where="post",
        color="0.3",
        ls=":",
        lw=1.2,
        label="BPA k_max = argmax k² I_k(β) (linear theory)",
    )
    axes[0].set(
        xlabel="β",
        ylabel="count",
        title=f"n = {params['n']} uniform angles, {params['realizations']} realisations",
    )
    axes[0].legend(fontsize=8)
    axes[1].axhline(1, color="0.6", lw=0.8)
    axes[1].set(xlabel="β", ylabel="clusters / KDE modes", title="plateau clusters per KDE mode")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``metastable_clusters.{png,npz,json}``."""
    jax.config.update("jax_enable_x64", True)
    return compute_plot_write(
        out, "metastable_clusters", compute, plot, params, seed, record=_record
    )


def _record(data: dict) -> dict:
    return {
        "mean_kde_modes": data["kde_modes"].mean(axis=1).tolist(),
        **({"bpa_kmax": data["bpa_kmax"].tolist()} if "bpa_kmax" in data else {}),
        **{f"mean_{k}_clusters": data[k].mean(axis=1).tolist() for k in ("usa", "sa") if k in data},
    }
