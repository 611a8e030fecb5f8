"""The Hessian kernel of E_β (GLPR App. B; docs/maths.md §7): g of Fig. 6 (d = 2) and (B.3), its
root τ*_β, and the threshold β_n of Theorem 5.1's proof beyond which every critical point on the
circle other than synchrony is a strict saddle.
"""

import math

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._check import (
    check_beta,
    check_real_values,
    check_size,
    model_parameters_keyword_only,
    real_arguments,
)


@model_parameters_keyword_only("tau", "beta", "d")
@real_arguments(tau=None)
def hessian_kernel(tau: Float[ArrayLike, "*shape"], *, beta, d: int = 2) -> Float[Array, "*shape"]:
    """g(τ) = e^{β cos τ} ((d − 1) cos τ − β sin² τ): App. B (d = 2, Fig. 6) and (B.3).

    For d = 2 the torus Hessian of (7.4) is built from it
    (:func:`attnflow.landscape.torus_hessian`); it is negative
    for τ*_β < |τ| ≤ π (:func:`attnflow.theory.tau_star`), for either sign of β (τ*_β > π/2
    when β < 0).

    Example:
        >>> import attnflow as af
        >>> round(float(af.theory.hessian_kernel(0.0, beta=2.0)), 6)  # e^β
        7.389056
    """
    beta = check_beta(beta, signed=True)
    _check_dimension(d)
    tau = jnp.asarray(tau)
    if not jnp.issubdtype(tau.dtype, jnp.floating):
        tau = tau.astype(float)
    return jnp.exp(beta * jnp.cos(tau)) * ((d - 1) * jnp.cos(tau) - beta * jnp.sin(tau) ** 2)


def _check_dimension(d):
    return check_size(d, "d", low=2)


def tau_star(beta: Float[ArrayLike, "*shape"], d: int = 2) -> Float[Array, "*shape"]:
    """τ*_β: the root in [0, π] of β sin² τ = (d − 1) cos τ (App. B, Fig. 6; (B.3) for d > 2),
    in [0, π/2] for β ≥ 0.

    Closed form (docs/maths.md §7, derived): cos τ* = (−(d−1) + √((d−1)² + 4β²)) / (2β), evaluated
    in the cancellation-free form 2β / ((d−1) + √((d−1)² + 4β²)), and τ* = atan2(sin τ*, cos τ*)
    with sin² τ* = (d−1) cos τ*/β, accurate for every finite β (τ*_0 = π/2, τ* ≈ √((d−1)/β) as
    β → ∞). For β < 0 the same formula gives the root in (π/2, π) (cos τ* < 0; τ* → π as
    β → −∞). The kernel g of :func:`hessian_kernel` is positive on |τ| < τ* and negative on
    τ* < |τ| ≤ π, for either sign of β.

    Example:
        >>> import attnflow as af
        >>> round(float(af.theory.tau_star(6.0)), 6)
        0.402377
    """
    d = _check_dimension(d)
    beta = check_real_values(beta, "beta")
    if not jnp.issubdtype(beta.dtype, jnp.floating):
        beta = beta.astype(float)
    a = d - 1
    cos = 2 * beta / (a + jnp.sqrt(a**2 + 4 * beta**2))
    # sin² = a cos / β = 2a / (a + √(a² + 4β²)): finite at β = 0
    sin = jnp.sqrt(2 * a / (a + jnp.sqrt(a**2 + 4 * beta**2)))
    return jnp.arctan2(sin, cos)


def strict_saddle_threshold(n: int) -> float:
    """β_n = cos a / sin² a, a = π/(2(n − 1)): the β beyond which Theorem 5.1's proof works (d = 2).

    The proof needs (n − 1) τ*_β < π/2, i.e. β > β_n ≈ 4(n − 1)²/π²; then on the circle every
    critical point of E_β other than synchrony is a strict saddle. docs/maths.md §7 / §11.5: the
    paper's §7 and Fig. 2 quote n²/π², which matches the weaker condition (n − 1)τ* < π instead;
    this function returns the proof's constant.

    Example:
        >>> import attnflow as af
        >>> [round(af.theory.strict_saddle_threshold(n), 2) for n in (4, 8, 32)]
        [3.46, 19.69, 389.31]
    """
    n = check_size(n, "n", low=2)
    a = math.pi / (2 * (int(n) - 1))
    return math.cos(a) / math.sin(a) ** 2


__all__ = ["hessian_kernel", "tau_star", "strict_saddle_threshold"]
