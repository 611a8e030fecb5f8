"""Types of the extremisers of E(μ) = ∬ e^{xᵀDy} dμ dμ over measures on the circle, for
diagonal D = diag(d1, d2) (BKKRW, arXiv:2501.03096, cf. their Figs. 6–7): maximisers (left) and
minimisers (right), computed with :func:`attnflow.landscape.maximize_measure_energy` /
:func:`attnflow.landscape.minimize_measure_energy` (grid of ``points`` candidates, particle moves,
three starts: uniform, mass near e2, mass near e1; the best is kept), with the proven boundaries
overlaid:

- maximisers: Dirac at a top eigenvector where λ_max > log cosh λ_min, antipodal pair below
  (max E = max(e^{λ_max}, cosh λ_min), :func:`attnflow.theory.maximum_energy`); the switch curve
  is drawn where λ_min ≤ 0 only (for λ_min > 0 the maximiser is always a Dirac);
- minimisers: Dirac at a bottom eigenvector where λ_min < 0 and λ_max ≤ |λ_min| (the lines
  d2 = −d1 bound it), the kernel (any measure on ker D) on the half-axes d1 = 0 ≤ d2 and
  d2 = 0 ≤ d1, the uniform measure on the diagonal d1 = d2 > 0.

The JSON/NPZ record the type and energy at every grid point and whether the energy equals the
proven value where one is known.
"""

import pathlib
import time

import numpy as np

import attnflow as af
from attnflow import theory
from attnflow.figures._output import write_outputs

PRESETS = {
    "quick": {"values": 2, "extent": 1.5, "points": 32},
    "default": {"values": 13, "extent": 2.0, "points": 96},
    "full": {"values": 25, "extent": 2.0, "points": 128},
}

KINDS = ["dirac", "antipodal pair", "atomic", "diffuse"]


def _best(optimise, D, points, starts, maximize):
    runs = [optimise(D, points, w, move_particles=True, tol=1e-7) for w in starts]
    pick = max if maximize else min
    return pick(runs, key=lambda r: float(r.energy))


def compute(params: dict):
    import jax

    jax.config.update("jax_enable_x64", True)
    values = np.linspace(-params["extent"], params["extent"], params["values"])
    points = af.landscape.sphere_points(params["points"], 2)
    xy = np.asarray(points)
    starts = [None, np.exp(5 * xy[:, 1] ** 2), np.exp(5 * xy[:, 0] ** 2)]
    shape = (len(values), len(values))
    data = {
        "values": values,
        "max_kind": np.zeros(shape, int),
        "min_kind": np.zeros(shape, int),
        "max_energy": np.zeros(shape),
        "min_energy": np.zeros(shape),
        "max_proven": np.zeros(shape),
        "min_proven": np.full(shape, np.nan),
    }
    for i, d1 in enumerate(values):
        for j, d2 in enumerate(values):
            D = np.diag([d1, d2])
            r = _best(af.landscape.maximize_measure_energy, D, points, starts, True)
            data["max_kind"][i, j] = KINDS.index(r.kind())
            data["max_energy"][i, j] = float(r.energy)
            data["max_proven"][i, j] = theory.maximum_energy(D)
            r = _best(af.landscape.minimize_measure_energy, D, points, starts, False)
            data["min_kind"][i, j] = KINDS.index(r.kind())
            data["min_energy"][i, j] = float(r.energy)
            proven = theory.minimizer(D)
            if proven is not None:
                data["min_proven"][i, j] = proven[3]
    return data


def plot(data):
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    values = data["values"]
    extent = (values[0], values[-1])
    colors = ListedColormap(["#d62728", "#1f77b4", "#2ca02c", "#bbbbbb"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
    lam = np.linspace(extent[0], extent[1], 400)
    for ax, key, title in zip(
        axes, ("max_kind", "min_kind"), ("maximisers", "minimisers"), strict=True
    ):
        ax.imshow(
            data[key].T,
            origin="lower",
            extent=(*extent, *extent),
            cmap=colors,
            vmin=-0.5,
            vmax=3.5,
            interpolation="nearest",
        )
        ax.set_title(title)
        ax.set_xlabel("$d_1$")
        ax.set_xlim(extent)
        ax.set_ylim(extent)
    # The switch λ_max = log cosh λ_min is a boundary only where λ_min ≤ 0: for λ_min > 0,
    # cosh λ_min < e^{λ_min} ≤ e^{λ_max} and the maximiser is always a Dirac.
    below = lam[lam <= 0]
    switch = np.log(np.cosh(below))
    axes[0].plot(below, switch, "k-", lw=1.5, label=r"$\lambda_{\max} = \log\cosh\lambda_{\min}$")
    axes[0].plot(switch, below, "k-", lw=1.5)
    axes[0].legend(loc="lower right", fontsize=8)
    neg = lam[lam < 0]
    axes[1].plot(neg, -neg, "k--", lw=1.2, label=r"$\lambda_{\max} = |\lambda_{\min}|$")
    axes[1].plot(-neg, neg, "k--", lw=1.2)
    pos = lam[lam >= 0]
    axes[1].plot(0 * pos, pos, "k:", lw=2, label="kernel (E = 1)")
    axes[1].plot(pos, 0 * pos, "k:", lw=2)
    axes[1].plot(pos, pos, "w-", lw=1.2, label="uniform")
    axes[1].legend(loc="lower right", fontsize=8)
    axes[0].set_ylabel("$d_2$")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors(k)) for k in range(4)]
    fig.legend(handles, KINDS, loc="upper center", ncol=4, frameon=False)
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute the extremiser types over the (d1, d2) grid and write the figure (seed unused:
    the computation is deterministic)."""
    del seed
    start = time.perf_counter()
    data = compute(params)
    computed = time.perf_counter()
    fig = plot(data)
    timings = {"compute": computed - start, "plot": time.perf_counter() - computed}
    record = dict(params)
    record["max_energy_matches_proven"] = bool(
        np.allclose(data["max_energy"], data["max_proven"], rtol=1e-8)
    )
    known = np.isfinite(data["min_proven"])
    record["min_energy_matches_proven_fraction"] = float(
        np.mean(np.isclose(data["min_energy"][known], data["min_proven"][known], rtol=1e-6))
    )
    return write_outputs(out, "measure_landscape", fig, data, record, timings)
