# %% [markdown]
# # Deep random multi-head attention: the homogenised SDE and representation collapse
#
# Weights resampled independently in every layer and head (Koubbi–Geshkovski–Rigollet,
# arXiv:2604.01978; seed 001 gives the abstract). With Q = K = I held fixed and Gaussian values
# V = G/√d, the post-LN Transformer with L layers of step τ = T/L, head scale c = 1/√(Hτ) tends
# as L → ∞ to the Itô SDE (derivation in `attnflow/_homogenized.py`)
#
#     dx_i = −((d−1)/(2d)) |m_i|² x_i dt + P_{x_i} dB m_i/√d,   m_i = Σ_j a_ij x_j,
#
# with B a d × d Brownian motion shared by all tokens. We check the generator on one layer,
# the convergence of E ρ and Var ρ (ρ = ⟨x_1, x_2⟩) with depth, the deterministic regime, and
# then the collapse threshold d < 2 + cosh 2β against simulation.
# `ATTNFLOW_QUICK=1` runs a test-sized version.

# %%
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow import theory

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
R = 400 if QUICK else 4000  # Monte Carlo paths per estimate

# %% [markdown]
# ## 1. One layer: the drift of ρ at β = 0
# From ρ0 = 0 at d = 8 the generator gives b = (1 − ρ²)(d − 2 − ρ)/(2d) = 0.375. Antithetic
# pairs (V, −V) remove the √τ noise from the estimate of τb.

# %%
d, tau, rho0 = 8, 1e-3, 0.0
x0 = jnp.zeros((2, d)).at[0, 0].set(1.0).at[1, 1].set(1.0)
eye = jnp.eye(d)


def one_layer(key, beta):
    f = af.random_multihead_attention(
        key, d, num_layers=1, num_heads=4, t1=tau, beta=beta, fixed={"Q": eye, "K": eye}
    )
    g = eqx.tree_at(lambda f: f.field.V, f, -f.field.V)
    xa, xb = af.layers(f, x0, 1, tau)[-1], af.layers(g, x0, 1, tau)[-1]
    ra, rb = xa[0] @ xa[1] - rho0, xb[0] @ xb[1] - rho0
    return (ra + rb) / 2 / tau, ((ra - rb) / 2) ** 2 / tau


drift, sq = jax.jit(jax.vmap(one_layer, (0, None)))(jr.split(jr.key(0), R), 0.0)
b, s2 = theory.homogenized_pair_coefficients(rho0, beta=0.0, d=d)
drift_error = abs(float(drift.mean()) - b) / (float(drift.std()) / np.sqrt(R) + 1e-3)
print(f"drift {float(drift.mean()):.5f} ± {float(drift.std()) / np.sqrt(R):.5f} vs {b:.5f}")
print(f"σ²    {float(sq.mean()):.5f} ± {float(sq.std()) / np.sqrt(R):.5f} vs {s2:.5f}")

# %% [markdown]
# ## 2. Depth: the discrete model converges to the SDE
# n = 3, d = 4, β = 2, T = 1. E ρ(T) and Var ρ(T) for L = 2, 8, 32 layers (H = 2 heads) against
# the SDE (Euler–Maruyama, dt = 1/64), with Monte Carlo standard errors.

# %%
n, d2, beta, T = 3, 4, 2.0, 1.0
x0 = af.random_tokens(jr.key(3), n, d2)
eye2 = jnp.eye(d2)


def discrete(key, L):
    f = af.random_multihead_attention(
        key, d2, num_layers=L, num_heads=2, t1=T, beta=beta, fixed={"Q": eye2, "K": eye2}
    )
    x = af.layers(f, x0, L, T / L)[-1]
    return x[0] @ x[1]


def sde(key):
    x = af.solve_homogenized(x0, T, beta=beta, key=key, dt=T / 64, brownian="fast").ys[-1]
    return x[0] @ x[1]


gaps = {}
if not QUICK:  # at test size this comparison is tests/test_homogenized.py's (mean and variance)
    limit = jax.jit(jax.vmap(sde))(jr.split(jr.key(1), R))
    print(f"SDE      E ρ = {float(limit.mean()):.4f}  Var ρ = {float(limit.var()):.4f}")
    for L in (2, 8, 32):
        rho = jax.jit(jax.vmap(lambda k, L=L: discrete(k, L)))(jr.split(jr.key(L), R))
        se = float(np.sqrt((rho.var() + limit.var()) / R))
        gaps[L] = abs(float(rho.mean() - limit.mean())) / se
        print(
            f"L = {L:3d}  E ρ = {float(rho.mean()):.4f}  Var ρ = {float(rho.var()):.4f}  "
            f"|ΔE ρ| = {gaps[L]:.1f} standard errors"
        )

# %% [markdown]
# ## 3. The deterministic regime
# "ode" scaling (c = 1/H, mean μ = 1 along I): the random model tends to (SA),
# ẋ_i = P_{x_i} Σ_j a_ij x_j, as τ/H → 0.

# %%
x0 = af.random_tokens(jr.key(5), 4, 3)
exact = af.solve(af.SelfAttention(1.0), x0, 1.0, rtol=1e-8, atol=1e-10).ys[-1]
ode_errors = []
for L, H in ((8, 2), (128, 32)) if QUICK else ((8, 2), (32, 8), (128, 32)):
    f = af.random_multihead_attention(
        jr.key(L), 3, num_layers=L, num_heads=H, scaling="ode", value_mean=1.0,
        fixed={"Q": jnp.eye(3), "K": jnp.eye(3)},
    )  # fmt: skip
    ode_errors.append(float(jnp.abs(af.layers(f, x0, L, 1.0 / L)[-1] - exact).max()))
    print(f"L = {L:3d}, H = {H:2d}: max |x_L − x_SA(1)| = {ode_errors[-1]:.4f}")

# %% [markdown]
# ## 4. Collapse: the antipodal growth rate and the threshold d < 2 + cosh 2β
# For n = 2 the closed-form rate λ_−(β, d) of log(1 + ρ) at the antipodal pair changes sign at
# β_c(d) = ½ arccosh(d − 2). Above it the antipodal pair attracts and P(collapse) < 1, with the
# value given by the scale function. Simulation at T = 20.

# %%
for dd in (3, 4, 6, 8, 12):
    print(f"d = {dd:2d}: β_c = {theory.homogenized_critical_beta(dd):.4f}")
betas = [0.0, 1.0, 2.0, 3.0] if not QUICK else [0.5, 3.0]
dd, T_sim = 6, 20.0
p_sim = np.asarray(
    af.homogenized_phase_diagram(
        jr.key(7), n=2, d=dd, betas=betas, ts=[T_sim], realizations=R, dt=0.05
    )[:, 0]
)
p_closed = np.array([theory.homogenized_collapse_probability(b, dd) for b in betas])
p_se = np.sqrt(np.maximum(p_closed * (1 - p_closed), 0.01) / R)
for b_, ps, pc, se in zip(betas, p_sim, p_closed, p_se, strict=True):
    print(f"β = {b_:.1f}: simulated {ps:.3f}, closed form {pc:.3f} (± {se:.3f})")
threshold_deviation = float(np.max(np.abs(p_sim - p_closed) / p_se))


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`homogenized.png`, `homogenized-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("homogenized")
