# %% [markdown]
# # Limit geometries by the spectrum of V (GLPR23, arXiv:2305.05465)
#
# Pure self-attention on R^d, ẋ_i = Σ_j a_ij V x_j, seen through z = e^{−tV}x (paper (9.3)).
# Which object the rescaled tokens reach depends on the spectrum of V (Table 1 of GLPR23,
# docs/maths.md §1.8): the vertices of a polytope (V = I), at most three hyperplanes ψ₁·z = c
# (simple top eigenvalue), polytope × subspace (paranormal V), the origin (V = −I, unscaled x).
# `attnflow.models.limit_geometry` reads each of these off a configuration. The runs use the
# authors' matrices and settings (clustering-Tformers.py: n = 20, x0 uniform on [−5, 5]^d,
# Q = K = I). `ATTNFLOW_QUICK=1` runs a test-sized version.

# %%
import os

import jax
import numpy as np

import attnflow as af
from attnflow.figures import limit_geometries

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
# t1 = 10 (the authors stop at 5): hardmax has set in and the limits are reached to ~1e-5.
params = {**limit_geometries.PRESETS["default"], "t1": 10.0}
if QUICK:  # the test's settings: two save times only
    params["num_times"] = 2

# %% [markdown]
# ## The spectra and which row of Table 1 applies

# %%
for name, V in limit_geometries.PANELS.items():
    s = af.models.value_spectrum(V)
    print(
        f"{name:14s} eigenvalues {np.round(s.eigenvalues, 3)}  "
        f"Thm 4.1 hypothesis: {s.hyperplane_condition}  paranormal: {s.paranormal}"
    )

# %% [markdown]
# ## Runs and diagnostics
# For each panel: the hull vertices and the largest distance of a token to one (relative to the
# diameter), the number of levels of ψ₁·z, the paranormal polytope in C, and how Boolean the
# final attention matrix is.

# %%
panels = limit_geometries.compute(params, seed=0)
rows = limit_geometries.summary(panels)
for name, row in rows.items():
    print(
        f"{name:14s} vertices {row['hull_vertices']:3d}  max dist to vertex "
        f"{row['max_vertex_distance']:.1e}  levels {row['num_levels']:2d}  "
        f"Boolean distance {row['boolean_distance']:.1e}  general rows {row['general_rows']}"
    )
fig = limit_geometries.plot(panels)

# %% [markdown]
# What the theorems predict, checked:
# - V = I: every token sits on a vertex of the hull (Thm 3.1: 0 or a point of ∂K; vertices for
#   generic data);
# - the authors' 2-d V (simple top eigenvalue λ₁ ≈ 1.35): at most 3 levels of ψ₁·z;
# - V = diag(1, −0.5): the C-coordinate takes two values (the two ends of an interval);
# - d = 1: the attention matrix is Boolean except possibly one row, which can be a general
#   probability vector (here none).

# %%
g = {name: p["geometry"] for name, p in panels.items()}
polytope_distance = float(g["polytope"].vertex_distance.max())
hyperplane_levels = g["hyperplanes"].num_levels
paranormal_distance = float(np.nanmax(g["paranormal"].subspace_vertex_distance))
boolean_distance, general_rows = g["d = 1"].boolean_distance, g["d = 1"].general_rows.size
print(polytope_distance, hyperplane_levels, paranormal_distance, boolean_distance, general_rows)

# %% [markdown]
# ## A matrix outside the hypotheses
# V with a complex top pair (a rotation with expansion): no hyperplanes, ψ₁·z spreads out.

# %%
V_rot = np.array([[0.5, -1.0], [1.0, 0.5]])
x0 = jax.random.uniform(jax.random.key(0), (params["n"], 2), minval=-5.0, maxval=5.0)
ts, z = limit_geometries.simulate(V_rot, np.eye(2), x0, params["t1"], 2, params["rtol"])
rotation = af.models.limit_geometry(z, V_rot, t=float(ts[-1]))
rotation_levels = rotation.num_levels
print("rotation-dominated V:", rotation.spectrum.hyperplane_condition, rotation_levels, "levels")


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`limit_geometries.png`, `limit_geometries-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("limit_geometries")
