"""The circle d = 2 in angle coordinates x_i = (cos θ_i, sin θ_i) (GLPR §7, App. B;
docs/maths.md §6–7).

Energy (7.4), the (USA)/(SA) fields (7.1) on angles and the Hessian on the torus T^n (App. B);
the closed forms of App. B (the kernel g of Fig. 6 and (B.3), the root τ*_β, the threshold β_n of
Theorem 5.1's proof) are in ``attnflow.theory``. Exponentials are evaluated as
e^{|β|} · e^{β cos − |β|} (≤ 1: the largest of β cos τ is |β|, at τ = 0 for β > 0 and at τ = π
for β < 0) so that the sums never overflow before the final factor. β < 0 is accepted wherever
the formula is defined (docs/conventions.md, "Negative β").
"""

from typing import Literal

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._check import (
    as_array,
    check_beta,
    check_real_values,
    check_sa_normalization,
    check_tokens,
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


def _relative_weights(beta, diff, axis=None):
    """(e^{β cos(θ_i − θ_j) − s}, s) with s the largest exponent (over ``axis``; all when None):
    weights scaled into (0, 1] and the log of the scale, for either sign of β."""
    exponent = beta * jnp.cos(diff)
    shift = jax.lax.stop_gradient(jnp.max(exponent, axis=axis, keepdims=axis is not None))
    return jnp.exp(exponent - shift), shift


def circle_energy(theta: Float[ArrayLike, " n"], beta) -> Float[Array, ""]:
    """The energy (7.4) on the torus: E_β(θ) = 1/(2βn²) Σ_{i,j} exp(β cos(θ_i − θ_j)).

    It is :class:`attnflow.InteractionEnergy` (weights 1/n) of ``circle_tokens(theta)``, and
    (USA) is θ̇ = n ∇E_β (7.1), for either sign of β ≠ 0 (negative energy for β < 0).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> round(float(af.landscape.circle_energy(jnp.zeros(3), 1.0)), 6)  # synchrony: e^β/(2β)
        1.359141
    """
    theta = _check_angles(theta)
    beta = check_beta(beta, positive=True, signed=True)
    n = theta.shape[0]
    # Log-sum-exp form, scaled by the largest exponent: finite wherever E is (issue 44 item 4:
    # the equilateral triangle at β = −800 is −6e^{400}/(2·800·9), not −inf).
    relative, shift = _relative_weights(beta, _differences(theta))
    log_size = jnp.log(jnp.sum(relative)) + shift - jnp.log(2 * jnp.abs(beta) * n**2)
    return jnp.sign(beta) * jnp.exp(log_size)


def circle_field(
    theta: Float[ArrayLike, " n"], beta, normalization: Literal["softmax", "n"] = "softmax"
) -> Float[Array, " n"]:
    """The attention dynamics on angles, paper (7.1) and its (SA) analogue (docs/maths.md §6):

        (USA, ``"n"``)        θ̇_i = −(1/n) Σ_j e^{β cos(θ_i − θ_j)} sin(θ_i − θ_j),
        (SA, ``"softmax"``)   θ̇_i = −(1/Z_i) Σ_j e^{β cos(θ_i − θ_j)} sin(θ_i − θ_j),
                              Z_i = Σ_k e^{β cos(θ_i − θ_k)}.

    These are ⟨ẋ_i, (−sin θ_i, cos θ_i)⟩ for :class:`attnflow.SelfAttention` with Q = K = V = I.
    Wrap as ``lambda t, th, args: circle_field(th, beta)`` to integrate with diffrax. Any finite β:
    for β < 0 the weights favour distant tokens; Polyanskiy–Rigollet–Yao (arXiv:2507.22857) prove
    synchronisation for β ≥ −0.16 and its failure for β < −2/3 (n = 3: the equilateral triangle
    is then a stable equilibrium, tests/test_negative_beta.py).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> th = jnp.array([0.0, 0.5])
        >>> v = af.landscape.circle_field(th, 1.0, normalization="n")
        >>> round(float(v[0] + v[1]), 12)  # pairwise forces cancel
        0.0
    """
    theta = _check_angles(theta)
    beta = check_beta(beta, signed=True)
    check_sa_normalization(normalization)
    diff = _differences(theta)
    if normalization == "softmax":
        relative, _ = _relative_weights(beta, diff, axis=1)  # row by row: Z_i >= 1 after scaling
        return -jnp.sum(relative * jnp.sin(diff), axis=1) / jnp.sum(relative, axis=1)
    # USA: each row scaled by its largest exponent off the diagonal (the diagonal's e^β has
    # sin 0 = 0 and must not set the scale: at β = 800 it would overflow a finite velocity).
    # Tokens that coincide keep their term: its derivative e^β cos 0 is what an implicit solve's
    # Jacobian needs (the staircase's Newton steps), so no term is masked by the value of sin.
    off = ~jnp.eye(theta.shape[0], dtype=bool)
    exponent = jnp.where(off, beta * jnp.cos(diff), -jnp.inf)
    shift = jax.lax.stop_gradient(jnp.max(exponent, axis=1))
    relative = jnp.where(off, jnp.exp(exponent - shift[:, None]), 0.0)
    return -jnp.exp(shift) * jnp.sum(relative * jnp.sin(diff), axis=1) / theta.shape[0]


def torus_hessian(theta: Float[ArrayLike, " n"], beta) -> Float[Array, "n n"]:
    """The Euclidean Hessian on T^n of the energy (7.4), App. B:

        ∂²E/∂θ_i∂θ_j = g(θ_i − θ_j)/n²  (i ≠ j),   ∂²E/∂θ_i² = −(1/n²) Σ_{m≠i} g(θ_i − θ_m),

    with g = :func:`attnflow.theory.hessian_kernel` (d = 2). The torus is flat, so this is also
    the Riemannian Hessian; it equals :func:`attnflow.riemannian_hessian` of InteractionEnergy(β) at
    ``circle_tokens(theta)`` (whose d = 2 tangent basis is ∂x/∂θ). Any β ≠ 0: at n = 3
    equally spaced angles it is negative semi-definite (a stable state of the ascent) exactly
    when g(2π/3) < 0, i.e. β < −2/3 (arXiv:2507.22857).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> h = af.landscape.torus_hessian(jnp.zeros(3), 1.0)
        >>> bool(jnp.allclose(h @ jnp.ones(3), 0.0))  # the rotation mode
        True
    """
    theta = _check_angles(theta)
    beta = check_beta(beta, positive=True, signed=True)
    n = theta.shape[0]
    diff = _differences(theta)
    # g scaled by e^{-s}, s the largest exponent off the diagonal (the diagonal g(0) cancels
    # between the two terms: left out, so that e^β there cannot overflow a finite Hessian).
    off = ~jnp.eye(n, dtype=bool)
    exponent = jnp.where(off, beta * jnp.cos(diff), -jnp.inf)
    shift = jax.lax.stop_gradient(jnp.max(exponent))
    kernel = jnp.exp(exponent - shift) * (jnp.cos(diff) - beta * jnp.sin(diff) ** 2)
    return jnp.exp(shift) * (kernel - jnp.diag(jnp.sum(kernel, axis=1))) / n**2


__all__ = [
    "circle_tokens",
    "circle_angles",
    "circle_energy",
    "circle_field",
    "torus_hessian",
]
