# %% [markdown]
# # Fig. 6: the kernel g of the torus Hessian (App. B)
#
# On the circle, tokens x_i = (cos θ_i, sin θ_i) and the energy (7.4)
# E_β(θ) = 1/(2βn²) Σ_ij exp(β cos(θ_i − θ_j)) has the Hessian
# ∂²E/∂θ_i∂θ_j = g(θ_i − θ_j)/n² (i ≠ j), with
#
#     g_β(τ) = (cos τ − β sin² τ) e^{β cos τ}.
#
# g is positive for |τ| < τ*_β and negative beyond, where cos τ* = (−1 + √(1 + 4β²))/(2β).
# For large β, τ* ≈ β^{−1/2}: that is what makes every critical point other than synchrony a
# strict saddle once (n − 1)τ* < π/2 (Thm 5.1; docs/maths.md §7).
#
# `ATTNFLOW_QUICK=1` uses a coarse grid.

# %%
import os

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq

import attnflow as af
import attnflow.theory as theory
from attnflow import plot
from attnflow.figures import fig6

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
params = fig6.PRESETS["quick" if QUICK else "default"]

# %%
data = fig6.compute(params["betas"], params["points"])
ax = plot.hessian_kernel_curves(data["tau"], data["g"], params["betas"], data["tau_star"])
for beta, star in zip(data["beta"], data["tau_star"], strict=True):
    print(f"β = {beta:g}: τ* = {star:.6f}")

# %% [markdown]
# ## τ* is the zero of g
# The closed form against a bracketing root finder, and the asymptotics τ* √β → 1.

# %%
for beta in (0.5, 2.0, 6.0, 50.0, 1e4):
    root = brentq(lambda t, b=beta: np.cos(t) - b * np.sin(t) ** 2, 1e-12, np.pi / 2, xtol=1e-15)
    star = float(theory.tau_star(beta))
    print(
        f"β = {beta:>7g}: closed form {star:.12f}   brentq {root:.12f}   τ*√β = "
        f"{star * np.sqrt(beta):.4f}"
    )
    assert abs(star - root) < 1e-10

# %% [markdown]
# ## g is the Hessian's off-diagonal entry
# Autodiff of the energy (7.4) at θ = (0, τ) for n = 2 gives ∂²E/∂θ_1∂θ_2 = g(τ)/4.

# %%
mixed = jax.jit(
    jax.vmap(
        lambda t, b: jax.hessian(af.landscape.circle_energy)(jnp.array([0.0, t]), b)[0, 1],
        in_axes=(0, None),
    )
)
taus = jnp.linspace(-3.0, 3.0, 7)
for beta in params["betas"]:
    np.testing.assert_allclose(
        4 * mixed(taus, beta), theory.hessian_kernel(taus, beta=beta), rtol=1e-10
    )
print("Hessian entries match g")


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`fig6.png`, `fig6-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("fig6")
