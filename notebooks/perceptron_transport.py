# %% [markdown]
# # Transporting a Gaussian to a mixture with a piecewise-constant perceptron
#
# The continuity equation ∂_t ρ + div(ρ v_θ) = 0 with v_θ(x) = w(aᵀx + b)_+ and controls
# θ = (w, a, b) constant on L pieces (L − 1 switches) pushes the base density ρ_B = N(0, I) in
# R² forward. Each piece has an exact flow map with log-determinant c τ 1[aᵀx + b > 0]
# (`attnflow.Perceptron.flow_map`), so the relative entropy of the pushforward to a target ρ_*
# is, by change of variables,
#
#     KL(T_#ρ_B ‖ ρ_*) = E_{x ~ ρ_B}[log ρ_B(x) − log det ∂T(x) − log ρ_*(T(x))],
#
# estimated by Monte Carlo and minimised with optax (Adam). We also report a Gaussian-kernel
# MMD² between pushed samples and target samples, the loss curve and the number of switches,
# the quantity the normalising-flow paper bounds. `ATTNFLOW_QUICK=1` runs it at test size.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

import attnflow as af

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"

pieces = 6 if QUICK else 24
samples = 256 if QUICK else 4096
steps = 150 if QUICK else 3000
T = 1.0  # total time; piece ℓ acts on [ℓ T/L, (ℓ + 1) T/L)

centers = jnp.array([[2.0, 0.0], [-1.0, 1.5]])
sigma = 0.5


def log_target(y):
    """log of ½ N(c_1, σ²I) + ½ N(c_2, σ²I) in R²."""
    sq = jnp.sum((y[:, None, :] - centers[None]) ** 2, axis=-1)
    return jax.nn.logsumexp(-sq / (2 * sigma**2), axis=1) - jnp.log(2 * 2 * jnp.pi * sigma**2)


def log_base(x):
    return -0.5 * jnp.sum(x**2, axis=1) - jnp.log(2 * jnp.pi)


def field_of(params):
    switches = T * jnp.arange(1, pieces, dtype=float) / pieces
    return af.Perceptron(params["w"], params["a"], params["b"], switches)


def kl(params, x):
    y, logdet = field_of(params).flow_map(x, T)
    return jnp.mean(log_base(x) - logdet - log_target(y))


def mmd2(y, z, scale=1.0):
    def k(p, q):
        return jnp.exp(-jnp.sum((p[:, None] - q[None]) ** 2, axis=-1) / (2 * scale**2))

    return jnp.mean(k(y, y)) + jnp.mean(k(z, z)) - 2 * jnp.mean(k(y, z))


key_init, key_x, key_test, key_target = jr.split(jr.key(0), 4)
params = {
    "w": 0.1 * jr.normal(key_init, (pieces, 2)),
    "a": af.random_tokens(jr.fold_in(key_init, 1), pieces, 2),
    "b": jnp.zeros(pieces),
}
optimizer = optax.adam(0.05)
state = optimizer.init(params)


@jax.jit
def update(params, state, key):
    x = jr.normal(key, (samples, 2))
    loss, grads = jax.value_and_grad(kl)(params, x)
    # optax's Adam raises a Python float to its int32 step count (bias correction), which
    # strict dtype promotion refuses: that one call runs with standard promotion.
    with jax.numpy_dtype_promotion("standard"):
        updates, state = optimizer.update(grads, state)
    return optax.apply_updates(params, updates), state, loss


x_test = jr.normal(key_test, (samples, 2))
label = jr.bernoulli(key_target, 0.5, (samples,)).astype(int)
z_test = centers[label] + sigma * jr.normal(jr.fold_in(key_target, 1), (samples, 2))
kl_initial = float(kl(params, x_test))
mmd_initial = float(mmd2(field_of(params).flow_map(x_test, T)[0], z_test))
losses = []
for step in range(steps):
    params, state, loss = update(params, state, jr.fold_in(key_x, step))
    losses.append(float(loss))
kl_final = float(kl(params, x_test))
y_test = field_of(params).flow_map(x_test, T)[0]
mmd_final = float(mmd2(y_test, z_test))
print(
    f"switches: {pieces - 1}; KL: {kl_initial:.3f} -> {kl_final:.3f}; "
    f"MMD²: {mmd_initial:.4f} -> {mmd_final:.4f}"
)
print("loss curve (every 10%):", np.round(losses[:: max(1, steps // 10)], 3).tolist())


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`perceptron_transport.png`, `perceptron_transport-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("perceptron_transport")
