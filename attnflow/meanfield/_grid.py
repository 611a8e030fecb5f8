"""The one interface of a spectral discretisation of densities on S^{d-1}.

A density ρ is taken with respect to the uniform probability measure σ of the sphere, so the
uniform density is ρ ≡ 1 and the mass is ∫ρ dσ = 1. A grid stores ρ as a real array of spectral
coefficients (its own layout: Fourier modes on S¹, spherical harmonics on S²) and evaluates it on
its quadrature nodes for products (pseudo-spectral, dealiased). The time stepping
(``_solve.py``) only talks to a grid through the abstract methods below, so S¹ and S² share one
driver, one result type and one resolution check.
"""

import abc

import equinox as eqx
from jaxtyping import Array, Float


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
