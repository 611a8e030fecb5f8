"""Fig. 4: (SA) on the circle (d = 2, a zoom on Fig. 3(a)) at β = 4 and β = 9.

For each β: the tokens of one run at several times, the number of clusters against time
(that run, and the median with the 10–90% band across seeds), and the distribution across seeds
of the number of clusters at the final time. The paper's claim — 2 clusters at β = 4 and 3 at
β = 9 at t = 30 — is one draw of a distribution: clusters are metastable, they persist for long
times before merging (docs/maths.md §10), and their number grows with β (like √(β log β) in the
Gaussian-KDE model of Geshkovski–Rigollet–Sun).

Conventions: n = 32 (the caption does not state n; presumably the n = 32 of Fig. 3),
δ = 10⁻³ (tokens i, j are in one cluster when connected by a chain of ⟨x_i, x_j⟩ ≥ 1 − δ links,
:func:`attnflow.count_clusters`), i.i.d. uniform initial tokens, the same initial tokens for both
β (common random numbers). The caption's times are t = 2.5, 18, 30 and the panel titles read
t = 0, 18, 30 (docs/maths.md §11.7): snapshots at t = 0, 2.5, 18 and 30 cover both.
"""

import functools
import pathlib
import time

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow import plot
from attnflow.figures._output import write_outputs

# What every preset shares, the setting of paper Fig. 4: two β, the horizon, the snapshot times
# and the clustering threshold; the presets differ in n, the time grid and the number of seeds.
FIG4_SETTING = {
    "betas": [4.0, 9.0],
    "t1": 30.0,
    "snapshot_times": [0.0, 2.5, 18.0, 30.0],
    "delta": 1e-3,
}

PRESETS = {
    "quick": {
        "n": 12,
        **FIG4_SETTING,
        "num_times": 16,
        "seeds": 6,
    },
    "default": {
        "n": 32,
        **FIG4_SETTING,
        "num_times": 61,
        "seeds": 128,
    },
    "full": {
        "n": 32,
        **FIG4_SETTING,
        "num_times": 121,
        "seeds": 1024,
    },
}


def save_times(t1: float, num_times: int, snapshot_times) -> np.ndarray:
    """An even grid on [0, t1] merged with the snapshot times."""
    return np.unique(
        np.concatenate([np.linspace(0.0, t1, num_times), np.asarray(snapshot_times, float)])
    )


@functools.partial(jax.jit, static_argnames=("delta",))
def _runs(x0, beta, ts, delta):
    def one(x):
        sol = af.solve(af.SelfAttention(beta), x, ts[-1], ts=ts, throw=False, max_steps=4096)
        ok = sol.result == diffrax.RESULTS.successful
        counts = jax.vmap(lambda y: af.count_clusters(y, delta))(sol.ys)
        return sol.ys, counts, ok

    return jax.vmap(one)(x0)


def simulate(key, *, n: int, betas, ts, seeds: int, delta: float = 1e-3) -> dict:
    """Run (SA) on the circle from ``seeds`` draws of n uniform tokens (shared by every β).

    Returns ``counts`` (len(betas), seeds, T) cluster counts and ``tokens``
    (len(betas), T, n, 2), the trajectory of the first seed. Raises ``RuntimeError`` if a solve
    fails.
    """
    x0 = af.random_tokens(key, n, 2, batch_shape=(seeds,))
    ts = jnp.asarray(ts)
    counts, tokens = [], []
    for beta in betas:
        ys, c, ok = _runs(x0, jnp.asarray(float(beta)), ts, delta)
        if not bool(jnp.all(ok)):
            raise RuntimeError(f"fig4: {int(jnp.sum(~ok))} of {seeds} solves failed at β = {beta}")
        counts.append(np.asarray(c))
        tokens.append(np.asarray(ys[0]))
    return {"ts": np.asarray(ts), "counts": np.stack(counts), "tokens": np.stack(tokens)}


def plot_figure(data: dict, params: dict):
    """Rows: one per β. Columns: snapshots of the first run, clusters against time, the
    distribution of the final cluster count across seeds."""
    from attnflow.plot._common import plt

    betas, snaps = params["betas"], params["snapshot_times"]
    ts = data["ts"]
    columns = len(snaps) + 2
    fig, axes = plt.subplots(
        len(betas),
        columns,
        figsize=(2.6 * columns, 2.7 * len(betas)),
        squeeze=False,
        gridspec_kw={"width_ratios": [1] * len(snaps) + [1.6, 1.4]},
    )
    for row, beta in enumerate(betas):
        for col, t in enumerate(snaps):
            k = int(np.argmin(np.abs(ts - t)))
            x = data["tokens"][row, k]
            labels = np.asarray(af.cluster_labels(jnp.asarray(x), params["delta"]))
            plot.tokens_on_circle(
                x, labels=labels, ax=axes[row, col], size=18, title=f"β = {beta:g}, t = {ts[k]:g}"
            )
        curve = axes[row, len(snaps)]
        plot.cluster_count_curve(
            ts, data["counts"][row], ax=curve, label="seeds (median)", color="C0"
        )
        plot.cluster_count_curve(
            ts, data["counts"][row, 0], ax=curve, label="run shown", color="C3"
        )
        plot.cluster_count_histogram(
            [data["counts"][row, :, -1]], ax=axes[row, -1], title=f"clusters at t = {ts[-1]:g}"
        )
    fig.tight_layout()
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Simulate, plot and write ``fig4.{png,npz,json}``."""
    jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()
    ts = save_times(params["t1"], params["num_times"], params["snapshot_times"])
    data = simulate(
        jr.key(seed),
        n=params["n"],
        betas=params["betas"],
        ts=ts,
        seeds=params["seeds"],
        delta=params["delta"],
    )
    solved = time.perf_counter()
    fig = plot_figure(data, params)
    final = data["counts"][:, :, -1]
    summary = {
        f"beta={b:g}": {str(int(v)): int(np.sum(final[i] == v)) for v in np.unique(final[i])}
        for i, b in enumerate(params["betas"])
    }
    record = {**params, "seed": seed, "final_cluster_counts": summary}
    timings = {"solve": solved - start, "plot": time.perf_counter() - solved}
    return write_outputs(out, "fig4", fig, data, record, timings)
