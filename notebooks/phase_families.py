# %% [markdown]
# # Phase diagrams of attention families and other statistics
#
# `attnflow.phase_diagram` records any statistic of the tokens' Gram matrix
# (`statistic=`: `ClusteredFraction`, `ClusterCount`, `SpanDimension`, `Energy`,
# `GramStatistic(fn)`) for any attention family (`family=attnflow.FieldFamily(heads, causal,
# scheme, period)`). The paper's single-head clustered fraction runs on the reduced
# log-distance engine; every other combination runs one `attnflow.solve` per system.
#
# `ATTNFLOW_QUICK=1` runs the test-sized preset; otherwise the laptop default (d = n = 32).
# `attnflow figure phase-families` writes the same figure with its data.

# %%
import os

import jax
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures import phase_families

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
params = phase_families.PRESETS["quick" if QUICK else "default"]

# %% [markdown]
# ## Four panels
# (a) the clustered fraction of Fig. 3; (b) multi-head attention with a GOE QᵀK per head and
# V = I (H heads with V = I move about H times faster); (c) causal attention, where token i
# only sees j ≤ i, so clustering spreads from the first token; (d) the mean number of clusters
# of (a).

# %%
data = phase_families.compute(params, seed=0, progress=not QUICK)
fig = phase_families.plot_panels(data, params)
for name, seconds in zip(phase_families.PANELS, data["seconds"], strict=True):
    print(f"{name}: {seconds:.1f} s")

# %% [markdown]
# The clustered fraction (a, reduced engine) and the number of clusters (d, general engine)
# come from different engines on the same initial tokens: P = 1 (every pair of every system
# δ-close) exactly where every system is one cluster. At t = 0 uniform tokens are n clusters.

# %%
P, clusters = data["values"][0], data["values"][3]
print("P = 1 at", int((P == 1).sum()), "grid points; one cluster at", int((clusters == 1).sum()))
assert np.array_equal(P == 1, clusters == 1)
assert np.all(clusters[:, 0] == params["n"]) and np.all(clusters >= 1)

# %% [markdown]
# ## The dimension of the span and the energy
# The authors' `--plotdim` statistic: the number of eigenvalues of the Gram matrix above 1e-3.
# It starts at min(n, d) and falls as clusters form. The energy of (3.5) increases along
# (USA), its gradient ascent (paper §3.3).

# %%
n, d = 6, 4
betas, ts = np.array([1.0, 4.0]), np.linspace(0.0, 12.0, 7)
kw = dict(n=n, d=d, betas=betas, ts=ts, realizations=4, progress=False)
span = np.asarray(af.phase_diagram(jr.key(1), statistic=af.SpanDimension(), **kw))
energy = np.asarray(af.phase_diagram(jr.key(1), statistic=af.Energy(), normalization="n", **kw))
print("span dimension:\n", span, "\nenergy (USA):\n", energy.round(3))
assert np.all(span[:, 0] == min(n, d)) and np.all(span >= 1)
# Monotone up to the integration error (default rtol 1e-3 of the solver).
assert np.all(np.diff(energy, axis=1) >= -1e-3 * energy[:, 1:])


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`phase_families.png`; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("phase_families")
