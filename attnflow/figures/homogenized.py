r"""Representation collapse in the homogenised limit of deep random multi-head attention.

The SDE (H) of :mod:`attnflow._homogenized` (Q = K = I, Gaussian values, μ = 0; the
``"diffusive"`` regime of :data:`attnflow.HOMOGENIZED_REGIMES`), from i.i.d. uniform tokens.
Three panels:

(a) P(⟨x_1(T), x_2(T)⟩ ≥ 1 − δ) over (β, d) for n = 2, simulated, with the closed-form
    threshold β_c(d) = ½ arccosh(d − 2) (antipodal growth rate λ_−(β, d) = 0): to its right
    (d < 2 + cosh 2β) the antipodal pair attracts and collapse is mitigated;
(b) the same probability over (β, n) at a fixed d (n tokens, the first two observed);
(c) like with like at the finite time ``t_long``: the SDE on (S^{d−1})² (dots, 2 standard errors)
    against the scalar diffusion of ρ = ⟨x_1, x_2⟩ with the closed-form coefficients
    (:func:`attnflow.theory.homogenized_pair_coefficients`, lines: :func:`pair_probability`,
    a different equation from the same theory), both P(ρ(t_long) ≥ 1 − δ); the closed-form
    limit P(ρ(∞) = 1) (scale function) is drawn dashed: the slow cases (d = 2, 3, β near
    β_c(d)) have not reached it at t_long.

(d) the random-Q, K limit (HR) (:func:`attnflow.models.solve_homogenized_random_qk`, the
    paper's model): the linearised trade-off of
    :func:`attnflow.theory.homogenized_orthogonal_tradeoff`: the smallest β that keeps
    orthonormal tokens from collapsing, against the context length n, for several d (the rate
    λ(β, n, d) = 0), and β² = log n for reference.

Each probability has standard error √(P(1 − P)/R) over R realisations; common random numbers
across β (same initial tokens and Brownian paths).
"""

import pathlib

import jax
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures._output import compute_plot_write

PRESETS = {
    "quick": {
        "tradeoff_n_max": 64,
        "tradeoff_ds": [3, 4],
        "betas": [0.0, 2.0, 4.0],
        "ds": [3, 6],
        "ns": [2, 4],
        "d_for_n": 4,
        "check_ds": [3],
        "t_long": 10.0,
        "t1": 5.0,
        "realizations": 32,
        "dt": 0.1,
        "delta": 1e-3,
    },
    "default": {
        "tradeoff_n_max": 1024,
        "tradeoff_ds": [3, 4, 5],
        "betas": [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
        "ds": [2, 3, 4, 5, 6, 8, 10],
        "ns": [2, 4, 8, 16, 32],
        "d_for_n": 4,
        "check_ds": [2, 4, 8],
        "t_long": 80.0,
        "t1": 20.0,
        "realizations": 400,
        "dt": 0.05,
        "delta": 1e-3,
    },
    "full": {
        "tradeoff_n_max": 4096,
        "tradeoff_ds": [3, 4, 5, 6],
        "betas": [0.25 * k for k in range(21)],
        "ds": [2, 3, 4, 5, 6, 8, 10, 12, 16],
        "ns": [2, 4, 8, 16, 32, 64],
        "d_for_n": 4,
        "check_ds": [2, 3, 4, 6, 8, 12],
        "t_long": 120.0,
        "t1": 40.0,
        "realizations": 2000,
        "dt": 0.02,
        "delta": 1e-3,
    },
}


def pair_probability(
    seed: int, beta: float, d: int, t: float, *, delta: float, paths: int = 20000, dt: float = 0.01
) -> float:
    r"""P(ρ(t) ≥ 1 − δ) for the scalar diffusion of ρ = ⟨x_1, x_2⟩ under (H) (n = 2, Q = K = I,
    μ = 0), from ρ(0) of two uniform tokens, by a NumPy Euler–Maruyama of y = artanh ρ:

        dy = (2pq(d − 2) + (p² + q²)ρ)/d dt + √(2(p² + q²)/d) dW,

    the Itô image of dρ = b dt + σ dW with b, σ² of
    :func:`attnflow.theory.homogenized_pair_coefficients` (p = 1/(1 + e^{β(1−ρ)}), q = 1 − p).
    """
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((2, paths, d))
    rho = np.sum(g[0] * g[1], axis=1) / np.linalg.norm(g[0], axis=1) / np.linalg.norm(g[1], axis=1)
    y = np.arctanh(np.clip(rho, -1 + 1e-15, 1 - 1e-15))
    steps = int(round(t / dt))
    for _ in range(steps):
        rho = np.tanh(y)
        p = 1.0 / (1.0 + np.exp(beta * (1.0 - rho)))
        q = 1.0 - p
        s2 = p * p + q * q
        y = y + (2 * p * q * (d - 2) + s2 * rho) / d * dt
        y = y + np.sqrt(2 * s2 / d * dt) * rng.standard_normal(paths)
    return float(np.mean(y >= np.arctanh(1 - delta)))


def mitigation_beta(n: int, d: float) -> float:
    """The β at which the rate λ(β, n, d) of :func:`attnflow.theory.homogenized_orthogonal_tradeoff`
    vanishes (Brent; λ decreases in β): above it orthonormal tokens stay near-orthonormal. nan
    when no β ≤ 20 does: κ(β, n) saturates (about 0.6 at large β and n) below the threshold
    (d − 2)(n − 1)/((d − 1)n) for d ≥ 5 and long contexts."""
    from scipy.optimize import brentq

    def rate(beta):
        return af.theory.homogenized_orthogonal_tradeoff(beta, n, d).rate

    if rate(0.0) <= 0:
        return 0.0
    if rate(20.0) > 0:  # κ saturates below the threshold: no β mitigates (nan)
        return float("nan")
    return float(brentq(rate, 0.0, 20.0, xtol=1e-6))


def compute(params: dict, seed: int) -> dict:
    """Simulated probabilities over (β, d) at n = 2 and over (β, n) at d = ``d_for_n``, and the
    closed forms."""
    jax.config.update("jax_enable_x64", True)
    betas = np.asarray(params["betas"], dtype=float)
    common = {
        "betas": betas,
        "ts": [params["t1"]],
        "realizations": params["realizations"],
        "dt": params["dt"],
        "delta": params["delta"],
    }
    key = jr.key(seed)
    p_d = np.stack(
        [
            np.asarray(af.homogenized_phase_diagram(jr.fold_in(key, d), n=2, d=d, **common))[:, 0]
            for d in params["ds"]
        ]
    )
    p_n = np.stack(
        [
            np.asarray(
                af.homogenized_phase_diagram(
                    jr.fold_in(key, 1000 + n), n=n, d=params["d_for_n"], **common
                )
            )[:, 0]
            for n in params["ns"]
        ]
    )
    closed = np.array(
        [[af.theory.homogenized_collapse_probability(b, d) for b in betas] for d in params["ds"]]
    )
    long = {**common, "ts": [params["t_long"]]}
    p_long = np.stack(
        [
            np.asarray(af.homogenized_phase_diagram(jr.fold_in(key, 2000 + d), n=2, d=d, **long))[
                :, 0
            ]
            for d in params["check_ds"]
        ]
    )
    closed_long = np.array(
        [
            [af.theory.homogenized_collapse_probability(b, d) for b in betas]
            for d in params["check_ds"]
        ]
    )
    rate = np.array([af.theory.homogenized_antipodal_rate(betas, d) for d in params["check_ds"]])
    tradeoff_ns = np.unique(np.geomspace(4, params["tradeoff_n_max"], 12).astype(int))
    tradeoff_beta = np.array(
        [[mitigation_beta(int(n), d) for n in tradeoff_ns] for d in params["tradeoff_ds"]]
    )
    pair_long = np.array(
        [
            [
                pair_probability(seed, float(b), int(d), params["t_long"], delta=params["delta"])
                for b in betas
            ]
            for d in params["check_ds"]
        ]
    )
    return {
        "betas": betas,
        "ds": np.asarray(params["ds"]),
        "ns": np.asarray(params["ns"]),
        "p_beta_d": p_d,
        "p_beta_n": p_n,
        "p_infinity_beta_d": closed,
        "beta_c": af.theory.homogenized_critical_beta(np.asarray(params["ds"])),
        "standard_error_beta_d": np.sqrt(p_d * (1 - p_d) / params["realizations"]),
        "check_ds": np.asarray(params["check_ds"]),
        "p_long": p_long,
        "p_infinity_check": closed_long,
        "p_pair_long": pair_long,
        "tradeoff_ns": tradeoff_ns,
        "tradeoff_ds": np.asarray(params["tradeoff_ds"]),
        "tradeoff_beta": tradeoff_beta,
        "antipodal_rate_check": rate,
        "standard_error_long": np.sqrt(
            np.maximum(pair_long * (1 - pair_long), 1e-2) / params["realizations"]
        ),
    }


def _probability_image(fig, ax, p, betas, rows, ylabel: str, title: str):
    """Probabilities p (len(rows), len(betas)) in [0, 1] as an image over β, one row per value
    of ``rows``, with its colour bar."""
    im = ax.imshow(
        p,
        origin="lower",
        aspect="auto",
        extent=[betas[0], betas[-1], -0.5, len(rows) - 0.5],
        vmin=0,
        vmax=1,
        cmap="viridis",
    )
    ax.set_yticks(range(len(rows)), [str(v) for v in rows])
    ax.set(xlabel="β", ylabel=ylabel, title=title)
    fig.colorbar(im, ax=ax)


def plot(result: dict, params: dict):
    import matplotlib.pyplot as plt

    betas, ds, ns = result["betas"], result["ds"], result["ns"]
    fig, axes = plt.subplots(1, 4, figsize=(21, 4.4))
    ax = axes[0]
    title = f"(a) P(⟨x₁, x₂⟩ ≥ 1−δ) at T = {params['t1']:g}, n = 2"
    _probability_image(fig, ax, result["p_beta_d"], betas, ds, "d", title)
    fine = np.linspace(2.0, ds.max(), 200)
    bc = af.theory.homogenized_critical_beta(fine)
    ax.plot(bc, np.interp(fine, ds, np.arange(len(ds))), color="w", lw=2, label="β_c(d)")
    ax.text(betas[-1] * 0.97, 0.2, "mitigated:\nd < 2 + cosh 2β", color="w", ha="right", va="top")
    ax.set_xlim(betas[0], betas[-1])
    ax.legend(loc="upper left")
    title = f"(b) P(⟨x₁, x₂⟩ ≥ 1−δ), d = {params['d_for_n']}"
    _probability_image(fig, axes[1], result["p_beta_n"], betas, ns, "n", title)
    ax = axes[2]
    for k, d in enumerate(result["check_ds"]):
        color = f"C{k % 10}"
        fine_b = np.linspace(betas[0], betas[-1], 60)
        ax.plot(betas, result["p_pair_long"][k], color=color, label=f"d = {d}: ρ-diffusion")
        ax.plot(
            fine_b,
            [af.theory.homogenized_collapse_probability(b, d) for b in fine_b],
            color=color,
            ls="--",
            lw=1,
            label="P(ρ(∞) = 1)" if k == 0 else None,
        )
        ax.errorbar(
            betas,
            result["p_long"][k],
            yerr=2 * result["standard_error_long"][k],
            fmt="o",
            ms=3,
            color=color,
        )
    ax.set_xlabel("β")
    ax.set_ylabel("P(collapse)")
    ax.set_title(
        f"(c) P(ρ ≥ 1−δ) at T = {params['t_long']:g}: SDE (dots, ±2 s.e.) vs ρ-diffusion\n"
        "(lines, same T); dashed: the T = ∞ closed form"
    )
    ax.legend(fontsize=7, ncol=2)
    ax = axes[3]
    ns_t = result["tradeoff_ns"]
    for k, d in enumerate(result["tradeoff_ds"]):
        ax.plot(ns_t, result["tradeoff_beta"][k], "o-", ms=3, color=f"C{k % 10}", label=f"d = {d}")
    ax.plot(ns_t, np.sqrt(np.log(ns_t)), "k--", lw=1, label="β = √(log n)")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("context length n")
    ax.set_ylabel("β")
    ax.set_title(
        "(d) random Q, K: collapse mitigated above the curves\n(linearised at orthonormal tokens)"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Simulate and write ``homogenized.{png,npz,json}``."""
    return compute_plot_write(
        out, "homogenized", compute, plot, params, seed, record=lambda r: _record(r, params)
    )


def _record(result: dict, params: dict) -> dict:
    # Like with like: the SDE and the ρ-diffusion at the same time t_long, in standard errors.
    gap = np.abs(result["p_long"] - result["p_pair_long"])
    deviation = gap / result["standard_error_long"]
    away = np.abs(result["antipodal_rate_check"]) >= 0.1
    return {
        "beta_c": dict(zip(map(str, params["ds"]), result["beta_c"].tolist(), strict=True)),
        "long_run_max_deviation_in_standard_errors": float(deviation[away].max(initial=0.0)),
        "long_run_max_deviation_near_threshold": float(deviation[~away].max(initial=0.0)),
    }
