# %% [markdown]
# # The mean-field density: growth of the modes and the first metastable plateau
#
# `attnflow.meanfield` solves the continuity equation ∂_t ρ + div(ρ X[ρ]) = 0 of self-attention
# for the density itself (Fourier modes on the circle), instead of following n particles.
# Two statements of Bruno–Pasqualotto–Agazzi (arXiv:2410.23228) are about ρ:
#
# 1. around the uniform density every Fourier mode k grows at the rate λ_k of
#    `attnflow.theory.metastable_growth_rates` (k² I_k(β)/(β I_0(β)) for SA);
# 2. the fastest mode ℓ* = `attnflow.theory.metastable_cluster_count(β)` sets the number of
#    bumps on the first metastable plateau.
#
# We fit (1) from the solver's early-time evolution, then run the plateau experiment of the
# `attnflow figure meanfield` figure: the PDE from a perturbed uniform density next to particles
# sampled from the same density. `ATTNFLOW_QUICK=1` runs at test size; set `ATTNFLOW_OUT` to a
# folder to save the figure.

# %%
import os

import jax
import jax.numpy as jnp
import numpy as np

import attnflow.meanfield as mf
import attnflow.theory as th
from attnflow import enable_compilation_cache
from attnflow.figures import meanfield as figure

jax.config.update("jax_enable_x64", True)
enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
BETA = 9.0

# %% [markdown]
# ## 1. Linear growth rates, fitted
#
# Start from ρ₀ = 1 + 10⁻⁸ Σ_k cos(kθ + φ_k) and fit log|ρ̂_k(t)| between t = 0 and t = 1.

# %%
K = 16
grid = mf.CircleGrid(K)
theta = np.asarray(grid.angles())
phases = np.random.default_rng(0).uniform(0, 2 * np.pi, K)
rho0 = 1 + 1e-8 * np.sum(np.cos(np.outer(theta, np.arange(1, K + 1)) + phases), axis=1)
sol = mf.solve_density(
    grid,
    grid.from_values(jnp.asarray(rho0)),
    1.0,
    beta=BETA,
    ts=[0.0, 0.5, 1.0],
    rtol=1e-11,
    atol=1e-16,
)
amplitude = np.hypot(sol.coefficients[:, 1 : K + 1], sol.coefficients[:, K + 1 :])
fitted = np.log(amplitude[-1] / amplitude[0])
theory = th.metastable_growth_rates(BETA, normalization="softmax", max_degree=K)[1:]
rate_error = float(np.max(np.abs(fitted - theory)) / theory.max())
for k in range(1, 9):
    print(f"k = {k}: fitted {fitted[k - 1]:.6f}, theory {theory[k - 1]:.6f}")
print(f"largest error relative to max λ: {rate_error:.2e}")

# %% [markdown]
# ## 2. The first plateau: PDE and particles
#
# The two fastest modes at β = 9 are ℓ = 4 (λ = 0.704) and ℓ = 5 (λ = 0.664): which one wins
# depends on the initial perturbation, so expect 4 or 5 bumps.

# %%
params = dict(figure.PRESETS["quick" if QUICK else "default"])
data = figure.compute(params, seed=0)
print(
    f"plateau at t = {data['t_plateau']:.3g}: PDE {data['pde_bumps']} bumps, theory ℓ* = "
    f"{data['theory_bumps']}, particles "
    + ", ".join(f"n = {int(n)}: {data[f'bumps_{int(n)}']}" for n in data["ns"])
)
fig = figure.plot(data, params)

# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`meanfield.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("meanfield")

# %%
assert rate_error < 1e-3, rate_error
assert abs(data["pde_bumps"] - data["theory_bumps"]) <= 1, data["pde_bumps"]
