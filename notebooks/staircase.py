# %% [markdown]
# # Dynamic metastability: the energy staircase of (USA) on the circle
#
# At large β, tokens under (USA) collapse into a few clusters almost at once and then sit still
# for times ~ e^{β(1 − cos u)} (u the gap to the next cluster) before merging, pairwise, until one
# cluster is left (GKPR24; docs/maths.md §10). The normalised energy φ = 2β e^{−β} E_β climbs a
# staircase whose steps are Σ_q m_q² over the cluster masses.
#
# The run integrates the angle ODE (7.1) with an L-stable implicit solver in float64: a few
# hundred steps cover 15 decades of time (see `attnflow.figures.staircase` for why).
# `ATTNFLOW_QUICK=1` runs a test-sized version.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from scipy.integrate import solve_ivp

from attnflow import enable_compilation_cache
from attnflow.figures import staircase

jax.config.update("jax_enable_x64", True)
enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
params = staircase.PRESETS["quick" if QUICK else "default"]

# %%
theta0 = jr.uniform(jr.key(0), (params["n"],), jnp.float64, 0.0, 2 * np.pi)
ts = staircase.save_times(params["beta"], params["t1"], params["num_times"])
result = staircase.simulate(
    theta0,
    params["beta"],
    ts,
    delta=params["delta"],
    rtol=params["rtol"],
    atol=params["atol"],
    max_steps=params["max_steps"],
)
events = staircase.merge_events(result)
fig = staircase.plot(result, events, params)
print(
    f"{result['num_steps']} solver steps; {len(events)} merges; "
    f"{result['counts'][-1]} cluster(s) at t = {ts[-1]:.0e}; "
    f"finite everywhere: {all(np.all(np.isfinite(v)) for v in result.values())}"
)

# %% [markdown]
# ## The merge log, and the plateaux against Σ m_q²
# Just before each merge the energy sits on a plateau; the gap to Σ m_q² is the cross-cluster
# interaction Σ_{q≠r} m_q m_r e^{β(cos u_qr − 1)}, tiny once the clusters are far apart.

# %%
print(f"{'t merge':>10} {'clusters':>9} {'φ before':>9} {'Σ m² before':>12}  merged masses")
for e in events:
    print(
        f"{e['t_after']:10.3e} {e['clusters_before']:>4} → {e['clusters_after']:<2} "
        f"{e['energy_before']:9.6f} {e['level_before']:12.6f}  {e['merged_masses']}"
    )

# %% [markdown]
# ## The last merge is a two-body problem
# With two point clusters of masses m_1 + m_2 = 1 at gap u, (7.1) reduces exactly to
# u̇ = −e^{β cos u} sin u. Solving that scalar ODE (scipy, Radau) from a time on the last plateau
# predicts the merge; it should match the particle run.

# %%
two = np.flatnonzero(result["counts"] == 2)
if len(two):
    k0 = two[len(two) // 2]
    centres = [
        np.angle(np.mean(np.exp(1j * result["theta"][k0][result["labels"][k0] == r])))
        for r in np.unique(result["labels"][k0])
    ]
    gap0 = abs(np.angle(np.exp(1j * (centres[1] - centres[0]))))
    beta = params["beta"]
    later = ts[k0:]
    sol = solve_ivp(
        lambda t, u: -np.exp(beta * np.cos(u)) * np.sin(u),
        (later[0], later[-1]),
        [gap0],
        method="Radau",
        t_eval=later,
        rtol=1e-10,
        atol=1e-12,
    )
    spread = [np.ptp(np.angle(np.exp(1j * (th - th[0])))) for th in result["theta"][k0:]]
    merged_model = later[np.argmax(sol.y[0] < 1e-2)]
    merged_run = later[np.argmax(np.array(spread) < 1e-2)]
    print(
        f"gap at t = {later[0]:.3e}: {gap0:.4f}; merge (gap < 0.01) at t ≈ {merged_model:.3e} "
        f"(two-body ODE) vs {merged_run:.3e} (particles)"
    )


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`staircase.png`, `staircase-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("staircase")
