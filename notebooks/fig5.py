# %% [markdown]
# # Fig. 5: phase diagrams with random Q, K, V
#
# The same statistic as Fig. 3, P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ), for (SA) with random weights drawn
# once per system and kept for every β and all times (d = 128, n = 32 in the paper). Only
# B = QᵀK enters the attention logits; the ensembles (conventions in `attnflow.AttentionEnsemble`):
#
# | panel | B = QᵀK | V |
# |---|---|---|
# | (a) | Ginibre G₁G₂/√d | Ginibre G₃/√d (not drawable in the authors' code) |
# | (b) | GOE (G + Gᵀ)/√2 | Wishart G₃G₃ᵀ/√d ⪰ 0 |
# | (c) | Ginibre G₁G₂/√d | QᵀK/√d |
# | (d) | GOE (G + Gᵀ)/√2 | QᵀK/√(d+1) |
#
# `ATTNFLOW_QUICK=1` runs the test-sized preset; otherwise the coarse laptop default.

# %%
import os

import jax
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow.figures import fig5
from attnflow.plot._common import plt

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
params = fig5.PRESETS["quick" if QUICK else "default"]

# %% [markdown]
# ## The value matrices
# The spectrum of V decides where the tokens go: Ginibre V fills the unit disc (circular law),
# Wishart V is positive with eigenvalues up to ≈ 4√d (so its dynamics is fast), and V = QᵀK is
# real-symmetric for the GOE form but not for the Ginibre product.

# %%
d = 128
fig, axes = plt.subplots(1, 4, figsize=(14, 3.2), constrained_layout=True)
for ax, name in zip(axes, "abcd", strict=True):
    B, V = af.FIG5_ENSEMBLES[name].sample(jr.key(0), d)
    ev = np.linalg.eigvals(np.asarray(V))
    ax.scatter(ev.real, ev.imag, s=4)
    ax.set(title=f"({name}) {fig5.CAPTIONS[name]}", xlabel="Re λ(V)", ylabel="Im λ(V)")
    print(f"({name}) max Re λ(V) = {ev.real.max():6.2f}, spectral radius = {abs(ev).max():6.2f}")
ginibre_v = np.linalg.eigvals(np.asarray(af.FIG5_ENSEMBLES["a"].sample(jr.key(0), d)[1]))
assert 0.8 < np.abs(ginibre_v).max() < 1.2  # circular law: radius ≈ 1

# %% [markdown]
# ## The phase diagrams
# With V ≠ I the tokens leave the span of their initial positions, so these systems run in R^d
# (no span reduction): this is the expensive figure.

# %%
data = fig5.compute(params, seed=0, progress=not QUICK)
fig = fig5.plot_panels(data, params)
for name, seconds, P in zip(params["panels"], data["seconds"], data["P"], strict=True):
    print(f"({name}): {seconds:.1f} s, P at the final time: {np.round(P[:, -1], 2)}")
    assert np.all((P >= 0) & (P <= 1))


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`fig5.png`, `fig5-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("fig5")
