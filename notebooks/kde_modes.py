# %% [markdown]
# # How many metastable clusters? Modes of a Gaussian kernel density estimate
#
# Geshkovski, Rigollet and Sun (arXiv:2412.09080) prove that the expected number of modes of
# the Gaussian KDE with bandwidth β^{-1/2} of n i.i.d. N(0, 1) samples is Θ(√(β log β)) when
# n^c ≲ β ≲ n^{2−c}. They give no constant, and none should be claimed: measured below, the
# ratio E[#modes]/√(β log β) stays bounded as n grows at fixed a = log β / log n, but its value
# depends on a.
#
# Then the link the paper draws: on the circle e^{β cos(θ − θ_j)} is the same kernel, and the
# number of clusters on the first metastable plateau of (SA) and (USA) is compared with the
# mode count of the initial angles' density estimate.
#
# `ATTNFLOW_QUICK=1` runs a test-sized version.

# %%
import os

import jax
import numpy as np

import attnflow as af
from attnflow.figures import metastable_clusters

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The count is exact
# `kde_mode_count` brackets the sign changes of f' on a grid of 16 points per bandwidth
# (overflow-free) and `kde_modes` refines them by bisection. Against a brute-force count of the
# local maxima of f itself on a 20× finer grid (320 points per bandwidth):

# %%
samples = rng.standard_normal((4, 200))
beta = 200.0
x = np.arange(samples.min() - 0.1, samples.max() + 0.1, beta**-0.5 / 320)
brute = []
for s in samples:
    f = np.concatenate(
        [
            np.exp(-0.5 * beta * (c[:, None] - s[None, :]) ** 2).sum(axis=1)
            for c in np.array_split(x, 20)
        ]
    )
    brute.append(int(np.sum((f[1:-1] > f[:-2]) & (f[1:-1] >= f[2:]))))
counts = af.measures.kde_mode_count(samples, beta)
print(f"kde_mode_count {counts.tolist()}, brute force {brute}")
assert counts.tolist() == brute

# %% [markdown]
# ## 2. E[#modes] / √(β log β) at fixed a = log β / log n
# For each a, β = n^a. The ratio does not converge to one constant across a (docs/maths.md §10
# measured 0.45 at a = 1 and about 0.21 at a = 1/2), so the theorem's Θ hides an a-dependent
# factor.

# %%
ns = [100, 400] if QUICK else [100, 400, 1600, 6400]
a_values = [0.5, 1.0, 1.5]
sets = 8 if QUICK else 48
table = np.zeros((len(a_values), len(ns)))
errors = np.zeros_like(table)
for i, a in enumerate(a_values):
    for j, n in enumerate(ns):
        beta = float(n) ** a
        modes = af.measures.kde_mode_count(rng.standard_normal((sets, n)), beta)
        ratio = modes / np.sqrt(beta * np.log(beta))
        table[i, j], errors[i, j] = ratio.mean(), ratio.std(ddof=1) / np.sqrt(sets)
print("a \\ n " + "".join(f"{n:>14d}" for n in ns))
for i, a in enumerate(a_values):
    row = "".join(f"{m:8.3f} ±{2 * e:5.3f}" for m, e in zip(table[i], errors[i], strict=True))
    print(f"{a:5.2f} {row}")
assert np.all((table > 0.05) & (table < 1.0))  # bounded at each a
assert table[0].mean() < table[1].mean()  # but a-dependent: no single constant

# %% [markdown]
# ## 3. Clusters on the first metastable plateau against KDE modes of the initial angles
# (USA) moves tokens up the gradient of the von Mises density f(θ) = Σ_j e^{β cos(θ − θ_j)},
# (SA) up that of log f. The plateau count is read where the tokens first form tight clusters
# no two of which are within about 2β^{-1/2} (see `attnflow.figures.metastable_clusters`).
# Beside them, Bruno–Pasqualotto–Agazzi's k_max = argmax_k k² I_k(β) (arXiv:2410.23228,
# Theorem 4.3; `attnflow.theory.metastable_cluster_count`): the number of equally spaced
# clusters the linearised mean-field equation predicts from the uniform measure (n → ∞). At
# finite n the first plateau follows the KDE modes of the sample, which fluctuate around it.

# %%
params = dict(metastable_clusters.PRESETS["quick" if QUICK else "default"])
if QUICK:
    params |= {"n": 12, "betas": [4.0], "realizations": 2, "num_times": 40, "models": ("usa",)}
data = metastable_clusters.compute(params, seed=0)
for k, b in enumerate(data["betas"]):
    sa = f", SA plateau {data['sa'][k].mean():5.2f}" if "sa" in data else ""
    print(
        f"β = {b:5.1f}: KDE modes {data['kde_modes'][k].mean():5.2f}, "
        f"USA plateau {data['usa'][k].mean():5.2f}{sa}, "
        f"√(β log β) = {np.sqrt(b * np.log(b)):5.2f}, "
        f"BPA k_max {data['bpa_kmax'][k]}"
    )
# The clusters are those of the density estimate to within about one cluster per realisation.
assert np.mean(np.abs(data["usa"] - data["kde_modes"])) <= 1.0
fig = metastable_clusters.plot(data, params)


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`kde_modes.png`, `kde_modes-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("kde_modes")
