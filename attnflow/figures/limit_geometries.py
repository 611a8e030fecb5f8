"""Limit geometries by the spectrum of V (GLPR23, arXiv:2305.05465; Table 1, docs/maths.md §1.8).

Five panels, each a run of the rescaled pure-attention dynamics (9.3) (Q = K = I, β = 1, n tokens
uniform on [−5, 5]^d, the authors' settings in clustering-Tformers.py) with the trajectories of
z = e^{−tV}x and what :func:`attnflow.models.limit_geometry` reads off the final configuration:

1. V = I: the convex hull and its vertices (Thm 3.1: each z_i tends to 0 or to a point of ∂K,
   vertices for generic data);
2. the authors' 2-d V with a simple top eigenvalue: the levels ψ₁·z = c (Thm 4.1);
3. V = diag(1, −0.5), paranormal: the C-coordinate at the two ends of an interval, the H
   coordinate free (Thm 5.1);
4. the authors' codimension-k example (3-d symmetric V, two positive eigenvalues) in 3-d;
5. d = 1 (embedded in d = 2 with Q = K = diag(1, 0)): the attention matrix at the final time,
   Boolean except possibly one row, which can be a general probability vector.

The JSON record lists, per panel, the eigenvalues, the hypotheses and the diagnostics.
"""

import pathlib
import time

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures._output import write_outputs

PRESETS = {
    "quick": {"n": 8, "t1": 3.0, "num_times": 16, "rtol": 1e-6},
    "default": {"n": 20, "t1": 5.0, "num_times": 51, "rtol": 1e-7},
    "full": {"n": 40, "t1": 8.0, "num_times": 161, "rtol": 1e-8},
}

PANELS = {
    "polytope": np.eye(2),
    "hyperplanes": np.array([[0.64709742, 0.81911926], [0.61210449, 0.63263484]]),
    "paranormal": np.diag([1.0, -0.5]),
    "codimension-k": np.array(
        [
            [0.92761287, 0.94333073, 0.3827744],
            [0.94333073, 0.59991396, 0.47825472],
            [0.3827744, 0.47825472, 0.46668605],
        ]
    ),
    "d = 1": np.eye(2),
}


def simulate(V, QK, x0, t1, num_times, rtol=1e-7):
    """(ts, z): the rescaled dynamics (9.3) saved at ``num_times`` uniform times on [0, t1]."""
    ts = jnp.linspace(0.0, t1, num_times)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(af.RescaledSelfAttention(1.0, QK, QK, V)),
        diffrax.Tsit5(),
        0.0,
        t1,
        0.01,
        x0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol * 1e-2),
        max_steps=100_000,
    )
    return np.asarray(ts), np.asarray(sol.ys)


def compute(params: dict, seed: int) -> dict:
    """Run every panel; returns {panel: {"ts", "z", "V", "geometry"}}."""
    jax.config.update("jax_enable_x64", True)
    out = {}
    for k, (name, V) in enumerate(PANELS.items()):
        d = V.shape[0]
        x0 = jr.uniform(jr.key(seed + k), (params["n"], d), jnp.float64, -5.0, 5.0)
        QK = np.eye(d)
        if name == "d = 1":
            x0 = x0.at[:, 1].set(0.0)
            QK = np.diag([1.0, 0.0])
        ts, z = simulate(
            jnp.asarray(V), jnp.asarray(QK), x0, params["t1"], params["num_times"], params["rtol"]
        )
        if name == "d = 1":
            z, V = z[..., :1], V[:1, :1]
        geometry = af.models.limit_geometry(z, V, t=float(ts[-1]))
        out[name] = {"ts": ts, "z": z, "V": V, "geometry": geometry}
    return out


def summary(panels: dict) -> dict:
    """Per panel: eigenvalues, hypotheses and diagnostics (JSON-ready)."""
    rows = {}
    for name, p in panels.items():
        g = p["geometry"]
        rows[name] = {
            "eigenvalues": [complex(w).__repr__() for w in g.spectrum.eigenvalues],
            "hyperplane_condition": g.spectrum.hyperplane_condition,
            "paranormal": g.spectrum.paranormal,
            "hull_vertices": int(g.hull_vertices.size),
            "max_vertex_distance": float(g.vertex_distance.max()),
            "num_levels": g.num_levels,
            "max_subspace_vertex_distance": float(np.nanmax(g.subspace_vertex_distance))
            if g.spectrum.paranormal
            else None,
            "boolean_distance": g.boolean_distance,
            "general_rows": int(g.general_rows.size),
        }
    return rows


def plot(panels: dict):
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(20, 4.2))
    for k, (name, p) in enumerate(panels.items()):
        z, g = p["z"], p["geometry"]
        if name == "codimension-k":
            ax = fig.add_subplot(1, 5, k + 1, projection="3d")
            for i in range(z.shape[1]):
                ax.plot(*z[:, i].T, lw=0.6, color="#9f4292", alpha=0.6)
            ax.scatter(*z[-1].T, color="#9f4292", edgecolor="k", s=18)
        elif name == "d = 1":
            ax = fig.add_subplot(1, 5, k + 1)
            ax.matshow(g.attention, cmap="Blues", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_xlabel(
                f"non-Boolean rows {g.general_rows.size}, "
                f"max min(a, 1−a) = {g.boolean_distance:.1e}",
                fontsize=8,
            )
        else:
            ax = fig.add_subplot(1, 5, k + 1)
            for i in range(z.shape[1]):
                ax.plot(z[:, i, 0], z[:, i, 1], lw=0.6, ls="--", color="0.5")
            ax.scatter(z[0, :, 0], z[0, :, 1], s=8, color="0.7")
            ax.scatter(z[-1, :, 0], z[-1, :, 1], s=22, color="C1", edgecolor="k", zorder=3)
            lo, hi = z[-1].min(axis=0), z[-1].max(axis=0)
            if name == "polytope":
                v = z[-1][g.hull_vertices]
                c = v.mean(axis=0)
                v = v[np.argsort(np.arctan2(v[:, 1] - c[1], v[:, 0] - c[0]))]
                ax.fill(v[:, 0], v[:, 1], alpha=0.15, color="C1")
            elif name == "hyperplanes":
                psi = g.spectrum.psi1
                s = np.linspace(lo[0] - 2, hi[0] + 2, 2)
                for level in g.levels:  # ψ₁·z = level, drawn as a line in the plane
                    ax.plot(s, (level - psi[0] * s) / psi[1], color="C0", lw=1)
                ax.set_ylim(lo[1] - 2, hi[1] + 2)
            elif name == "paranormal":
                for c in np.unique(np.round(g.subspace_coordinates[:, 0], 6)):
                    ax.axvline(c * g.spectrum.C[0, 0], color="C2", lw=1)
            ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(name, fontsize=10)
    fig.suptitle(
        "Limit geometries of the rescaled tokens z = e^{−tV}x (GLPR23 Table 1): "
        f"t = {panels['polytope']['ts'][-1]:g}",
        fontsize=11,
    )
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Simulate, diagnose, plot and write ``limit_geometries.{png,npz,json}``."""
    start = time.perf_counter()
    panels = compute(params, seed)
    computed = time.perf_counter()
    fig = plot(panels)
    data = {}
    for name, p in panels.items():
        key = name.replace(" ", "").replace("=", "").replace("-", "_")
        data[f"{key}_z"], data[f"{key}_V"], data[f"{key}_ts"] = p["z"], p["V"], p["ts"]
        data[f"{key}_attention"] = p["geometry"].attention
    timings = {"compute": computed - start, "plot": time.perf_counter() - computed}
    record = {**params, "seed": seed, "panels": summary(panels)}
    return write_outputs(out, "limit_geometries", fig, data, record, timings)
