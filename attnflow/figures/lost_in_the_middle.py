"""Lost in the middle: the U-shaped retrieval profile of the causal ALiBi particle system
(Duerinckx, Geshkovski, Rossi 2026; :func:`attnflow.theory.lost_in_the_middle_profile`).

Panels:

1. S_t(s) in closed form (the N → ∞ limit) at t = 1, 2, 3, with particle Monte Carlo estimates
   of the model on the circle at growing N overlaid (error bars: two standard errors);
2. particles / closed form in the middle of the prompt against N: the convergence in N;
3. t_crit(β) (:func:`attnflow.theory.lost_in_the_middle_threshold`) for a few λ;
4. a multi-head profile with a double well: a weighted sum of single-head profiles (the
   authors' example: t = 1.5, heads (weight, β, λ) below).

The Monte Carlo. N tokens with i.i.d. uniform angles follow the θ-equation of the model
(:func:`angle_field`, the circle form of :class:`attnflow.CausalALiBiAttention`; the tests
check both against one NumPy RK4 of the θ-equation),

    θ̇_j = Σ_{k<j} w_jk · (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}),  w_jk ∝ e^{−λ(j−k)/N},

integrated with classical RK4. The profile is lim N·Σ_n ω_n E cos(n(θ_N(t) − θ_k(0))), k = sN:
a mean of O(1/N) hidden under O(1) noise. A coupling removes that noise: the same run is
repeated with θ_k(0) replaced by an independent θ'_k, and since the second run is independent of
θ_k(0), E cos(n(θ'_N(t) − θ_k(0))) = 0, so

    N·[cos n(θ_N(t) − θ_k) − cos n(θ'_N(t) − θ_k) + cos n(θ'_N(t) − θ'_k) − cos n(θ_N(t) − θ'_k)]/2

is unbiased with O(1) variance (measured: 100-1000 times fewer realisations than the naive
estimator for the same error).

Linear response (the closed form) keeps only first-order correlations. The finite-N linear
response (:func:`linear_response_profile`, a matrix exponential) approaches the closed form as
O(1/N). The particles approach the closed form too, more slowly and the more slowly the larger t
(nonlinear finite-N effects): panel 2 shows it, :func:`particle_convergence` measures it.
"""

import functools
import pathlib

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow.theory as theory
from attnflow.figures._output import compute_plot_write

DOUBLE_WELL_HEADS = (
    (1.0, 0.2, 3.0),
    (-27.519314453632965, 0.2, 0.25),
    (-1.5515192155322617, 0.5, 0.25),
    (3.9262326774050965e-06, 3.0, 2.0),
)
"""(weight, β, λ) of the authors' common-M double-well example, evaluated at t = 1.5."""

PRESETS = {
    "quick": {
        "beta": 1.0,
        "lam": 1.0,
        "ts": [1.0, 2.0, 3.0],
        "Ns": [8, 16],
        "sources": [0.25, 0.5, 0.75],
        "realizations": 64,
        "dt": 0.1,
        "threshold_lams": [0.5, 1.0, 2.0],
        "points": 101,
    },
    "default": {
        "beta": 1.0,
        "lam": 1.0,
        "ts": [1.0, 2.0, 3.0],
        "Ns": [16, 32, 64, 128],
        "sources": [0.25, 0.5, 0.75],
        "realizations": 512,
        "dt": 0.1,
        "threshold_lams": [0.25, 0.5, 1.0, 2.0, 4.0],
        "points": 400,
    },
    "full": {
        "beta": 1.0,
        "lam": 1.0,
        "ts": [1.0, 2.0, 3.0],
        "Ns": [16, 32, 64, 128, 256],
        "sources": [0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875],
        "realizations": 1024,
        "dt": 0.05,
        "threshold_lams": [0.25, 0.5, 1.0, 2.0, 4.0],
        "points": 800,
    },
}


def alibi_weights(N: int, lam: float, dtype=np.float64) -> np.ndarray:
    """w_jk = e^{−λ(j−k)/N} / Σ_{k'<j} e^{−λ(j−k')/N} for k < j, 0 otherwise; shape (N, N).
    Row 0 (the first token, which attends to nothing) is zero."""
    j = np.arange(N)[:, None]
    k = np.arange(N)[None, :]
    w = np.where(k < j, np.exp(-lam * (j - k) / N), 0.0)
    total = w.sum(axis=1, keepdims=True)
    return np.divide(w, total, out=np.zeros_like(w), where=total > 0).astype(dtype)


def angle_field(theta, beta, weights):
    """θ̇_j = Σ_k w_jk (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}) for angles ``theta`` (N,)."""
    diff = theta[:, None] - theta[None, :]
    return jnp.sum(weights * (-beta * jnp.sin(diff) * jnp.exp(beta * jnp.cos(diff))), axis=1)


@functools.partial(jax.jit, static_argnames=("steps",))
def _rk4(theta0, beta, weights, dt, steps):
    def step(theta, _):
        k1 = angle_field(theta, beta, weights)
        k2 = angle_field(theta + 0.5 * dt * k1, beta, weights)
        k3 = angle_field(theta + 0.5 * dt * k2, beta, weights)
        k4 = angle_field(theta + dt * k3, beta, weights)
        theta = theta + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return theta, theta

    _, path = jax.lax.scan(step, theta0, None, length=steps)
    return path


def simulate_angles(theta0, ts, beta: float, lam: float, dt: float):
    """RK4 of the θ-equation with step ``dt`` from ``theta0`` (..., N); returns the angles at the
    times ``ts`` (each a multiple of dt), shape (len(ts), ..., N)."""
    theta0 = jnp.asarray(theta0)
    ts = np.asarray(ts, dtype=float)
    index = np.rint(ts / dt).astype(int)
    if np.any(np.abs(index * dt - ts) > 1e-9 * np.maximum(1, ts)) or np.any(index < 0):
        raise ValueError(f"ts: expected non-negative multiples of dt = {dt}, got {ts.tolist()}")
    N = theta0.shape[-1]
    weights = jnp.asarray(alibi_weights(N, lam), theta0.dtype)
    flat = theta0.reshape(-1, N)
    steps = int(index.max(initial=0))
    run = jax.vmap(lambda th: _rk4(th, jnp.asarray(beta, th.dtype), weights, dt, steps))
    path = jnp.concatenate([flat[None], jnp.moveaxis(run(flat), 1, 0)], axis=0)
    return path[index].reshape((len(ts),) + theta0.shape)


def _kernel_weights(M, n_max):
    n = np.arange(1, n_max + 1)
    return n, np.exp(-0.5 * (np.pi * n / M) ** 2)


def monte_carlo_profile(
    key,
    N: int,
    ts,
    sources,
    beta: float,
    lam: float,
    *,
    realizations: int,
    dt: float = 0.025,
    M: float = 8.0,
    n_max: int = 20,
    batch: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """Particle estimate of N·Σ_n ω_n E cos(n(θ_N(t) − θ_k(0))) with the coupling estimator of
    the module docstring, for source positions s = k/N in ``sources`` (rounded to the nearest
    token, k ≥ 1). Returns (mean, standard error), each of shape (len(ts), len(sources)).
    """
    ks = np.clip(np.rint(np.asarray(sources, float) * N).astype(int), 1, N - 1) - 1
    modes, omega = _kernel_weights(M, n_max)
    dtype = jnp.result_type(float)
    samples = []
    for start in range(0, realizations, batch):
        size = min(batch, realizations - start)
        key, k0, k1 = jr.split(key, 3)
        theta = jr.uniform(k0, (size, N), dtype, 0.0, 2 * np.pi)
        fresh = jr.uniform(k1, (size, len(ks)), dtype, 0.0, 2 * np.pi)
        replaced = jnp.repeat(theta[:, None, :], len(ks), axis=1)
        replaced = replaced.at[:, np.arange(len(ks)), ks].set(fresh)
        paths = simulate_angles(jnp.concatenate([theta[:, None], replaced], 1), ts, beta, lam, dt)
        last = np.asarray(paths[..., N - 1])  # (T, size, 1 + S)
        a, b = np.asarray(theta)[:, ks], np.asarray(fresh)  # (size, S)
        A, B = last[:, :, :1, None], last[:, :, 1:, None]
        n = modes[None, None, None, :]
        terms = (
            np.cos(n * (A - a[None, ..., None]))
            - np.cos(n * (B - a[None, ..., None]))
            + np.cos(n * (B - b[None, ..., None]))
            - np.cos(n * (A - b[None, ..., None]))
        )
        samples.append(0.5 * N * np.sum(omega * terms, axis=-1))  # (T, size, S)
    values = np.concatenate(samples, axis=1)
    return values.mean(axis=1), values.std(axis=1, ddof=1) / np.sqrt(values.shape[1])


def linear_response_profile(
    N: int, ts, sources, beta: float, lam: float, *, M: float = 8.0, n_max: int = 20
) -> np.ndarray:
    """The finite-N linear response: N·Σ_n ω_n [exp(a_n t W)]_{N,k}, W = :func:`alibi_weights`,
    a_n = n² I_n(β), the exact solution of the linearised correlation system
    dC_n/dt = a_n W C_n, C_n(0) = I. Shape (len(ts), len(sources)); tends to the closed form
    as O(1/N)."""
    from scipy.linalg import expm
    from scipy.special import ive

    ks = np.clip(np.rint(np.asarray(sources, float) * N).astype(int), 1, N - 1) - 1
    modes, omega = _kernel_weights(M, n_max)
    a = modes**2 * ive(modes, beta) * np.exp(beta)
    W = alibi_weights(N, lam)
    out = np.zeros((len(ts), len(ks)))
    for i, t in enumerate(np.asarray(ts, float)):
        for n in range(n_max):
            out[i] += omega[n] * N * expm(a[n] * t * W)[N - 1, ks]
    return out


def particle_convergence(
    key, Ns, ts, sources, beta: float, lam: float, *, realizations: int, dt: float = 0.1
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`monte_carlo_profile` for each N in ``Ns`` (independent keys), at source positions
    ``sources`` that every N resolves exactly (s·N an integer). Returns (mean, standard error),
    each of shape (len(Ns), len(ts), len(sources)): the particle estimates whose N → ∞ limit
    is :func:`attnflow.theory.lost_in_the_middle_profile`."""
    sources = np.asarray(sources, float)
    for N in Ns:
        k = sources * N
        if np.any(np.abs(k - np.rint(k)) > 1e-9) or np.any(k < 1) or np.any(k > N - 1):
            raise ValueError(f"sources: expected positions s with s·N in 1..N−1 for N = {N}")
    out = [
        monte_carlo_profile(
            jr.fold_in(key, N), int(N), ts, sources, beta, lam, realizations=realizations, dt=dt
        )
        for N in Ns
    ]
    return np.stack([m for m, _ in out]), np.stack([e for _, e in out])


def compute(params: dict, seed: int) -> dict:
    beta, lam = params["beta"], params["lam"]
    s = np.linspace(0.02, 1.0, params["points"])
    ts = np.asarray(params["ts"], float)
    profiles = np.stack(
        [np.asarray(theory.lost_in_the_middle_profile(s, t, beta, lam)) for t in ts]
    )
    Ns = [int(N) for N in params["Ns"]]
    mc_mean, mc_err = particle_convergence(
        jr.key(seed),
        Ns,
        ts,
        params["sources"],
        beta,
        lam,
        realizations=params["realizations"],
        dt=params["dt"],
    )
    betas = np.linspace(0.1, 4.8, params["points"])
    lams = np.asarray(params["threshold_lams"], float)
    thresholds = np.array(
        [[theory.lost_in_the_middle_threshold(float(b), float(lm)) for b in betas] for lm in lams]
    )
    double_well = sum(
        weight * np.asarray(theory.lost_in_the_middle_profile(s, 1.5, b, lm))
        for weight, b, lm in DOUBLE_WELL_HEADS
    )
    sources = np.asarray(params["sources"], float)
    return {
        "s": s,
        "ts": ts,
        "profiles": profiles,
        "t_crit": np.array(theory.lost_in_the_middle_threshold(beta, lam)),
        "mc_Ns": np.asarray(Ns),
        "mc_sources": sources,
        "mc_mean": mc_mean,
        "mc_stderr": mc_err,
        "mc_closed_form": np.stack(
            [np.asarray(theory.lost_in_the_middle_profile(sources, t, beta, lam)) for t in ts]
        ),
        "threshold_betas": betas,
        "threshold_lams": lams,
        "thresholds": thresholds,
        "double_well": double_well,
    }


def plot(data: dict, params: dict):
    from attnflow.plot._common import plt

    fig, axes = plt.subplots(1, 4, figsize=(21, 4.6))
    ax = axes[0]
    colors = plt.cm.viridis(np.linspace(0, 0.85, len(data["ts"])))
    Ns = data["mc_Ns"]
    markers = "os^Dv<>p"
    for i, (t, profile, color) in enumerate(zip(data["ts"], data["profiles"], colors, strict=True)):
        ax.plot(data["s"], profile, color=color, lw=2, label=f"closed form (N → ∞), t = {t:g}")
        for j, N in enumerate(Ns):
            shift = (j - (len(Ns) - 1) / 2) * 0.012
            ax.errorbar(
                data["mc_sources"] + shift,
                data["mc_mean"][j, i],
                yerr=2 * data["mc_stderr"][j, i],
                fmt=markers[j % len(markers)],
                ms=4,
                color=color,
                alpha=0.35 + 0.65 * (j + 1) / len(Ns),
                capsize=2,
                label=f"N = {N}" if i == 0 else None,
            )
    ax.set(
        xlabel="source position s",
        ylabel="soft accuracy S_t(s)",
        title=(
            f"(a) β = {params['beta']:g}, λ = {params['lam']:g}: closed form (lines), particles "
            f"at N = {', '.join(map(str, Ns))}\n(markers, ±2 s.e.; t_crit = "
            f"{float(data['t_crit']):.4f})"
        ),
    )
    # The profiles diverge as s → 0 (ψ grows with Y_λ(s)); show the range the particles probe.
    shown = data["s"] >= 0.5 * min(data["mc_sources"])
    top = max(data["profiles"][:, shown].max(), (data["mc_mean"] + 2 * data["mc_stderr"]).max())
    ax.set_ylim(min(0.0, (data["mc_mean"] - 2 * data["mc_stderr"]).min()), 1.1 * top)
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1]
    ratio = data["mc_mean"] / data["mc_closed_form"][None]
    ratio_err = data["mc_stderr"] / data["mc_closed_form"][None]
    middle = len(data["mc_sources"]) // 2
    for i, (t, color) in enumerate(zip(data["ts"], colors, strict=True)):
        ax.errorbar(
            Ns, ratio[:, i, middle], yerr=2 * ratio_err[:, i, middle], fmt="o-", color=color,
            capsize=2, label=f"t = {t:g}",
        )  # fmt: skip
    ax.axhline(1.0, color="k", lw=1, ls="--", label="closed form")
    ax.set(
        xscale="log",
        xlabel="number of tokens N",
        ylabel="particles / closed form",
        title=f"(b) convergence in N at s = {data['mc_sources'][middle]:g} (±2 s.e.)",
        ylim=(0, 1.3),
    )
    ax.set_xticks(Ns, [str(N) for N in Ns])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.legend(fontsize=8)
    ax = axes[2]
    for lam, curve in zip(data["threshold_lams"], data["thresholds"], strict=True):
        ax.plot(data["threshold_betas"], curve, label=f"λ = {lam:g}")
    ax.set(
        xlabel="β",
        ylabel="t_crit",
        yscale="log",
        title="(c) U shape (interior minimum) for t < t_crit",
    )
    ax.legend(fontsize=8)
    ax = axes[3]
    well = data["double_well"]
    ax.plot(data["s"], well - well.min())
    ax.set(
        xlabel="source position s",
        ylabel="S(s) − min S",
        title="(d) multi-head profile (4 heads, t = 1.5): a double well",
    )
    fig.tight_layout()
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``lost_in_the_middle.{png,npz,json}``."""
    jax.config.update("jax_enable_x64", True)
    return compute_plot_write(
        out,
        "lost_in_the_middle",
        compute,
        plot,
        params,
        seed,
        record=lambda data: {"t_crit": float(data["t_crit"])},
    )
