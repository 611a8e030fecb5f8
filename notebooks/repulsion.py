# %% [markdown]
# # Repulsive dynamics and optimal configurations
#
# With V = −I the self-attention dynamics (SA) pushes tokens apart: the energy
# E_β = 1/(2βn²) Σ_ij exp(β⟨x_i, x_j⟩) decreases (docs/maths.md §2, dE/dt = −(1/n²) Σ_i Z_i |ẋ_i|²).
# Cohn–Kumar's universally optimal configurations (sharp configurations and the 600-cell,
# docs/maths.md §8) minimise E_β for every β, so random starts should end on them when they exist:
# the simplex (n ≤ d + 1), the cross-polytope (n = 2d), the regular polygon (d = 2), the
# icosahedron (n = 12, d = 3), …
#
# `ATTNFLOW_QUICK=1` runs one small target.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow import theory

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
beta = 1.0

targets = (
    [("polygon", {"n": 5})]
    if QUICK
    else [
        ("polygon", {"n": 7}),
        ("simplex", {"n": 5, "d": 4}),
        ("cross-polytope", {"d": 4}),
        ("icosahedron", {}),
    ]
)
t1 = 300.0 if QUICK else 3000.0
ts = jnp.geomspace(0.1, t1, 40)

# %% [markdown]
# ## From random starts to the optimum
# Integrate the repulsive flow and compare the energy with `theory.optimal_energy`, computed
# from the inner-product spectrum alone, and the final spectrum with the table.

# %%
results = {}
for name, kwargs in targets:
    n, d = theory.optimal_configuration(name, **kwargs).shape
    field = af.SelfAttention(beta, V=-jnp.eye(d))
    x0 = af.random_tokens(jr.key(0), n, d)
    sol = af.solve(field, x0, t1, ts=ts, rtol=1e-9, atol=1e-11, max_steps=4000)
    energies = np.asarray(jax.vmap(af.InteractionEnergy(beta))(sol.ys))
    optimum = float(theory.optimal_energy(name, beta, **kwargs))
    values, mult = theory.inner_product_spectrum(sol.ys[-1], tol=1e-3)
    results[name] = (energies, optimum)
    print(
        f"{name:15s} n={n:3d} d={d}: relative energy gap {energies[-1] / optimum - 1:.1e}, "
        f"monotone: {bool(np.all(np.diff(energies) <= 1e-12))}"
    )
    reached = [(round(float(v), 4), float(m)) for v, m in zip(values, mult, strict=True)]
    table = [(round(v, 4), m) for v, m in theory.known_spectrum(name, **kwargs)]
    print("   spectrum reached:", reached)
    print("   table (docs/maths.md §8): ", table)
    print("   design strength:", theory.design_strength(np.asarray(sol.ys[-1]), tol=1e-6))

final_gap = max(e[-1] / opt - 1 for e, opt in results.values())

# %% [markdown]
# ## Energies of the known optima
# The spectra give the energies of optima too large to simulate here (Leech: n = 196560).

# %%
for name in ["icosahedron", "600-cell", "e8", "schlafli", "gosset", "leech"]:
    n = 1 + round(sum(m for _, m in theory.known_spectrum(name)))
    value = float(theory.optimal_energy(name, beta))
    print(f"{name:12s} n = {n:6d}: 2βE_β e^(-β) = {2 * beta * value * np.exp(-beta):.6f}")

# %%
if not QUICK:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (energies, optimum) in results.items():
        ax.loglog(np.asarray(ts), np.maximum(energies / optimum - 1, 1e-16), label=name)
    ax.set_xlabel("t")
    ax.set_ylabel("E_β(x(t)) / E_β(optimum) − 1")
    ax.set_title(f"repulsive SA (V = −I), β = {beta:g}")
    ax.legend()
    fig.tight_layout()
    from attnflow import plot

    plot.save_figures("repulsion")  # into $ATTNFLOW_OUT, when set
    plt.show()
