# %% [markdown]
# # Fig. 4: clusters on the circle at β = 4 and β = 9, and how many
#
# (SA) on the circle (d = 2), the zoom on Fig. 3(a). The paper shows one run: 2 clusters at
# β = 4 and 3 at β = 9 at t = 30. Here the same picture, plus what one run cannot show: the
# distribution of the number of clusters across seeds. Clusters are *metastable*: they form fast
# and then persist, merging only on time scales exponential in β (docs/maths.md §10), so the
# count at t = 30 is a random variable that grows with β.
#
# `ATTNFLOW_QUICK=1` runs a test-sized version.

# %%
import os

import jax
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures import fig4

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
params = dict(fig4.PRESETS["quick" if QUICK else "default"])

# %%
ts = fig4.save_times(params["t1"], params["num_times"], params["snapshot_times"])
data = fig4.simulate(
    jr.key(0),
    n=params["n"],
    betas=params["betas"],
    ts=ts,
    seeds=params["seeds"],
    delta=params["delta"],
)
fig = fig4.plot_figure(data, params)

# %% [markdown]
# ## The distribution of the cluster count at the final time

# %%
final = data["counts"][:, :, -1]
for beta, counts in zip(params["betas"], final, strict=True):
    values, freq = np.unique(counts, return_counts=True)
    table = ", ".join(f"{v}: {f / counts.size:.2f}" for v, f in zip(values, freq, strict=True))
    print(f"β = {beta:g}: mean {counts.mean():.2f} clusters   ({table})")
    print(
        f"         √(β log β) = {np.sqrt(beta * np.log(beta)):.2f} (KDE-mode heuristic, "
        "up to a model-dependent constant)"
    )

# %% [markdown]
# ## Metastability: the count hardly changes between t = 18 and t = 30
# Most runs that have clustered by t = 18 still have the same number of clusters at t = 30.

# %%
k18 = int(np.argmin(np.abs(data["ts"] - 18.0)))
same = np.mean(data["counts"][:, :, k18] == data["counts"][:, :, -1], axis=1)
for beta, frac in zip(params["betas"], same, strict=True):
    print(
        f"β = {beta:g}: same count at t = 18 and t = {data['ts'][-1]:g} in "
        f"{100 * frac:.0f}% of seeds"
    )

# %% [markdown]
# ## Fig. 1 style: pairwise inner products along the run
# Histograms of ⟨x_i(t), x_j(t)⟩ (i < j) of the run shown, at the snapshot times: the mass moves to
# ⟨x_i, x_j⟩ = 1 (within a cluster) and to the few values cos(gap) between clusters.

# %%
from attnflow import plot  # noqa: E402

snap = [int(np.argmin(np.abs(data["ts"] - t))) for t in params["snapshot_times"]]
hist, edges = af.inner_product_histogram(data["tokens"][-1][np.array(snap)], bins=40)
axes = plot.inner_product_histograms(hist, edges, labels=[f"t = {data['ts'][k]:g}" for k in snap])


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`fig4.png`, `fig4-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("fig4")
