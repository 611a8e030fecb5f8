"""The number of bumps of a density on S¹ or S²: its local maxima that stand out.

A *bump* is a local maximum of ρ at the evaluation nodes whose height above the minimum is at
least ``height`` times the density's range, ρ(x*) − min ρ ≥ ``height``·(max ρ − min ρ); a density
whose range is at most ``flat`` (relative to its mean ∫ρ dσ) counts as uniform, 0 bumps. On S¹
the density is evaluated at ``points`` equispaced angles (its Fourier series, exactly) and a
node is a maximum when it beats its two neighbours (≥ on one side, > on the other, so that a flat
top counts once); on S² at the grid's Gauss–Legendre × equispaced nodes, against the eight
neighbours in latitude and longitude (longitude periodic), the nodes of the two polar rings being
neighbours of every node of their ring.
"""

import numpy as np
from jaxtyping import Array, ArrayLike

from .._check import as_array, check_int, check_range, expected
from ._circle import CircleGrid
from ._grid import AbstractDensityGrid
from ._sphere import SphereGrid


def _node_values(grid, density):
    """ρ at the grid's nodes, from coefficients or from the values themselves."""
    density = as_array(density, "density")
    shape, nodes = tuple(np.shape(grid.degrees())), grid.nodes().shape[0]
    if density.shape == shape:
        return density, np.asarray(grid.to_values(density))
    if density.shape == (nodes,):
        return None, np.asarray(density)
    raise ValueError(
        f"density: expected the grid's coefficients, shape {shape}, or its values at the "
        f"{nodes} nodes, shape ({nodes},); got shape {density.shape}"
    )


def _circle_values(grid, coefficients, points):
    """The Fourier series (a_0, a_1…a_K, b_1…b_K) at ``points`` equispaced angles, in NumPy."""
    c = np.asarray(coefficients, np.float64)
    K = grid.modes
    theta = 2 * np.pi * np.arange(points) / points
    k = np.arange(1, K + 1)
    return (
        c[0] + np.cos(np.outer(theta, k)) @ c[1 : K + 1] + np.sin(np.outer(theta, k)) @ c[K + 1 :]
    )


def _circle_maxima(v):
    return (v > np.roll(v, 1)) & (v >= np.roll(v, -1))


def _sphere_maxima(v, latitudes, longitudes):
    v = v.reshape(latitudes, longitudes)
    # Pad the latitudes with −inf: the polar rings get their ring-wide comparison below.
    padded = np.pad(v, ((1, 1), (0, 0)), constant_values=-np.inf)
    peak = np.ones_like(v, dtype=bool)
    polar = np.zeros_like(peak)
    polar[[0, -1]] = True
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            if di == dj == 0:
                continue
            other = np.roll(padded, (-di, -dj), axis=(0, 1))[1:-1]
            # ≥ against the neighbours before, > against those after: a plateau counts once
            beats = v > other if (di, dj) > (0, 0) else v >= other
            # along a polar ring the ring-wide rule below replaces the neighbours' comparison
            peak &= beats | (polar if di == 0 else False)
    for ring in (0, latitudes - 1):
        first = np.zeros(longitudes, dtype=bool)
        first[np.argmax(v[ring])] = True  # a cap over the pole is one bump: the ring's maximum
        peak[ring] &= first
    return peak.reshape(-1)


def count_bumps(
    grid: AbstractDensityGrid,
    density: ArrayLike | Array,
    *,
    height: float = 0.1,
    flat: float = 1e-2,
    points: int | None = None,
) -> int:
    r"""The number of bumps of a density on S¹ (:class:`CircleGrid`) or S² (:class:`SphereGrid`).

    A bump is a local maximum x* of ρ with ρ(x*) − min ρ ≥ ``height``·(max ρ − min ρ); a density
    with (max ρ − min ρ) ≤ ``flat``·∫ρ dσ is uniform to this tolerance and has 0 bumps. The
    local maxima are taken over the nodes of the module docstring (S¹, from coefficients:
    ``points`` equispaced angles, default 8·(2K + 1); from values, and on S²: the grid's
    nodes). The ``height`` tolerance discards the ripples of a resolved spectral density between
    clusters; ``flat`` the residue of a decaying perturbation of the uniform state.

    Args:
        grid: the density's grid.
        density: its coefficients (the grid's layout) or its values at ``grid.nodes()``.
        height: the relative height in (0, 1] that makes a maximum a bump.
        flat: the relative range ≥ 0 below which the density is uniform (0 bumps).
        points: S¹ only: the number of equispaced evaluation angles (≥ the grid's nodes).

    Returns:
        The number of bumps, a Python int.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(16)
        >>> theta = grid.angles()
        >>> two = grid.from_values(jnp.exp(3 * jnp.cos(2 * theta)))   # two antipodal bumps
        >>> mf.count_bumps(grid, two), mf.count_bumps(grid, grid.from_values(1 + 0 * theta))
        (2, 0)
    """
    if not isinstance(grid, CircleGrid | SphereGrid):
        expected("grid", "an attnflow.meanfield.CircleGrid or SphereGrid", grid)
    height = float(check_range(height, "height", 0.0, 1.0, what="a relative height"))
    if not height > 0:
        raise ValueError(f"height: expected a relative height in (0, 1], got {height:g}")
    flat = float(check_range(flat, "flat", 0.0, np.inf, what="a relative range"))
    if isinstance(grid, CircleGrid):
        low = grid.points
        points = check_int(8 * grid.size if points is None else points, "points", low=low)
    elif points is not None:
        raise ValueError("points: only for a CircleGrid (on S² the grid's nodes are used)")
    coefficients, at_nodes = _node_values(grid, density)
    if not np.all(np.isfinite(at_nodes)):
        raise ValueError("density: expected finite values, got NaN or inf")
    mean = float(np.sum(np.asarray(grid.quadrature_weights()) * at_nodes))
    v = at_nodes
    if isinstance(grid, CircleGrid) and coefficients is not None:
        v = _circle_values(grid, coefficients, points)
    spread = float(v.max() - v.min())
    if not spread > flat * abs(mean):
        return 0
    if isinstance(grid, CircleGrid):
        peak = _circle_maxima(v)
    else:
        peak = _sphere_maxima(v, grid.latitudes, grid.longitudes)
    return int(np.sum(peak & (v - v.min() >= height * spread)))
