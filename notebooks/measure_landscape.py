# %% [markdown]
# # Energy landscapes over measures for a general D, and the perceptron block
#
# E(μ) = ∬ exp(xᵀDy) dμ dμ on probability measures on the circle (Burger, Kabri, Korolev,
# Roith, Weigand, arXiv:2501.03096; attnflow's InteractionEnergy is E/(2β) with D = βA).
#
# 1. The type of the maximiser and of the minimiser over diagonal D = diag(d1, d2), computed
#    with `maximize_measure_energy` / `minimize_measure_energy` (three starts, particle moves;
#    the figure `attnflow figure measure-landscape`),
#    against the proven boundaries: max E = max(e^{λ_max}, cosh λ_min) (switch at
#    λ_max = log cosh λ_min) and the proven minimisers (Dirac for λ_max ≤ |λ_min|, λ_min < 0;
#    the kernel for D ⪰ 0 singular; uniform for D ∝ I).
# 2. The first-order minimiser density for D = I + ε diag(0, 1): cos 2θ coefficient
#    I_1(1)/(2 I_2(1)) ε ≈ 2.08 ε.
# 3. Critical points of attention plus a gradient perceptron block on S²: a one-atom critical
#    point sits at a critical point of the perceptron potential Φ (a control without the
#    perceptron shows the check can fail), and how often they are localised.
#
# `ATTNFLOW_QUICK=1` runs it at test size.

# %%
import json
import os
import pathlib
import tempfile

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import scipy.optimize
from scipy.special import iv

import attnflow as af
from attnflow.figures.measure_landscape import KINDS, PRESETS, make

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"

# %% [markdown]
# ## 1. Extremiser types across (d1, d2)

# %%
params = PRESETS["quick" if QUICK else "default"]
out = pathlib.Path(tempfile.mkdtemp()) if QUICK else pathlib.Path("measure_landscape_output")
paths = make(params, out, seed=0)
record = json.loads(paths[2].read_text())["params"]
data = np.load(paths[1])
print("maximiser types (rows d1, columns d2):")
print(np.array(KINDS, dtype=object)[data["max_kind"]])
print("minimiser types:")
print(np.array(KINDS, dtype=object)[data["min_kind"]])
max_fraction = float(np.mean(np.isclose(data["max_energy"], data["max_proven"], rtol=1e-8)))
min_fraction = record["min_energy_matches_proven_fraction"]
print(f"maximum energy = max(e^λmax, cosh λmin) in {max_fraction:.0%} of the grid")
print(f"proven minimum energy reached in {min_fraction:.0%} of the proven cases")

# %% [markdown]
# ## 2. The first-order minimiser density

# %%
points = af.landscape.sphere_points(48 if QUICK else 128, 2)
xy = np.asarray(points)
theta = np.arctan2(xy[:, 1], xy[:, 0])
coef = {}
for eps in (0.01, -0.01):
    r = af.landscape.minimize_measure_energy(np.diag([1.0, 1.0 + eps]), points)
    coef[eps] = 2 * np.sum(np.asarray(r.weights) * np.cos(2 * theta))
slope = (coef[0.01] - coef[-0.01]) / 0.02
print(f"cos 2θ coefficient / ε: {slope:.5f}; I_1(1)/(2 I_2(1)) = {iv(1, 1) / (2 * iv(2, 1)):.5f}")

# %% [markdown]
# ## 3. Attention plus a gradient perceptron block: where the atom sits
#
# With w_k = c_k a_k the block is ∇Φ, Φ(x) = Σ_k (c_k/2)(a_k·x + b_k)_+², so (USA) plus the
# perceptron is the gradient ascent of F(x) = E_β(x) + Σ_i w_i Φ(x_i) (weights 1/n). We draw
# random parameters (β ~ U[0.5, 3], m = 3 neurons, a_k uniform on S², b_k ~ N(0, 0.25),
# c_k ~ N(0, 4)), run the ascent from uniform tokens, refine with `find_critical_point` and
# classify.
#
# Checking that the critical point is "atomic" would prove nothing: plain (USA) ascent already
# collapses the tokens to one atom, whatever the perceptron does. What the perceptron decides is
# *where* the atom sits. A prediction that can fail: if all tokens sit at one point z, rotating
# them together leaves E_β unchanged (it depends on inner products only), so F changes by
# Φ(Rz) − Φ(z), and z must be a critical point of Φ on the sphere, P^⊥_z ∇Φ(z) = 0, computed
# from Φ alone. The control is the same ascent with the perceptron switched off (c = 0): its
# atom lands wherever the tokens happen to collapse, and the same residual is then non-zero
# unless that point falls where Φ is flat (outside every active cap).

# %%
n, d, m = (8, 3, 3) if QUICK else (24, 3, 3)
draws = 4 if QUICK else 40
weights = jnp.full((n,), 1.0 / n)


class Total(af.AbstractEnergy):
    interaction: af.InteractionEnergy
    perceptron: af.Perceptron

    def __call__(self, x, weights=None):
        w = jnp.full((x.shape[0],), 1.0 / x.shape[0]) if weights is None else weights
        return self.interaction(x, w) + jnp.dot(w, self.perceptron.potential(x))


def in_open_hemisphere(x):
    """max t s.t. ⟨u, x_i⟩ ≥ t, |u_j| ≤ 1: positive iff the points lie in an open hemisphere."""
    k = x.shape[1]
    res = scipy.optimize.linprog(
        np.r_[np.zeros(k), -1.0],
        A_ub=np.c_[-x, np.ones(len(x))],
        b_ub=np.zeros(len(x)),
        bounds=[(-1, 1)] * k + [(None, 1)],
    )
    return bool(res.status == 0 and -res.fun > 1e-9)


@jax.jit
def ascend(energy, x):
    def step(_, x):
        g = jax.grad(energy)(x, weights) * n
        g = g - jnp.sum(g * x, axis=1, keepdims=True) * x
        return af.normalize(x + 0.05 * g)

    return jax.lax.fori_loop(0, 4000, step, x)


def phi_residual(perceptron, z):
    """|P^⊥_z ∇Φ(z)|: zero iff z is a critical point of Φ on the sphere."""
    g = jax.grad(lambda p: perceptron.potential(p[None])[0])(z)
    return float(jnp.linalg.norm(g - jnp.dot(g, z) * z))


records = []
for draw in range(draws):
    keys = jr.split(jr.key(draw), 5)
    beta = float(jr.uniform(keys[0], minval=0.5, maxval=3.0))
    a = af.random_tokens(keys[1], m, d)
    b = 0.5 * jr.normal(keys[2], (m,))
    c = 2.0 * jr.normal(keys[3], (m,))
    perceptron = af.Perceptron(c[:, None] * a, a, b)
    energy = Total(af.InteractionEnergy(beta), perceptron)
    start = af.random_tokens(keys[4], n, d)
    x = ascend(energy, start)
    # Same pytree, perceptron off: plain (USA) ascent from the same tokens (no recompilation).
    control = ascend(
        Total(af.InteractionEnergy(beta), af.Perceptron(0 * c[:, None] * a, a, b)), start
    )
    crit = af.find_critical_point(energy, x, weights, throw=False, max_steps=50)
    if not bool(crit.converged):
        records.append(dict(converged=False))
        continue
    kind = af.classify_critical_point(energy, crit.x, weights, remove_orbit=False, tol=1e-8).kind
    positions = int(af.count_clusters(crit.x, 1e-6))
    records.append(
        dict(
            converged=True,
            kind=kind,
            positions=positions,
            localised=in_open_hemisphere(np.asarray(crit.x)),
            residual=phi_residual(perceptron, crit.x[0]) if positions == 1 else None,
            control_positions=int(af.count_clusters(control, 1e-6)),
            control_residual=phi_residual(perceptron, af.normalize(control.mean(axis=0))),
        )
    )
converged = [r for r in records if r["converged"]]
one_atom = [r for r in converged if r["positions"] == 1]
atomic_fraction = np.mean([r["positions"] < n for r in converged])
control_atomic_fraction = np.mean([r["control_positions"] == 1 for r in converged])
localised_fraction = np.mean([r["localised"] for r in converged])
max_residual = max(r["residual"] for r in one_atom)
control_residuals = [r["control_residual"] for r in converged]
print(
    f"{len(converged)}/{draws} critical points converged; kinds:",
    {k: sum(r["kind"] == k for r in converged) for k in {r["kind"] for r in converged}},
)
print(
    f"atomic (fewer than {n} positions): {atomic_fraction:.0%}, and {control_atomic_fraction:.0%} "
    f"one atom without the perceptron; localised (open hemisphere): {localised_fraction:.0%}"
)
print("distinct positions per draw:", [r["positions"] for r in converged])
print(
    f"one-atom critical points: {len(one_atom)}; max |P^⊥ ∇Φ(z)| at the atom: {max_residual:.1e}; "
    f"at the perceptron-free collapse point: {np.round(control_residuals, 3).tolist()}"
)


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`measure_landscape.png`, `measure_landscape-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("measure_landscape")
