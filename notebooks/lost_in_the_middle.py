# %% [markdown]
# # Lost in the middle: the U-shaped retrieval profile of causal ALiBi attention
#
# Duerinckx, Geshkovski and Rossi (2026) study a causal particle system on the circle, with
# ALiBi positional weights normalised over the past,
#
#     θ̇_j = Σ_{k<j} w_jk (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}),  w_jk ∝ e^{−λ(j−k)/N},
#
# and solve its limiting correlation equation in closed form. The "soft accuracy" with which
# the last token remembers the token at relative position s,
# S_t(s) = lim N·Σ_n ω_n E cos(n(θ_N(t) − θ_{sN}(0))), is U-shaped (primacy and recency) with a
# unique interior minimum while t < t_crit. This notebook checks the closed form three ways:
#
# 1. t_crit against the slope of S_t at s = 1;
# 2. the closed form as the N → ∞ limit of the finite-N linear response (an O(1/N) slope);
# 3. particles: they converge to the closed form as N grows, slowly, the more slowly the larger t.
#
# `ATTNFLOW_QUICK=1` runs a test-sized version.

# %%
import os

import jax
import jax.random as jr
import numpy as np

import attnflow.theory as th
from attnflow import enable_compilation_cache
from attnflow.figures import lost_in_the_middle as litm

jax.config.update("jax_enable_x64", True)
enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
beta, lam = 1.0, 1.0

# %% [markdown]
# ## 1. The threshold
# t_crit = 2(1 − e^{−λ}) Σ ω_n a_n / Σ ω_n a_n² (a_n = n² I_n(β)); the authors quote 2.4575 at
# β = λ = 1 and 0.6007 at β = 2, λ = 1. The slope of S_t at s = 1 changes sign there.

# %%
t_crit = th.lost_in_the_middle_threshold(beta, lam)
h = 1e-5
slopes = []
for t in (0.9 * t_crit, 1.1 * t_crit):
    f = np.asarray(th.lost_in_the_middle_profile(np.array([1.0, 1.0 - h]), t, beta, lam))
    slopes.append((f[0] - f[1]) / h)
print(
    f"t_crit(1, 1) = {t_crit:.4f}, t_crit(2, 1) = {th.lost_in_the_middle_threshold(2.0, 1.0):.4f}"
)
print(f"slope of S_t at s = 1: {slopes[0]:+.4f} at 0.9 t_crit, {slopes[1]:+.4f} at 1.1 t_crit")
assert abs(t_crit - 2.4575) < 5e-5 and slopes[0] > 0 > slopes[1]

# %% [markdown]
# ## 2. The closed form is the N → ∞ limit of the linear response
# The linearised correlation system dC_n/dt = a_n W C_n, C_n(0) = I (W the ALiBi weights) is
# solved exactly by a matrix exponential; N·C_n(t)[N, sN] approaches the closed form as 1/N.

# %%
sources, t = np.array([0.25, 0.5, 0.75]), 1.0
exact = np.asarray(th.lost_in_the_middle_profile(sources, t, beta, lam))
Ns = [32, 64, 128] if QUICK else [32, 64, 128, 256, 512]
errors = [
    np.abs(litm.linear_response_profile(N, [t], sources, beta, lam)[0] - exact).max() for N in Ns
]
slope = np.polyfit(np.log(Ns), np.log(errors), 1)[0]
for N, e in zip(Ns, errors, strict=True):
    print(f"N = {N:4d}: max |linear response − closed form| = {e:.2e}")
print(f"log-log slope {slope:.3f}")
assert abs(slope + 1) < 0.05

# %% [markdown]
# ## 3. Particles
# A Monte Carlo of the particle system with the coupling estimator (the same run with the
# source token redrawn: O(1) variance instead of O(N²)). At small t the particles follow the
# linear response; at larger t finite-N nonlinear effects (the tokens start to cluster) put
# them below it, by a gap that closes slowly as N grows (section 4, panel (b) of the figure).

# %%
N = 16 if QUICK else 32
realizations = 96 if QUICK else 2048
ts = [0.5, 1.0] if QUICK else [0.5, 1.0, 2.0]
mean, err = litm.monte_carlo_profile(
    jr.key(0), N, ts, sources, beta, lam, realizations=realizations, dt=0.05
)
linear = litm.linear_response_profile(N, ts, sources, beta, lam)
for k, t in enumerate(ts):
    print(f"t = {t}: particles {np.round(mean[k], 3)} ± {np.round(2 * err[k], 3)}")
    print(f"        linear response (N = {N}) {np.round(linear[k], 3)}")
    print(f"        ratio {np.round(mean[k] / linear[k], 3)}")
assert np.all(np.abs(mean[0] - linear[0]) < 3 * err[0] + 0.02)
if not QUICK:
    # Linear response stops holding: at t = 2 the particles sit well below it in the middle.
    middle = 1
    print(
        f"t = 2, s = 0.5: particles / linear response = {mean[2, middle] / linear[2, middle]:.2f}"
    )
    assert mean[2, middle] < linear[2, middle] - 3 * err[2, middle]

# %% [markdown]
# ## 4. The figure
# `attnflow figure lost-in-the-middle` draws the closed-form profiles (the N → ∞ limit) with
# particle estimates at growing N overlaid, their ratio to the closed form against N, t_crit(β)
# for several λ, and a four-head profile with a double well.

# %%
data = litm.compute(litm.PRESETS["quick" if QUICK else "default"], seed=0)
fig = litm.plot(data, litm.PRESETS["quick" if QUICK else "default"])
print(f"double well: {np.sum(np.diff(np.sign(np.diff(data['double_well']))) > 0)} interior minima")


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`lost_in_the_middle.png`, `lost_in_the_middle-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("lost_in_the_middle")
