"""Bridges between densities on a grid and particles: the energy E_β[ρ], kernel density
estimates of particles, samples of a density, and the sliced Wasserstein distance between them."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from .._check import (
    check_beta,
    check_key,
    check_measure,
    check_positive_scalar,
    check_size,
    check_tokens,
    expected,
    is_traced,
)
from .._sphere import random_tokens
from ..measures._sampling import sliced_wasserstein
from ._grid import AbstractDensityGrid, check_grid
from ._solve import check_density, default_resolution_tol, spectral_tail


def _density(grid, coefficients, name="coefficients"):
    dtype = jnp.result_type(coefficients) if hasattr(coefficients, "dtype") else float
    tol = default_resolution_tol(dtype)
    return check_density(grid, coefficients, name, tol)


def density_energy(grid: AbstractDensityGrid, coefficients: Array, beta) -> Float[Array, ""]:
    r"""The interaction energy of a density,

        E_β[ρ] = 1/(2β) ∫∫ e^{β⟨x,y⟩} ρ(x) ρ(y) dσ(x) dσ(y),

    attnflow's :class:`attnflow.InteractionEnergy` with the measure ρσ as weights (for
    ρσ = (1/n)Σδ_{x_i} it is ``InteractionEnergy(beta)(x)``; arXiv:2312.10794 (3.5)). USA is
    its Wasserstein gradient *ascent*: along :func:`solve_density` with
    ``normalization="n"``, dE/dt = ∫ρ|X[ρ]|² dσ ≥ 0. Computed as
    e^{|β|}/(2β) Σ_q w_q ρ(x_q) (W̃∗ρ)(x_q) with the grid's quadrature (exact for band-limited
    ρ, the kernel by Funk–Hecke on S¹).

    Args:
        grid: the grid.
        coefficients: the density's coefficients.
        beta: β ≠ 0, of either sign (negative energy for β < 0).

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf, scipy.special as sp
        >>> grid = mf.CircleGrid(8)
        >>> uniform = jnp.zeros(17).at[0].set(1.0)   # E = I_0(β)/(2β) for the uniform density
        >>> bool(jnp.isclose(mf.density_energy(grid, uniform, 2.0), sp.i0(2.0) / 4))
        True
    """
    grid = check_grid(grid)
    # β ≠ 0 of either sign, as InteractionEnergy (docs/conventions.md, "Negative β").
    beta = check_beta(beta, positive=True, signed=True)
    coefficients = _density(grid, coefficients)
    values = grid.to_values(coefficients)
    potential = grid.interaction_potential(coefficients, beta)
    integral = jnp.sum(grid.quadrature_weights().astype(values.dtype) * values * potential)
    beta = jnp.asarray(beta, integral.dtype)
    return jnp.exp(jnp.abs(beta)) * integral / (2 * beta)


def density_from_particles(
    grid: AbstractDensityGrid,
    x: Float[Array, "n d"],
    *,
    bandwidth,
    weights: Float[Array, " n"] | None = None,
) -> Array:
    r"""A kernel density estimate of particles, as coefficients on ``grid``:

        ρ_h(y) ∝ Σ_i w_i e^{(⟨y, x_i⟩ − 1)/h²},

    the von Mises–Fisher kernel of concentration 1/h² (angular bandwidth h), normalised so that
    ∫ρ_h dσ = Σ_i w_i (1 by default). On S¹ its Fourier coefficients are the empirical ones
    times I_k(1/h²)/I_0(1/h²) (Funk–Hecke). The estimate must be resolved by the grid (its
    spectral tail ≤ 1e-6 in float64): a bandwidth too small for the modes is refused.

    Args:
        grid: the grid.
        x: (n, d) particles on the sphere.
        bandwidth: the angular bandwidth h > 0.
        weights: (n,) non-negative masses (default 1/n).

    Example:
        >>> import jax.random as jr, attnflow as af, attnflow.meanfield as mf
        >>> x = af.random_tokens(jr.key(0), 1000, 2)
        >>> c = mf.density_from_particles(mf.CircleGrid(32), x, bandwidth=0.3)
        >>> round(float(c[0]), 12), bool(abs(c[1]) < 0.2)
        (1.0, True)
    """
    grid = check_grid(grid)
    x = check_tokens(x, "x")
    n, d = x.shape
    if d != grid.dimension:
        expected("x", f"particles in R^{grid.dimension} (the grid's sphere)", f"= shape {x.shape}")
    h = check_positive_scalar(bandwidth, "bandwidth", what="bandwidth")
    weights = check_measure(weights, n)
    w = jnp.full((n,), 1.0 / n, x.dtype) if weights is None else jnp.asarray(weights, x.dtype)
    coefficients = _kernel_estimate(grid, x, w, 1 / jnp.asarray(h, x.dtype) ** 2)
    tol = default_resolution_tol(x.dtype)
    tail = spectral_tail(grid, coefficients)
    message = (
        f"bandwidth: the kernel estimate is not resolved by the grid (spectral tail > {tol:g}): "
        f"use a larger bandwidth or more modes (about 4/h modes for bandwidth h)"
    )
    if is_traced(tail):
        return eqx.error_if(coefficients, tail > tol, message)
    if float(tail) > tol:
        raise ValueError(f"{message}; got tail {float(tail):.3g} at h = {float(h):g}")
    return coefficients


@eqx.filter_jit
def _kernel_estimate(grid, x, w, concentration):
    def at(node):
        return jnp.sum(w * jnp.exp(concentration * (x @ node - 1)))

    values = jax.lax.map(at, grid.nodes().astype(x.dtype), batch_size=64)
    mass = jnp.sum(grid.quadrature_weights().astype(values.dtype) * values)
    return grid.from_values(values * (jnp.sum(w) / mass))


def sample_density(
    key: PRNGKeyArray, grid: AbstractDensityGrid, coefficients: Array, n: int
) -> Float[Array, "n d"]:
    """n i.i.d. samples of the density ρ (normalised by its mass), as (n, d) unit vectors.

    Rejection sampling: proposals uniform on the sphere, accepted with probability
    ρ(x)/(1.25 max_nodes ρ) (ρ evaluated exactly at the proposal with ``grid.evaluate``; the
    factor 1.25 covers the maximum between nodes of a resolved density). The expected number of
    proposals per sample is 1.25 max ρ / mass.

    Args:
        key: PRNG key.
        grid: the grid.
        coefficients: the density's coefficients (checked as in :func:`solve_density`).
        n: the number of samples.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(8)
        >>> c = jnp.zeros(17).at[0].set(1.0).at[1].set(0.8)      # ρ = 1 + 0.8 cos θ
        >>> x = mf.sample_density(jr.key(0), grid, c, 20000)
        >>> bool(abs(jnp.mean(x[:, 0]) - 0.4) < 0.02)            # E cos θ = a_1 / 2
        True
    """
    key = check_key(key)
    grid = check_grid(grid)
    # Each round evaluates the density at n proposals (n × the grid's coefficients): first.
    n = check_size(
        n, "n", per_unit=grid.size, what="density evaluations per round (n × coefficients)"
    )
    coefficients = _density(grid, coefficients)
    return _rejection_sample(key, grid, coefficients, n)


@eqx.filter_jit
def _rejection_sample(key, grid, coefficients, n: int):
    dtype = coefficients.dtype
    d = grid.dimension
    bound = 1.25 * jnp.max(grid.to_values(coefficients))

    def fill(state):
        samples, count, key = state
        key, k_prop, k_acc = jr.split(key, 3)
        proposals = random_tokens(k_prop, n, d).astype(dtype)
        density = jnp.maximum(grid.evaluate(coefficients, proposals), 0)
        accept = jr.uniform(k_acc, (n,), dtype) * bound < density
        slot = count + jnp.cumsum(accept) - 1
        slot = jnp.where(accept & (slot < n), slot, n)
        samples = samples.at[slot].set(proposals, mode="drop")
        return samples, jnp.minimum(count + jnp.sum(accept), n), key

    state = (jnp.zeros((n, d), dtype), jnp.asarray(0), key)
    samples, _, _ = jax.lax.while_loop(lambda s: s[1] < n, fill, state)
    return samples


def density_sliced_wasserstein(
    key: PRNGKeyArray,
    grid: AbstractDensityGrid,
    coefficients: Array,
    x: Float[Array, "n d"],
    *,
    weights: Float[Array, " n"] | None = None,
    num_projections: int = 256,
) -> Float[Array, ""]:
    """The sliced Wasserstein distance SW_2 between a density and particles, by
    :func:`attnflow.measures.sliced_wasserstein` with the density as the weighted point cloud
    Σ_q w_q ρ(x_q) δ_{x_q} on the grid's nodes.

    The nodes discretise the density at their spacing (on S¹ an error of about
    π/(m√3) in W_2 for m nodes): compare distances above that, or evaluate the same coefficients
    on a finer grid of the same layout (``CircleGrid(K, points=4096)``).

    Args:
        key: PRNG key for the projections (reuse it for common random numbers).
        grid: the grid.
        coefficients: the density's coefficients.
        x: (n, d) particles.
        weights: (n,) particle masses (default 1/n).
        num_projections: the number of random directions.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(8, points=2048)
        >>> uniform = jnp.zeros(17).at[0].set(1.0)
        >>> x = af.random_tokens(jr.key(0), 4000, 2)
        >>> bool(mf.density_sliced_wasserstein(jr.key(1), grid, uniform, x) < 0.03)
        True
    """
    key = check_key(key)
    grid = check_grid(grid)
    coefficients = _density(grid, coefficients)
    x = check_tokens(x, "x")
    if x.shape[1] != grid.dimension:
        expected("x", f"particles in R^{grid.dimension} (the grid's sphere)", f"= shape {x.shape}")
    weights = check_measure(weights, x.shape[0])
    mass = grid.quadrature_weights() * jnp.maximum(grid.to_values(coefficients), 0)
    return sliced_wasserstein(
        key,
        grid.nodes().astype(x.dtype),
        x,
        x_weights=mass.astype(x.dtype),
        y_weights=weights,
        num_projections=num_projections,
    )
