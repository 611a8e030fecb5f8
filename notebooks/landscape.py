# %% [markdown]
# # The energy landscape: critical points, strict saddles and Problem 3
#
# The clustering theorems of GLPR (Thms 4.1, 4.3, 5.1) rest on one property of
# E_β(x) = 1/(2βn²) Σ_ij exp(β⟨x_i, x_j⟩) on (S^{d−1})^n: every critical point other than
# synchrony is a *strict saddle* — the Riemannian Hessian has a positive eigenvalue, so the
# ascent flow escapes it for almost every start. Problem 3 asks whether this holds on the circle
# for every β; it is proved for β ≤ 1 and for β > β_n (Thm 5.1's proof, docs/maths.md §7).
#
# This notebook
# 1. compares the Thm 5.1 threshold β_n with the paper's n²/π²;
# 2. classifies the regular n-gon and two antipodal groups (Lemma A.2) across β;
# 3. surveys critical points on the circle for β between 1 and β_n, where Problem 3 is open,
#    and on S²;
# 4. probes a large system with Hessian-vector products and Lanczos.
#
# `ATTNFLOW_QUICK=1` runs it at test size.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow import plot, theory

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"

# %% [markdown]
# ## 1. Where the proof of Thm 5.1 starts
#
# The proof needs (n − 1) τ*_β < π/2, i.e. β > β_n = cos a / sin² a with a = π/(2(n − 1)),
# about 4(n − 1)²/π² — four times the n²/π² quoted in the paper's §7 (docs/maths.md §11.5).

# %%
print(f"{'n':>4} {'beta_n':>10} {'4(n-1)^2/pi^2':>14} {'n^2/pi^2':>9}")
for n in (3, 4, 6, 8, 16, 32):
    print(
        f"{n:>4} {theory.strict_saddle_threshold(n):>10.3f} "
        f"{4 * (n - 1) ** 2 / np.pi**2:>14.3f} {n**2 / np.pi**2:>9.3f}"
    )

# %% [markdown]
# ## 2. Symmetric critical points
#
# The regular n-gon is a critical point for every β. Its Hessian is circulant; every
# eigenvalue except the rotation is positive, so it is a local *minimum* of E_β — a strict saddle
# in the paper's sense (`is_paper_strict_saddle`), though not in the both-signs sense of
# `kind`. Two antipodal groups are strict saddles: rotating one group ascends (Lemma A.2).

# %%
betas = [0.5, 1.0, 3.0] if QUICK else [0.1, 0.5, 1.0, 2.0, 5.0, 10.0]
n = 4 if QUICK else 5  # at test size, shapes shared with the survey below compile once
rows = []
for beta in betas:
    energy = af.InteractionEnergy(beta)
    ngon = af.landscape.circle_tokens(2 * jnp.pi * jnp.arange(n, dtype=float) / n)
    groups = af.landscape.circle_tokens(jnp.where(jnp.arange(n) < 2, 0.0, jnp.pi))
    for name, x in ((f"{n}-gon", ngon), (f"antipodal 2|{n - 2}", groups)):
        c = af.classify_critical_point(energy, x)
        rows.append((beta, name, c.kind, c.num_positive, c.num_negative, c.is_paper_strict_saddle))
        print(
            f"beta = {beta:5.2f}  {name:14s} {c.kind:14s}  +{c.num_positive} -{c.num_negative}"
            f"  paper strict saddle: {c.is_paper_strict_saddle}"
        )
symmetric_all_escape = all(row[-1] for row in rows)

# %% [markdown]
# ## 3. A survey where Problem 3 is open: 1 < β < β_n on the circle, and on S²
#
# Seeds: random starts, metastable states of the (SA) flow, symmetric configurations.
# Each seed is refined by Riemannian Newton (`find_critical_point`), the results are
# deduplicated modulo rotations and permutations and classified. A non-synchronised local
# maximum would be a counterexample.

# %%
systems = (
    [(4, 2, 2.0), (4, 3, 2.0)]
    if QUICK
    else [(5, 2, 2.0), (5, 2, 4.0), (6, 2, 6.0), (8, 2, 10.0), (5, 3, 3.0), (6, 3, 6.0)]
)
seeds = dict(num_random=6, num_flow=2, flow_times=(5.0, 50.0)) if QUICK else {}
surveys = []
key = jr.key(0)
for n, d, beta in systems:
    key, sub = jr.split(key)
    survey = af.landscape.survey_critical_points(n, d, beta, key=sub, **seeds)
    surveys.append(survey)
    beta_n = theory.strict_saddle_threshold(n) if d == 2 else float("nan")
    print(
        f"n={n} d={d} beta={beta:g} (beta_n={beta_n:.2f}): {survey.num_converged}/"
        f"{survey.num_seeds} converged, {len(survey.points)} distinct, {survey.counts}, "
        f"counterexample: {survey.counterexample}, inconclusive: {survey.inconclusive}"
    )
counterexample_found = any(s.counterexample for s in surveys)

# %%
last = surveys[0]
labels = [f"{p.kind.split()[-1]} ({p.num_clusters} cl.)" for p in last.points]
ax = plot.critical_point_spectra(
    [p.eigenvalues for p in last.points], labels, title=f"n={last.n}, d={last.d}, β={last.beta:g}"
)

# %% [markdown]
# The normalised energy 2βe^{−β}E_β of a critical point made of well separated point
# clusters of masses m_q is close to Σ_q m_q² (the metastable plateaux, docs/maths.md §10):

# %%
for p in surveys[0].points:
    print(
        f"{p.kind:14s} clusters={p.num_clusters}  2βe^-β E = {p.normalized_energy:.4f}  "
        f"ascent directions = {p.num_positive}"
    )

# %% [markdown]
# ## 4. Large systems: Lanczos on Hessian-vector products
#
# For large n the dense (n(d−1))² Hessian is out of reach; `hessian_extreme_eigenvalues` runs
# Lanczos on `hessian_vector_product`, with the rotation orbit projected out. After a short
# (SA) run the tokens are near a metastable clustered state; the extreme eigenvalues give the
# curvature scales there (the point is not critical, so this is a probe, not a classification).

# %%
n_large = 60 if QUICK else 2000
beta = 4.0
x0 = af.random_tokens(jr.key(1), n_large, 3)
x = af.layers(af.SelfAttention(beta), x0, 100, 0.1)[-1]
lo, hi = af.landscape.hessian_extreme_eigenvalues(
    af.InteractionEnergy(beta), x, num_iterations=30 if QUICK else 80
)
print(
    f"n = {n_large}: clusters = {int(af.count_clusters(x, 1e-2))}, "
    f"Hessian spectrum in [{float(lo):.3e}, {float(hi):.3e}]"
)


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`landscape.png`, `landscape-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("landscape")
