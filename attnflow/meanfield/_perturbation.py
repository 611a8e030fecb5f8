"""A band-limited random perturbation of the uniform density: the start of a pattern-forming
solve that the grid resolves (a perturbation at the nodes, e.g. noise, has every degree and is
refused as unresolved)."""

import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, PRNGKeyArray

from .._check import check_int, check_key, check_real_values, expected
from ._grid import AbstractDensityGrid, check_grid


def random_perturbation(
    grid: AbstractDensityGrid, key: PRNGKeyArray, *, max_degree: int, amplitude: float = 0.1
) -> Array:
    r"""Coefficients of ρ₀ = 1 + a f, f random and band-limited (degrees 1 … ``max_degree``):

        f = Σ_{1 ≤ ℓ ≤ ℓ_max} g_ℓm Y_ℓm / max_nodes |Σ g_ℓm Y_ℓm|,   g_ℓm ~ N(0, 1) i.i.d.,

    (Fourier modes k on S¹, spherical harmonics on S²), so that max |ρ₀ − 1| = a at the grid's
    nodes, the mass is 1 and ρ₀ ≥ 1 − a > 0 there. Degrees above ``max_degree`` are exactly
    zero: with ℓ_max ≤ 3L/4 the start is resolved (spectral tail 0), which a noisy start built
    from values at the nodes never is (it has every degree: "needs more modes").
    Deterministic given ``key``.

    Args:
        grid: a :class:`CircleGrid` or :class:`SphereGrid` (degree L).
        key: a JAX PRNG key.
        max_degree: ℓ_max, 1 ≤ ℓ_max ≤ ⌊3L/4⌋.
        amplitude: a in (0, 1).

    Returns:
        Coefficients of shape ``grid.degrees().shape``, in the default float dtype.

    Example:
        >>> import jax.random as jr, attnflow.meanfield as mf
        >>> grid = mf.SphereGrid(8)
        >>> c = mf.random_perturbation(grid, jr.key(0), max_degree=4, amplitude=0.2)
        >>> rho = grid.to_values(c)
        >>> round(float(c[0]), 12), round(float(abs(rho - 1).max()), 12)
        (1.0, 0.2)
        >>> float(mf.spectral_tail(grid, c))   # degrees above 4 are exactly zero
        0.0
    """
    grid = check_grid(grid)
    key = check_key(key)
    top = (3 * grid.max_degree()) // 4
    max_degree = check_int(max_degree, "max_degree", low=1)
    if max_degree > top:
        expected(
            "max_degree",
            f"a degree 1 ≤ ℓ_max ≤ ⌊3L/4⌋ = {top} for this grid (L = {grid.max_degree()}), so "
            "that the start is resolved",
            max_degree,
        )
    amplitude = float(check_real_values(amplitude, "amplitude"))
    if not 0 < amplitude < 1:
        expected("amplitude", "a in (0, 1) (so that ρ₀ = 1 + a f stays positive)", amplitude)
    degrees = grid.degrees()
    dtype = jnp.result_type(float)
    band = (degrees >= 1) & (degrees <= max_degree)
    g = jnp.where(band, jr.normal(key, degrees.shape, dtype), 0.0)
    f = grid.to_values(g)
    g = g / jnp.max(jnp.abs(f))
    return g.at[0].set(1.0) * jnp.where(degrees == 0, 1.0, amplitude)
