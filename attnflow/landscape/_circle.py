"""The circle d = 2 in angle coordinates x_i = (cos θ_i, sin θ_i) (GLPR §7, App. B;
docs/maths.md §6–7).

Energy (7.4), the (USA)/(SA) fields (7.1) on angles, the Hessian on the torus T^n (App. B), the
kernel g of Fig. 6 and (B.3), the root τ*_β, and the threshold β_n of Theorem 5.1's proof.
Exponentials are evaluated as e^β · e^{β(cos − 1)} so that the sums never overflow before the
final factor.
"""

import math
from typing import Literal

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._check import (
    as_array,
    check_beta,
    check_real_values,
    check_sa_normalization,
    check_size,
    check_tokens,
    real_arguments,
)


def _check_angles(theta):
    if jnp.ndim(theta) != 1:
        raise ValueError(
            f"theta: expected a vector of n angles, shape (n,), got shape {jnp.shape(theta)}"
        )
    theta = jnp.asarray(check_real_values(theta, "theta"))
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        theta = theta.astype(float)
    return theta


def circle_tokens(theta: Float[ArrayLike, " n"]) -> Float[Array, "n 2"]:
    """Tokens on S¹ from angles: x_i = (cos θ_i, sin θ_i).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.landscape.circle_tokens(jnp.array([0.0, jnp.pi / 2])).round(6).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    theta = _check_angles(theta)
    return jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=-1)


def circle_angles(x: Float[Array, "n 2"]) -> Float[Array, " n"]:
    """Angles θ_i = atan2(x_i2, x_i1) ∈ (−π, π] of tokens on S¹ (inverse of circle_tokens).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> float(af.landscape.circle_angles(jnp.array([[0.0, 1.0]]))[0]) == float(jnp.pi / 2)
        True
    """
    x = as_array(x, "x")
    if jnp.ndim(x) != 2 or jnp.shape(x)[1] != 2:
        raise ValueError(f"x: expected tokens on the circle, shape (n, 2), got {jnp.shape(x)}")
    x = check_tokens(x, "x")
    return jnp.arctan2(x[:, 1], x[:, 0])


def _differences(theta):
    return theta[:, None] - theta[None, :]


def circle_energy(theta: Float[ArrayLike, " n"], beta) -> Float[Array, ""]:
    """The energy (7.4) on the torus: E_β(θ) = 1/(2βn²) Σ_{i,j} exp(β cos(θ_i − θ_j)).

    It is :class:`attnflow.InteractionEnergy` (weights 1/n) of ``circle_tokens(theta)``, and
    (USA) is θ̇ = n ∇E_β (7.1).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> round(float(af.landscape.circle_energy(jnp.zeros(3), 1.0)), 6)  # synchrony: e^β/(2β)
        1.359141
    """
    theta = _check_angles(theta)
    beta = check_beta(beta, positive=True)
    n = theta.shape[0]
    relative = jnp.exp(beta * (jnp.cos(_differences(theta)) - 1))
    return jnp.exp(beta) * jnp.sum(relative) / (2 * beta * n**2)


def circle_field(
    theta: Float[ArrayLike, " n"], beta, normalization: Literal["softmax", "n"] = "softmax"
) -> Float[Array, " n"]:
    """The attention dynamics on angles, paper (7.1) and its (SA) analogue (docs/maths.md §6):

        (USA, ``"n"``)        θ̇_i = −(1/n) Σ_j e^{β cos(θ_i − θ_j)} sin(θ_i − θ_j),
        (SA, ``"softmax"``)   θ̇_i = −(1/Z_i) Σ_j e^{β cos(θ_i − θ_j)} sin(θ_i − θ_j),
                              Z_i = Σ_k e^{β cos(θ_i − θ_k)}.

    These are ⟨ẋ_i, (−sin θ_i, cos θ_i)⟩ for :class:`attnflow.SelfAttention` with Q = K = V = I.
    Wrap as ``lambda t, th, args: circle_field(th, beta)`` to integrate with diffrax.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> th = jnp.array([0.0, 0.5])
        >>> v = af.landscape.circle_field(th, 1.0, normalization="n")
        >>> round(float(v[0] + v[1]), 12)  # pairwise forces cancel
        0.0
    """
    theta = _check_angles(theta)
    beta = check_beta(beta)
    check_sa_normalization(normalization)
    diff = _differences(theta)
    relative = jnp.exp(beta * (jnp.cos(diff) - 1))
    pull = -jnp.sum(relative * jnp.sin(diff), axis=1)
    if normalization == "softmax":
        return pull / jnp.sum(relative, axis=1)
    return pull * jnp.exp(beta) / theta.shape[0]


@real_arguments(tau=None)
def hessian_kernel(tau: Float[ArrayLike, "*shape"], beta, d: int = 2) -> Float[Array, "*shape"]:
    """g(τ) = e^{β cos τ} ((d − 1) cos τ − β sin² τ): App. B (d = 2, Fig. 6) and (B.3).

    For d = 2 the torus Hessian of (7.4) is built from it
    (:func:`attnflow.landscape.torus_hessian`); it is negative
    for τ*_β < |τ| ≤ π (:func:`attnflow.theory.tau_star`).

    Example:
        >>> import attnflow as af
        >>> round(float(af.theory.hessian_kernel(0.0, 2.0)), 6)  # e^β
        7.389056
    """
    beta = check_beta(beta)
    _check_dimension(d)
    tau = jnp.asarray(tau)
    if not jnp.issubdtype(tau.dtype, jnp.floating):
        tau = tau.astype(float)
    return jnp.exp(beta * jnp.cos(tau)) * ((d - 1) * jnp.cos(tau) - beta * jnp.sin(tau) ** 2)


def torus_hessian(theta: Float[ArrayLike, " n"], beta) -> Float[Array, "n n"]:
    """The Euclidean Hessian on T^n of the energy (7.4), App. B:

        ∂²E/∂θ_i∂θ_j = g(θ_i − θ_j)/n²  (i ≠ j),   ∂²E/∂θ_i² = −(1/n²) Σ_{m≠i} g(θ_i − θ_m),

    with g = :func:`attnflow.theory.hessian_kernel` (d = 2). The torus is flat, so this is also
    the Riemannian Hessian; it equals :func:`attnflow.riemannian_hessian` of InteractionEnergy(β) at
    ``circle_tokens(theta)`` (whose d = 2 tangent basis is ∂x/∂θ).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> h = af.landscape.torus_hessian(jnp.zeros(3), 1.0)
        >>> bool(jnp.allclose(h @ jnp.ones(3), 0.0))  # the rotation mode
        True
    """
    theta = _check_angles(theta)
    beta = check_beta(beta, positive=True)
    n = theta.shape[0]
    diff = _differences(theta)
    # g scaled by e^{-β} first; the diagonal g(0) cancels between the two terms
    kernel = jnp.exp(beta * (jnp.cos(diff) - 1)) * (jnp.cos(diff) - beta * jnp.sin(diff) ** 2)
    return jnp.exp(beta) * (kernel - jnp.diag(jnp.sum(kernel, axis=1))) / n**2


def _check_dimension(d):
    return check_size(d, "d", low=2)


def tau_star(beta: Float[ArrayLike, "*shape"], d: int = 2) -> Float[Array, "*shape"]:
    """τ*_β: the root in [0, π/2] of β sin² τ = (d − 1) cos τ (App. B, Fig. 6; (B.3) for d > 2).

    Closed form (docs/maths.md §7, derived): cos τ* = (−(d−1) + √((d−1)² + 4β²)) / (2β), evaluated
    in the cancellation-free form 2β / ((d−1) + √((d−1)² + 4β²)), and τ* = atan2(sin τ*, cos τ*)
    with sin² τ* = (d−1) cos τ*/β, accurate for all β ≥ 0 (τ*_0 = π/2, τ* ≈ √((d−1)/β) as β → ∞).
    The kernel g of :func:`hessian_kernel` is positive on |τ| < τ* and negative on τ* < |τ| ≤ π.

    Example:
        >>> import attnflow as af
        >>> round(float(af.theory.tau_star(6.0)), 6)
        0.402377
    """
    d = _check_dimension(d)
    beta = check_real_values(beta, "beta", low=0)
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


__all__ = [
    "circle_tokens",
    "circle_angles",
    "circle_energy",
    "circle_field",
    "hessian_kernel",
    "torus_hessian",
    "tau_star",
    "strict_saddle_threshold",
]
