# %% [markdown]
# # Causal attention: metastable Rényi centres
#
# Causal self-attention (KPR24, docs/maths.md §1.7) with V = I keeps the first token fixed and, for
# almost every start, drives every token to x_1(0). At large β the approach is metastable:
# *strong Rényi centres* — tokens farther than δ from every earlier token — attract the tokens
# that come after them and barely move for a long time, because the pull between two tokens at
# distance ≥ δ is ≲ exp(−β δ²/2) (chordal distance, ⟨x, y⟩ = 1 − |x − y|²/2).
#
# Setting of KPR24's Fig. 2: n = 200 tokens on the circle (d = 2), β = 64, δ = 4 β^{-1/2}.
# `ATTNFLOW_QUICK=1` runs a smaller instance.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"

n, d, beta = (40, 2, 64.0) if QUICK else (200, 2, 64.0)
t1 = 5.0 if QUICK else 40.0
delta = 4 / np.sqrt(beta)

# %% [markdown]
# ## Strong Rényi centres
# Token k is a strong centre when |x_k − x_j| > δ for all j < k; token 1 always is. For i.i.d.
# uniform tokens, token k is one with probability (1 − p)^{k−1}, where p = σ(cap_δ) is the
# measure of the cap of chordal radius δ (on the circle: p = α/π with α = 2 arcsin(δ/2)). So the
# expected count is (1 − (1 − p)^n)/p → 1/p = Θ(β^{(d−1)/2}).


# %%
def strong_renyi_centres(x, delta):
    """Boolean mask of tokens at chordal distance > delta from every earlier token."""
    distance = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=-1)
    earlier = np.tril(np.ones((len(x), len(x)), dtype=bool), k=-1)
    return ~np.any(earlier & (distance <= delta), axis=1)


p = 2 * np.arcsin(delta / 2) / np.pi
expected_count = (1 - (1 - p) ** n) / p
draws = np.asarray(af.random_tokens(jr.key(1), n, d, batch_shape=(100 if QUICK else 400,)))
counts = np.array([strong_renyi_centres(x, delta).sum() for x in draws])
print(
    f"strong centres: mean {counts.mean():.2f} ± {counts.std(ddof=1) / np.sqrt(len(counts)):.2f}"
    f" (Monte Carlo), expected {expected_count:.2f}"
)

# %% [markdown]
# ## The flow
# Integrate causal (SA) with Q = K = V = I and follow the centres and the other tokens.

# %%
x0 = af.random_tokens(jr.key(0), n, d)
centres = strong_renyi_centres(np.asarray(x0), delta)
ts = jnp.linspace(0.0, t1, 41)
field = af.SelfAttention(beta, causal=True)
sol = af.solve(field, x0, t1, ts=ts, rtol=1e-8, atol=1e-10, max_steps=20000)
xs = np.asarray(sol.ys)

displacement = np.linalg.norm(xs[-1] - xs[0], axis=-1)
centre_motion = float(displacement[centres].max())
follower_motion = float(np.median(displacement[~centres]))
nearest_centre = np.linalg.norm(xs[:, :, None, :] - xs[:, None, centres, :], axis=-1).min(-1)
print(f"{centres.sum()} strong centres among {n} tokens (δ = {delta:.2f})")
print(f"largest displacement of a centre by t = {t1:g}: {centre_motion:.2e}")
print(f"median displacement of the other tokens:      {follower_motion:.2e}")
print(
    "median distance of non-centres to the nearest centre: "
    f"{np.median(nearest_centre[0, ~centres]):.3f} at t = 0, "
    f"{np.median(nearest_centre[-1, ~centres]):.3f} at t = {t1:g}"
)

# %% [markdown]
# Centres stay put while the other tokens collapse onto them: the configuration at t1 is a
# metastable multi-cluster state whose clusters sit at the strong centres, long before the
# final single cluster at x_1(0).

# %%
if not QUICK:
    import matplotlib.pyplot as plt

    angles = np.unwrap(np.arctan2(xs[..., 1], xs[..., 0]), axis=0)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(np.asarray(ts), angles[:, ~centres], color="0.7", lw=0.6)
    ax.plot(np.asarray(ts), angles[:, centres], color="C3", lw=1.5)
    ax.set_xlabel("t (layers)")
    ax.set_ylabel("angle θ_k(t)")
    ax.set_title(f"causal SA, n = {n}, β = {beta:g}: strong Rényi centres in red")
    fig.tight_layout()
    from attnflow import plot

    plot.save_figures("causal_renyi")  # into $ATTNFLOW_OUT, when set
    plt.show()
