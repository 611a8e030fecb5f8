"""Dynamic metastability: the energy staircase of (USA) on the circle at large β
(docs/maths.md §10).

Tokens x_i = (cos θ_i, sin θ_i) follow (USA), paper (7.1),

    θ̇_i = −(1/n) Σ_j e^{β cos(θ_i − θ_j)} sin(θ_i − θ_j),

from i.i.d. uniform angles, over many decades of time. They first collapse into a few clusters
(t ~ e^{−β}), which then sit still until t ~ e^{−β cos u} — e^{β(1 − cos u)} collapse times, u
the gap to the neighbouring cluster (GKPR24's metastable time scale e^{(1−α)β}) — before merging
pairwise, until one cluster is left. Along the way the normalised energy

    φ(t) = 2β e^{−β} E_β(x(t)) = (1/n²) Σ_ij e^{β(⟨x_i, x_j⟩ − 1)} ∈ (0, 1]

climbs a staircase whose plateaux are Σ_q m_q² over the clusters' masses m_q (up to the
cross-cluster terms m_q m_r e^{β(cos u_qr − 1)}). φ is evaluated with the shift e^{−β} inside
the exponential (:func:`attnflow.energy_along` with ``log_shift=β``), so it is finite for any β,
and the angles are integrated directly, so tokens are (cos θ, sin θ) exactly at every time, after
the last merge included (the issue reports NaN there from the published script).

Why angles and an implicit solver: collapsed clusters contract at rate ~ e^β while the plateau
before a merge at gap u lasts ~ e^{−β cos u}: a stiffness ratio e^{β(1 − cos u)}, up to e^{2β}.
An explicit solver (or :func:`attnflow.solve` in R^{n×2}, whose renormalisation re-injects
rounding into the stiff modes) needs ~ e^β steps per unit time; the L-stable Kvaerno5 with a
Newton solve on the angle ODE (:func:`attnflow.landscape.circle_field`) crosses 15+ decades of
time in a few hundred steps in float64
(measured: n = 32, β = 12, 644 steps; n = 64, β = 12, 673 steps, rtol = 1e-8). Larger β needs a
looser tolerance (β = 16 ran at rtol = 1e-6 in 581 steps but not at 1e-8 within 3000): the
error estimate then sees rounding amplified by the stiffness. The test suite checks the run
against :func:`attnflow.solve` of ``SelfAttention(β, normalization="n")`` on its early part and
against the exact two-body reduction u̇ = −e^{β cos u} sin u through the last merge.

At large β (up to 1000 and beyond) the figure also runs the time-rescaled flow of
:func:`attnflow.models.rescaled_staircase` (s = arclength / log β, the authors' ``time_rescale_3``
integrated exactly) and compares its merges with :func:`attnflow.models.collision_model`:
``staircase_rescaled.{png,npz,json}`` and ``staircase_rescaled_merges.json``.

Merge events are read off :func:`attnflow.cluster_labels` (δ-graph components) between
consecutive save times and written to ``staircase_merges.json`` and ``.csv``.
"""

import csv
import functools
import json
import pathlib
import time

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optimistix as optx

import attnflow as af
from attnflow.figures._output import write_outputs

# The clustering threshold and the tight tolerances that resolve exponentially long plateaus.
TOLERANCES = {"delta": 1e-3, "rtol": 1e-8, "atol": 1e-10}

PRESETS = {
    "quick": {
        "n": 8,
        "beta": 10.0,
        "t1": 1e8,
        "num_times": 120,
        **TOLERANCES,
        "max_steps": 4000,
        "rescaled_n": 8,
        "rescaled_beta": 100.0,
    },
    "default": {
        "n": 32,
        "beta": 12.0,
        "t1": 1e10,
        "num_times": 400,
        **TOLERANCES,
        "max_steps": 20000,
        "rescaled_n": 32,
        "rescaled_beta": 1000.0,
    },
    "full": {
        "n": 64,
        "beta": 12.0,
        "t1": 1e11,
        "num_times": 1000,
        **TOLERANCES,
        "max_steps": 20000,
        "rescaled_n": 32,
        "rescaled_beta": 1000.0,
    },
}


def save_times(beta: float, t1: float, num_times: int) -> np.ndarray:
    """t = 0 followed by ``num_times`` log-spaced times from 10^{-2} e^{−β} (before the first
    collapse) to t1."""
    start = -2 - beta / np.log(10)
    return np.concatenate([[0.0], np.logspace(start, np.log10(t1), num_times)])


@functools.partial(jax.jit, static_argnames=("max_steps",))
def _integrate(theta0, beta, ts, rtol, atol, max_steps):
    def field(t, theta, args):
        return af.landscape.circle_field(theta, beta, normalization="n")

    solver = diffrax.Kvaerno5(root_finder=optx.Newton(rtol=rtol, atol=atol))
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        solver,
        ts[0],
        ts[-1],
        None,
        theta0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        throw=False,
    )
    return sol.ys, sol.result == diffrax.RESULTS.successful, sol.stats["num_steps"]


@jax.jit
def _analyse(theta, beta, delta):
    xs = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=-1)
    energy = 2 * beta * af.energy_along(xs, af.InteractionEnergy(beta), log_shift=beta)
    labels = jax.vmap(lambda x: af.cluster_labels(x, delta))(xs)
    masses = jax.vmap(lambda x: af.cluster_masses(x, delta))(xs)
    return xs, energy, labels, masses


def simulate(
    theta0,
    beta: float,
    ts,
    *,
    delta: float = 1e-3,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    max_steps: int = 20000,
) -> dict:
    """Integrate (USA) on the circle from angles ``theta0`` (n,) and analyse every save time.

    Returns a dict of NumPy arrays: ``ts`` (T,), ``theta`` (T, n), ``tokens`` (T, n, 2),
    ``energy`` φ (T,), ``labels`` (T, n) from :func:`attnflow.cluster_labels`, ``masses`` (T, n)
    and ``levels`` = Σ_q m_q² (T,), ``counts`` (T,) and ``num_steps``. Raises ``RuntimeError`` if
    the solver fails (instead of returning non-finite states).
    """
    ts = jnp.asarray(ts, dtype=jnp.float64)
    theta0 = jnp.asarray(theta0, dtype=jnp.float64)
    theta, ok, steps = _integrate(theta0, jnp.float64(beta), ts, rtol, atol, max_steps)
    if not bool(ok):
        raise RuntimeError(
            f"staircase: the implicit solve stopped early (β = {beta}, n = {theta0.shape[0]}, "
            f"{int(steps)} steps of max_steps = {max_steps}); raise max_steps, shorten t1 or "
            "lower β or loosen rtol (at rtol = 1e-8 float64 handles β up to about 12)"
        )
    xs, energy, labels, masses = _analyse(theta, jnp.float64(beta), delta)
    masses = np.asarray(masses)
    labels = np.asarray(labels)
    return {
        "ts": np.asarray(ts),
        "theta": np.asarray(theta),
        "tokens": np.asarray(xs),
        "energy": np.asarray(energy),
        "labels": labels,
        "masses": masses,
        "levels": np.sum(masses**2, axis=-1),
        "counts": np.array([len(np.unique(row)) for row in labels]),
        "num_steps": int(steps),
    }


def merge_events(result: dict) -> list[dict]:
    """The cluster merges between consecutive save times of :func:`simulate`'s output.

    A merge is a cluster at time t_k whose tokens belonged to two or more clusters at t_{k−1}.
    Each event records the interval (t_before, t_after), the cluster counts before and after,
    the masses that merged, the merged mass, and φ and Σ m_q² on both sides.
    """
    ts, labels, n = result["ts"], result["labels"], result["labels"].shape[1]
    events = []
    for k in range(1, len(ts)):
        before, after = labels[k - 1], labels[k]
        for root in np.unique(after):
            members = after == root
            parts = np.unique(before[members])
            if len(parts) < 2:
                continue
            events.append(
                {
                    "t_before": float(ts[k - 1]),
                    "t_after": float(ts[k]),
                    "clusters_before": int(result["counts"][k - 1]),
                    "clusters_after": int(result["counts"][k]),
                    "merged_masses": [float(np.sum(before == p) / n) for p in parts],
                    "new_mass": float(np.sum(members) / n),
                    "energy_before": float(result["energy"][k - 1]),
                    "energy_after": float(result["energy"][k]),
                    "level_before": float(result["levels"][k - 1]),
                    "level_after": float(result["levels"][k]),
                }
            )
    return events


def write_merge_log(
    events: list[dict], out: pathlib.Path, name: str = "staircase_merges"
) -> list[pathlib.Path]:
    """Write the merge events as ``NAME.json`` and ``NAME.csv``; returns the two paths."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    js, table = out / f"{name}.json", out / f"{name}.csv"
    js.write_text(json.dumps(events, indent=2))
    columns = [
        "t_before",
        "t_after",
        "clusters_before",
        "clusters_after",
        "merged_masses",
        "new_mass",
        "energy_before",
        "energy_after",
        "level_before",
        "level_after",
    ]
    with table.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for event in events:
            writer.writerow(
                {**event, "merged_masses": " ".join(f"{m:.6g}" for m in event["merged_masses"])}
            )
    return [js, table]


def plot(result: dict, events: list[dict], params: dict):
    """The figure: angles (merge tree), the energy staircase, and the cluster count, against t."""
    from attnflow import plot as aplot
    from attnflow.plot._common import plt

    ts = result["ts"]
    keep = ts > 0
    fig, axes = plt.subplots(
        3, 1, figsize=(7, 8), sharex=True, gridspec_kw={"height_ratios": [1.3, 1, 0.7]}
    )
    # Angles relative to the final cluster, wrapped to (−π, π]; lines break where they wrap.
    final = np.angle(np.mean(np.exp(1j * result["theta"][-1])))
    angles = np.angle(np.exp(1j * (result["theta"] - final)))[keep]
    jumps = np.abs(np.diff(angles, axis=0)) > np.pi
    angles[1:][jumps] = np.nan
    axes[0].plot(ts[keep], angles, lw=0.8)
    axes[0].set(
        xscale="log",
        ylabel="θ_i − θ_final",
        ylim=(-np.pi, np.pi),
        title=f"(USA) on the circle: n = {params['n']}, β = {params['beta']:g}",
    )
    merge_times = sorted(
        {np.sqrt(e["t_before"] * e["t_after"]) for e in events if e["t_before"] > 0}
    )
    aplot.energy_staircase(
        ts, result["energy"], levels=result["levels"], merge_times=merge_times, ax=axes[1]
    )
    aplot.cluster_count_curve(ts[keep], result["counts"][keep], ax=axes[2], logx=True)
    axes[1].set_xlabel("")
    fig.tight_layout()
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Simulate, plot and write ``staircase.{png,npz,json}`` and the merge log."""
    jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()
    theta0 = jr.uniform(jr.key(seed), (params["n"],), jnp.float64, 0.0, 2 * np.pi)
    ts = save_times(params["beta"], params["t1"], params["num_times"])
    result = simulate(
        theta0,
        params["beta"],
        ts,
        delta=params["delta"],
        rtol=params["rtol"],
        atol=params["atol"],
        max_steps=params["max_steps"],
    )
    solved = time.perf_counter()
    events = merge_events(result)
    fig = plot(result, events, params)
    data = {k: v for k, v in result.items() if k != "num_steps"}
    timings = {"solve_and_analyse": solved - start, "plot": time.perf_counter() - solved}
    record = {
        **params,
        "seed": seed,
        "num_steps": result["num_steps"],
        "merges": len(events),
        "final_clusters": int(result["counts"][-1]),
    }
    paths = write_outputs(out, "staircase", fig, data, record, timings)
    return paths + write_merge_log(events, out) + make_rescaled(params, out, seed)


def rescaled_merge_rows(run, model: list) -> list[dict]:
    """The merge log of :func:`attnflow.models.rescaled_staircase` (a ``StaircaseRun``) with the
    collision model's prediction for each merge (``s_model``, ``tokens_model``: the model's k-th
    merge, a ``CollisionEvent``)."""
    rows = []
    for k, event in enumerate(run.merges):
        predicted = model[k] if k < len(model) else None
        rows.append(
            {
                "s": event.time,
                "clusters_before": event.clusters_before,
                "clusters_after": event.clusters_after,
                "masses": event.masses,
                "tokens": event.tokens,
                "energy_before": event.energy_before,
                "energy_after": event.energy_after,
                "s_model": predicted.s if predicted else float("nan"),
                "tokens_model": predicted.tokens if predicted else [],
                "level_model": predicted.level if predicted else float("nan"),
            }
        )
    return rows


def plot_rescaled(run, model: list, params: dict):
    """Angles and φ against the rescaled time s (arclength / log β), with the collision model's
    staircase (levels Σ m_q² at the predicted merge positions) dashed."""
    from attnflow.plot._common import plt

    fig, axes = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    final = np.angle(np.mean(np.exp(1j * run.theta[-1])))
    angles = np.angle(np.exp(1j * (run.theta - final)))
    jumps = np.abs(np.diff(angles, axis=0)) > np.pi
    angles[1:][jumps] = np.nan
    axes[0].plot(run.time, angles, lw=0.8)
    axes[0].set(
        ylabel="θ_i − θ_final",
        title=(
            f"(USA) on the circle in rescaled time: n = {params['rescaled_n']}, "
            f"β = {params['rescaled_beta']:g}"
        ),
    )
    axes[1].plot(run.time, run.energy, lw=1.2, label="φ(s), rescaled flow")
    n = params["rescaled_n"]
    s_model = [0.0] + [e.s for e in model]
    levels = [1 / n] + [e.level for e in model]
    axes[1].step(s_model, levels, where="post", ls="--", color="k", lw=0.9, label="collision model")
    for event in run.merges:
        axes[1].axvline(event.time, color="0.85", lw=0.5, zorder=0)
    axes[1].set(xlabel="s = arclength / log β", ylabel="φ = 2β e^{−β} E_β")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def make_rescaled(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """The time-rescaled staircase (:func:`attnflow.models.rescaled_staircase`) at β =
    ``rescaled_beta`` from ``rescaled_n`` uniform angles, against the collision model; writes
    ``staircase_rescaled.{png,npz,json}`` and the merge log ``staircase_rescaled_merges``."""
    start = time.perf_counter()
    n, beta = params["rescaled_n"], params["rescaled_beta"]
    theta0 = np.asarray(jr.uniform(jr.key(seed + 1), (n,), jnp.float64, 0.0, 2 * np.pi))
    run = af.models.rescaled_staircase(theta0, beta)
    solved = time.perf_counter()
    model = af.models.collision_model(theta0, beta)
    rows = rescaled_merge_rows(run, model)
    fig = plot_rescaled(run, model, params)
    data = {"s": run.time, **{k: getattr(run, k) for k in ("theta", "energy", "levels", "counts")}}
    data["merge_s"] = np.array([e.time for e in run.merges])
    data["model_s"] = np.array([e.s for e in model])
    same = [r["tokens"] == r["tokens_model"] for r in rows]
    record = {
        "n": n,
        "beta": beta,
        "seed": seed,
        "steps": run.steps,
        "finished": run.finished,
        "merges": len(rows),
        "merges_as_predicted": int(sum(same)),
        "sequence_as_predicted": bool(all(same) and len(model) == len(rows)),
    }
    timings = {"solve": solved - start, "model_and_plot": time.perf_counter() - solved}
    paths = write_outputs(out, "staircase_rescaled", fig, data, record, timings)
    js = out / "staircase_rescaled_merges.json"
    js.write_text(json.dumps(rows, indent=2))
    return paths + [js]
