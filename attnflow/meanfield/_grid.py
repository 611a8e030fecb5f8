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
from jaxtyping import Array, Float

from .._check import check_int, expected


class AbstractDensityGrid(eqx.Module):
    """A spectral grid on S^{d-1}: coefficients ↔ values on quadrature nodes.

    Subclasses are final and give every abstract method; ``dimension`` is d (2 for the circle,
    3 for S²).
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

    def max_degree(self) -> int:
        """The largest frequency k (S¹) or degree ℓ (S²) of the grid, a Python int."""
        with jax.ensure_compile_time_eval():
            return int(np.max(np.asarray(self.degrees())))

    def evaluate(self, coefficients: Array, points: Float[Array, "n d"]) -> Float[Array, " n"]:
        """ρ at arbitrary points of the sphere (rows of ``points``, unit vectors), shape (n,).

        Default: ρ(x) = Σ_q w_q ρ(node_q) K_L(⟨x, node_q⟩), K_L the reproducing kernel of the
        functions of degree ≤ L for σ (d = 2: 1 + 2Σ_k cos(kt) = Σ_k (2 − δ_k0) T_k(t);
        d = 3: Σ_ℓ (2ℓ + 1) P_ℓ(t)), exact whenever the quadrature integrates products of two
        band-L functions exactly (the dealiasing rule). Cost O(n m L).
        """
        values = self.to_values(coefficients)
        weighted = self.quadrature_weights().astype(values.dtype) * values
        cosines = jnp.clip(points @ self.nodes().astype(points.dtype).T, -1.0, 1.0)
        kernel = _reproducing_kernel(cosines, self.max_degree(), self.dimension)
        return kernel @ weighted.astype(kernel.dtype)

    def interaction_potential(self, coefficients: Array, beta) -> Float[Array, " m"]:
        """(W̃∗ρ)(x) = ∫ e^{β⟨x, y⟩ − |β|} ρ(y) dσ(y) at the nodes (W∗ρ = e^{|β|} W̃∗ρ for
        W(x, y) = e^{β⟨x, y⟩}; the scaling keeps it finite for every β), shape (m,).

        Default: quadrature on the nodes (an m × m sum), exact up to the quadrature's error on
        the kernel (small while the nodes resolve e^{β⟨x,y⟩}); grids override it with the
        Funk–Hecke multipliers of the kernel.
        """
        values = self.to_values(coefficients)
        nodes = self.nodes().astype(values.dtype)
        kernel = jnp.exp(beta * (nodes @ nodes.T) - jnp.abs(beta))
        return kernel @ (self.quadrature_weights().astype(values.dtype) * values)

    def check_kernel(self, beta):
        """Check (under jit: ``eqx.error_if``) that the grid resolves the kernel e^{β⟨x,y⟩};
        returns β. Default: no check."""
        return beta


def check_node_count(value, name: str, low: int, why: str) -> int:
    """A grid's number of quadrature nodes ``name``: ``low`` (the alias-free minimum) when None,
    else an integer ≥ ``low``; ``why`` says what ``low`` is, for the error."""
    if value is None:
        value = low
    value = check_int(value, name)
    if value < low:
        expected(name, why, value)
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
