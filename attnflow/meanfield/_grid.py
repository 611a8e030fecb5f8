"""The one interface of a spectral discretisation of densities on S^{d-1}.

A density ρ is taken with respect to the uniform probability measure σ of the sphere, so the
uniform density is ρ ≡ 1 and the mass is ∫ρ dσ = 1. A grid stores ρ as a real array of spectral
coefficients (its own layout: Fourier modes on S¹, spherical harmonics on S²) and evaluates it on
its quadrature nodes for products (pseudo-spectral, dealiased). The time stepping
(``_solve.py``) only talks to a grid through the abstract methods below, so S¹ and S² share one
driver, one result type and one resolution check.

Note for grid authors (added by the S¹ work): the base also has four concrete methods with a
generic default that a grid MAY override with a faster exact one, never needs to:
``max_degree()`` (from ``degrees()``), ``evaluate(coefficients, points)`` (ρ at arbitrary
points, by quadrature against the reproducing kernel of the band; exact for d = 2, 3),
``interaction_potential(coefficients, beta)`` (W∗ρ at the nodes by quadrature on the nodes;
override with the Funk–Hecke multiplier) and ``check_kernel(beta)`` (a no-op hook where a grid
checks that it resolves the kernel e^{β⟨x,y⟩}). The particle bridges, the energy and the
resolution check of ``_solve.py`` use only these and the abstract methods.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jaxtyping import Array, Float

from .._check import (
    MAX_ARRAY_ELEMENTS,
    as_array,
    check_beta,
    check_budget,
    check_finite_scalar,
    check_int,
    check_real,
    check_unit_rows,
    expected,
    is_traced,
)


class AbstractDensityGrid(eqx.Module):
    """A spectral grid on S^{d-1}: coefficients ↔ values on quadrature nodes.

    Subclasses are final and give every abstract method (equinox's rule: no concrete method is
    overridden); ``dimension`` is d (2 for the circle, 3 for S²). A new grid can take
    :func:`evaluate_by_quadrature` and :func:`interaction_potential_by_quadrature` for
    ``evaluate`` and ``interaction_potential``.
    """

    dimension: eqx.AbstractVar[int]

    @abc.abstractmethod
    def nodes(self) -> Float[Array, "m d"]:
        """Quadrature nodes as unit vectors of R^d, shape (m, d)."""

    @abc.abstractmethod
    def quadrature_weights(self) -> Float[Array, " m"]:
        """Weights w with Σ_q w_q f(node_q) ≈ ∫ f dσ (they sum to 1), shape (m,)."""

    @abc.abstractmethod
    def to_values(self, coefficients: Array) -> Float[Array, " m"]:
        """ρ at the nodes from its coefficients."""

    @abc.abstractmethod
    def from_values(self, values: Float[Array, " m"]) -> Array:
        """Coefficients of the band-limited projection of values given at the nodes."""

    @abc.abstractmethod
    def degrees(self) -> Array:
        """The frequency k (S¹) or degree ℓ (S²) of each coefficient, same shape as them."""

    @abc.abstractmethod
    def laplacian(self) -> Array:
        """Eigenvalues of the Laplace–Beltrami operator per coefficient (−k², −ℓ(ℓ+1))."""

    @abc.abstractmethod
    def velocity(self, coefficients: Array, beta, normalization: str) -> Float[Array, "m d"]:
        """The attention velocity X[ρ] at the nodes, tangent vectors of shape (m, d).

        USA: X[ρ](x) = P_x ∫ e^{β⟨x,y⟩} y ρ(y) dσ(y); SA divides by Z = ∫ e^{β⟨x,y⟩} ρ dσ.
        Overflow-safe: computed with e^{β(⟨x,y⟩−1)} and the factor e^β applied once (SA: it
        cancels).
        """

    @abc.abstractmethod
    def divergence(self, flux: Float[Array, "m d"]) -> Array:
        """Coefficients of div(F) for a tangent field F given at the nodes (dealiased)."""

    @abc.abstractmethod
    def max_degree(self) -> int:
        """The largest frequency k (S¹) or degree ℓ (S²) of the grid, a Python int."""

    @abc.abstractmethod
    def evaluate(self, coefficients: Array, points: Float[Array, "n d"]) -> Float[Array, " n"]:
        """ρ at arbitrary points of the sphere (rows of ``points``, unit vectors), shape (n,).
        :func:`evaluate_by_quadrature` computes it for any grid."""

    @abc.abstractmethod
    def interaction_potential(self, coefficients: Array, beta) -> Float[Array, " m"]:
        """(W̃∗ρ)(x) = ∫ e^{β⟨x, y⟩ − |β|} ρ(y) dσ(y) at the nodes (W∗ρ = e^{|β|} W̃∗ρ for
        W(x, y) = e^{β⟨x, y⟩}; the scaling keeps it finite for every β), shape (m,).
        :func:`interaction_potential_by_quadrature` computes it for any grid."""

    @abc.abstractmethod
    def check_kernel(self, beta):
        """Check (under jit: ``eqx.error_if``) that the grid resolves the kernel e^{β⟨x,y⟩};
        returns β."""


def check_grid(grid) -> AbstractDensityGrid:
    """``grid`` checked as a grid of this family."""
    if not isinstance(grid, AbstractDensityGrid):
        expected("grid", "an attnflow.meanfield grid (e.g. CircleGrid(modes))", grid)
    return grid


def check_grid_array(x, name: str, shape: tuple, what: str):
    """The one check of an array a grid method takes (coefficients, values at the nodes):
    real (complex refused; lists converted; integers promoted to the default float), of exactly
    ``shape``, finite when concrete. Traced arrays get the static checks only, so a solver's
    right-hand side, which calls the grid's methods at every stage, pays nothing (issue 44
    item 2; docs/conventions.md, "Left to NaN propagation")."""
    x = as_array(x, name)
    check_real(x, name)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    if jnp.shape(x) != tuple(shape):
        expected(name, f"{what} of shape {tuple(shape)}", f"= an array of shape {jnp.shape(x)}")
    if not is_traced(x):
        values = np.asarray(x)
        if not np.all(np.isfinite(values)):
            index = int(np.argmax(~np.isfinite(values.ravel())))
            expected(name, f"finite {what}", f"= {values.ravel()[index]} at index {index}")
    return x


def check_grid_beta(beta, name: str = "beta"):
    """β of a grid's kernel method: a finite real scalar of either sign (concrete; a traced β
    is the solver's, checked at its entry)."""
    if is_traced(beta):
        return beta
    return check_beta(beta, signed=True, name=name)


def check_grid_coefficients(grid, coefficients):
    grid = check_grid(grid)
    shape = jnp.shape(grid.degrees())
    coefficients = check_grid_array(coefficients, "coefficients", shape, "coefficients")
    return grid, coefficients


def evaluate_by_quadrature(grid: AbstractDensityGrid, coefficients, points):
    """ρ at arbitrary points for any grid: ρ(x) = Σ_q w_q ρ(node_q) K_L(⟨x, node_q⟩), K_L the
    reproducing kernel of the functions of degree ≤ L for σ (d = 2: 1 + 2Σ_k cos(kt) =
    Σ_k (2 − δ_k0) T_k(t); d = 3: Σ_ℓ (2ℓ + 1) P_ℓ(t)), exact whenever the quadrature
    integrates products of two band-L functions exactly (the dealiasing rule). Cost O(n m L).

    Args:
        grid: any grid of this family.
        coefficients: the density's coefficients on ``grid``.
        points: (n, d) unit vectors, d = ``grid.dimension``.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(4)                   # coefficients [c_0, cos 1..4, sin 1..4]
        >>> c = jnp.zeros(9).at[0].set(1.0).at[1].set(0.5)    # ρ = 1 + 0.5 cos θ
        >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> [round(float(v), 6) for v in mf.evaluate_by_quadrature(grid, c, x)]
        [1.5, 1.0]
    """
    grid, coefficients = check_grid_coefficients(grid, coefficients)
    points = check_points(grid, points)
    values = grid.to_values(coefficients)
    weighted = grid.quadrature_weights().astype(values.dtype) * values
    cosines = jnp.clip(points @ grid.nodes().astype(points.dtype).T, -1.0, 1.0)
    kernel = _reproducing_kernel(cosines, grid.max_degree(), grid.dimension)
    return kernel @ weighted.astype(kernel.dtype)


def check_points(grid: AbstractDensityGrid, points):
    """``points`` checked as unit vectors of shape (n, d), d = ``grid.dimension``."""
    points = check_unit_rows(points, "points")
    if jnp.ndim(points) != 2 or jnp.shape(points)[1] != grid.dimension:
        expected("points", f"unit vectors of shape (n, {grid.dimension})", points)
    return points


def interaction_potential_by_quadrature(grid: AbstractDensityGrid, coefficients, beta):
    """(W̃∗ρ) at the nodes for any grid, by quadrature on the nodes (an m × m sum): exact up to
    the quadrature's error on the kernel (small while the nodes resolve e^{β⟨x,y⟩}). The grids
    use the Funk–Hecke multipliers of the kernel instead.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf, scipy.special as sp
        >>> grid = mf.CircleGrid(8)
        >>> uniform = jnp.zeros(17).at[0].set(1.0)   # ρ ≡ 1: W̃∗ρ = e^{−β} I_0(β) everywhere
        >>> potential = mf.interaction_potential_by_quadrature(grid, uniform, 2.0)
        >>> bool(jnp.allclose(potential, sp.ive(0, 2.0), atol=1e-6))
        True
    """
    grid, coefficients = check_grid_coefficients(grid, coefficients)
    beta = check_finite_scalar(beta, "beta")
    _check_nodes_resolve_kernel(grid, beta)
    values = grid.to_values(coefficients)
    nodes = grid.nodes().astype(values.dtype)
    kernel = jnp.exp(beta * (nodes @ nodes.T) - jnp.abs(beta))
    return kernel @ (grid.quadrature_weights().astype(values.dtype) * values)


QUADRATURE_KERNEL_TOL = 1e-6
"""The largest relative aliasing error of the kernel e^{β⟨x,y⟩} that the quadrature forms accept."""


def _check_nodes_resolve_kernel(grid, beta):
    """Refuse (concrete β) a β whose kernel the nodes cannot integrate: the quadrature is exact
    to degree q (S¹: m − K for m nodes and K modes; S²: 2·latitudes − N), and the kernel's
    first aliased coefficient relative to its mean is I_{q+ν}(|β|)/I_ν(|β|), ν = (d − 2)/2
    (issue 44 item 5: CircleGrid(8) at β = 1e4 was off by a factor 9 without a word)."""
    if is_traced(beta):
        return
    points, modes = getattr(grid, "points", None), getattr(grid, "modes", None)
    if points is not None and modes is not None:
        q, nu, nodes = points - modes, 0.0, f"points = {points}"
    elif getattr(grid, "latitudes", None) is not None:
        q, nu, nodes = 2 * grid.latitudes - grid.degree, 0.5, f"latitudes = {grid.latitudes}"
    else:
        return
    size = abs(float(beta))
    ratio = float(scipy.special.ive(q + nu, size) / scipy.special.ive(nu, size))
    if ratio > QUADRATURE_KERNEL_TOL:
        expected(
            "beta",
            f"a kernel e^(β⟨x, y⟩) that the grid's nodes integrate ({nodes}: its degree-{q} "
            f"coefficient is {ratio:.2g} of its mean, above {QUADRATURE_KERNEL_TOL:g}); build "
            "the grid with more nodes (about 17·sqrt(|β|) more) or use the grid's own "
            "interaction_potential (Funk–Hecke multipliers)",
            float(beta),
        )


def check_node_count(value, name: str, low: int, why: str) -> int:
    """A grid's number of quadrature nodes ``name``: ``low`` (the alias-free minimum) when None,
    else an integer ≥ ``low``; ``why`` says what ``low`` is, for the error."""
    if value is None:
        value = low
    value = check_int(value, name)
    if value < low:
        expected(name, why, value)
    check_budget(name, value, MAX_ARRAY_ELEMENTS, what="quadrature nodes")
    return value


def _reproducing_kernel(t, max_degree: int, dimension: int):
    """Σ_{ℓ ≤ L} dim_ℓ G_ℓ(t)/G_ℓ(1) for S¹ (Chebyshev) and S² (Legendre), by the three-term
    recurrence."""
    if dimension not in (2, 3):
        raise NotImplementedError(
            f"evaluate: the default reproducing kernel covers d = 2 and d = 3, got d = {dimension}"
        )

    def body(ell, carry):
        previous, current, total = carry
        ell = jnp.asarray(ell, t.dtype)
        if dimension == 2:
            following = 2 * t * current - previous
            weight = 2.0
        else:
            following = ((2 * ell + 1) * t * current - ell * previous) / (ell + 1)
            weight = 2 * ell + 3
        return current, following, total + weight * following

    first = 2.0 * t if dimension == 2 else 3.0 * t
    carry = (jnp.ones_like(t), t, 1.0 + first)
    if max_degree == 0:
        return jnp.ones_like(t)
    _, _, total = jax.lax.fori_loop(1, max_degree, body, carry)
    return total
