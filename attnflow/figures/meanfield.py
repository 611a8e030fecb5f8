"""The first metastable plateau from a perturbed uniform density: the mean-field density (the PDE,
:func:`attnflow.meanfield.solve_density`) against particles at several n, and the number of
bumps against :func:`attnflow.theory.metastable_cluster_count` (Bruno–Pasqualotto–Agazzi,
arXiv:2410.23228, Theorem 4.3: the fastest-growing Fourier mode ℓ* sets the number of clusters).

The PDE starts from ρ₀ = 1 + ε Σ_k (g_k cos kθ + h_k sin kθ), g, h standard Gaussian on the modes
k ≤ ``perturbed_modes``, and is saved until its maximum reaches ``plateau_height`` (clusters
formed, still resolved): that time t_p is the plateau. Particles are sampled from ρ₀
(:func:`attnflow.meanfield.sample_density`; their own n^{-1/2} fluctuation is larger than ε, so
they get there sooner, and stay: the plateau is metastable), solved with
:func:`attnflow.solve` to t_p, and their kernel density estimate (bandwidth ``bandwidth``) is
counted the same way as the PDE density: local maxima above 1 (the uniform density). The PDE
uses ``resolution_tol`` (1e-4: the bumps need far less than the default 1e-6); the solve
stops honestly a few time units after the plateau, when the clusters contract below the
modes' resolution.
"""

import pathlib

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures._output import compute_plot_write

PRESETS = {
    "quick": {
        "beta": 9.0,
        "modes": 48,
        "perturbed_modes": 12,
        "epsilon": 1e-3,
        "ns": [300],
        "bandwidth": 0.15,
        "plateau_height": 2.0,
        "horizon": 40.0,
        "num_times": 161,
        "resolution_tol": 1e-4,
    },
    "default": {
        "beta": 9.0,
        "modes": 64,
        "perturbed_modes": 16,
        "epsilon": 1e-3,
        "ns": [1000, 10_000],
        "bandwidth": 0.15,
        "plateau_height": 2.0,
        "horizon": 40.0,
        "num_times": 321,
        "resolution_tol": 1e-4,
    },
    "full": {
        "beta": 9.0,
        "modes": 64,
        "perturbed_modes": 16,
        "epsilon": 1e-3,
        "ns": [1000, 10_000, 100_000],
        "bandwidth": 0.15,
        "plateau_height": 2.0,
        "horizon": 40.0,
        "num_times": 321,
        "resolution_tol": 1e-4,
    },
}

_EVALUATION_POINTS = 2048


def count_bumps(values, level: float = 1.0) -> int:
    """The number of local maxima above ``level`` of a periodic sequence of values."""
    v = np.asarray(values)
    peak = (v > np.roll(v, 1)) & (v >= np.roll(v, -1)) & (v > level)
    return int(np.sum(peak))


def initial_density(grid, params: dict, seed: int):
    K, k0 = grid.modes, params["perturbed_modes"]
    g = np.random.default_rng(seed).normal(size=(2, k0))
    c = np.zeros(2 * K + 1)
    c[0] = 1.0
    c[1 : k0 + 1] = params["epsilon"] * g[0]
    c[K + 1 : K + k0 + 1] = params["epsilon"] * g[1]
    return jnp.asarray(c)


def compute(params: dict, seed: int) -> dict:
    from attnflow import meanfield as mf

    beta = float(params["beta"])
    grid = mf.CircleGrid(params["modes"])
    fine = mf.CircleGrid(params["modes"], points=_EVALUATION_POINTS)
    c0 = initial_density(grid, params, seed)
    ts = jnp.linspace(0.0, params["horizon"], params["num_times"])
    sol = mf.solve_density(
        grid,
        c0,
        params["horizon"],
        beta=beta,
        ts=ts,
        throw=False,
        resolution_tol=params["resolution_tol"],
    )
    values = np.asarray(jax.vmap(fine.to_values)(sol.coefficients))
    peak = np.max(np.where(np.isfinite(values), values, -np.inf), axis=1)
    reached = np.flatnonzero(peak >= params["plateau_height"])
    if len(reached) == 0:
        raise RuntimeError(
            f"meanfield figure: max ρ stayed below {params['plateau_height']} up to "
            f"t = {float(sol.t_stop):g} (resolved: {bool(sol.resolved)}); raise the horizon"
        )
    index = int(reached[0])
    t_plateau = float(ts[index])
    pde = values[index]
    data = {
        "beta": beta,
        "t_plateau": t_plateau,
        "theta": np.asarray(fine.angles()),
        "pde": pde,
        "pde_bumps": count_bumps(pde),
        "theory_bumps": af.theory.metastable_cluster_count(beta),
        "ns": np.asarray(params["ns"]),
    }
    field = af.SelfAttention(beta)
    for i, n in enumerate(params["ns"]):
        x0 = mf.sample_density(jr.key(seed + 1 + i), grid, c0, int(n))
        x = af.solve(field, x0, t_plateau, rtol=1e-5, atol=1e-7).ys[-1]
        estimate = mf.density_from_particles(grid, x, bandwidth=params["bandwidth"])
        kde = np.asarray(fine.to_values(estimate))
        data[f"particles_{n}"] = np.asarray(jnp.arctan2(x[:, 1], x[:, 0]))
        data[f"kde_{n}"] = kde
        data[f"bumps_{n}"] = count_bumps(kde)
    return data


def plot(data: dict, params: dict):
    from attnflow.plot._common import plt

    ns = [int(n) for n in data["ns"]]
    fig, axes = plt.subplots(1, 1 + len(ns), figsize=(3.6 * (1 + len(ns)), 3.4), sharey=True)
    theta = data["theta"]
    axes[0].plot(theta, data["pde"], color="C0")
    axes[0].set(
        title=f"PDE: {int(data['pde_bumps'])} bumps (theory ℓ* = {int(data['theory_bumps'])})",
        xlabel="θ",
        ylabel=f"density at t = {float(data['t_plateau']):.3g}",
    )
    for ax, n in zip(axes[1:], ns, strict=True):
        # Densities w.r.t. σ = dθ/2π throughout (the uniform density is 1).
        counts, edges = np.histogram(
            data[f"particles_{n}"] % (2 * np.pi), bins=90, range=(0, 2 * np.pi), density=True
        )
        ax.stairs(2 * np.pi * counts, edges, fill=True, color="0.8", label="particles")
        ax.plot(theta, data[f"kde_{n}"], color="C1", label="KDE")
        ax.plot(theta, data["pde"], color="C0", lw=0.8, ls="--", label="PDE")
        ax.set(title=f"n = {n}: {int(data[f'bumps_{n}'])} bumps", xlabel="θ")
    axes[1].legend(fontsize=7)
    top = max(np.max(data["pde"]), *(np.max(data[f"kde_{n}"]) for n in ns))
    axes[0].set_ylim(0, 1.4 * top)  # the histograms of collapsed clusters are clipped
    fig.suptitle(f"SA, β = {float(data['beta']):g}: the first metastable plateau", fontsize=10)
    fig.tight_layout()
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``meanfield.{png,npz,json}``."""
    jax.config.update("jax_enable_x64", True)
    return compute_plot_write(out, "meanfield", compute, plot, params, seed, record=_record)


def _record(data: dict) -> dict:
    return {
        "t_plateau": float(data["t_plateau"]),
        "pde_bumps": int(data["pde_bumps"]),
        "theory_bumps": int(data["theory_bumps"]),
        **{f"bumps_n{int(n)}": int(data[f"bumps_{int(n)}"]) for n in data["ns"]},
    }
