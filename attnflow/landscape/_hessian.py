"""Riemannian Hessians of energies on the token manifold (S^{d-1})^n.

Conventions of the landscape API (docs/conventions.md#landscape):

- The metric is the product round metric ⟨a, b⟩ = Σ_i ⟨a_i, b_i⟩: unit weight per token, not the
  Wasserstein factors w_i. Kinds of critical points do not depend on this choice (Remark B.1:
  at a critical point the Hessian in a metric Σ_i g_i⟨a_i, b_i⟩ is G⁻¹·Hess, with the same
  inertia by Sylvester's law).
- ``weights`` are handed to the energy unchanged; ``None`` is the energy's own default (1/n for
  :class:`attnflow.InteractionEnergy`, the normalisation of paper (7.4)). Uniform weights c only
  multiply the energy, hence the spectrum, by c².

The Riemannian Hessian of E at x, applied to a tangent v (pymanopt's ``Oblique`` formula), is

    Hess E(x)[v]_i = P_{x_i}(∇²E(x)[v])_i − ⟨x_i, ∇_i E(x)⟩ v_i,

the projected Euclidean Hessian plus the Weingarten term of each sphere factor.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from .._check import (
    check_bool,
    check_callable,
    check_int,
    check_key,
    check_tokens,
    check_tolerance,
    check_weights,
)
from .._energy import AbstractEnergy
from .._sphere import _tangent_basis, tangent, tangent_basis, weingarten_term

_CHUNK_ELEMENTS = 2**23


def _check_energy(energy):
    check_callable(
        energy, "energy", "a callable energy(x, weights)", "e.g. attnflow.InteractionEnergy(1.0)"
    )


def riemannian_hessian(
    energy: AbstractEnergy, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
) -> Float[Array, "m m"]:
    """The Riemannian Hessian of ``energy`` at x on (S^{d-1})^n (product round metric).

    Returns the symmetric (n(d−1), n(d−1)) matrix H with H[(i,k),(j,l)] = ⟨b_ik, Hess E[b_jl]⟩
    for the orthonormal basis b = :func:`tangent_basis` (index (i, k) ↦ i·(d−1) + k):

        H = Bᵀ ∇²E B − diag(⟨x_i, ∇_i E⟩ ⊗ I_{d−1}),

    the Euclidean Hessian of the extension (from ``jax.hessian`` in tangent coordinates) plus the
    Weingarten term of each sphere block (docs/maths.md §7: ``jax.hessian`` alone is not the
    Riemannian Hessian). Works for any differentiable ``energy(x, weights)``, not only the
    interaction energy. Costs n(d−1) Hessian-vector products; see
    :func:`attnflow.landscape.hessian_vector_product` and
    :func:`attnflow.landscape.hessian_extreme_eigenvalues` for large n.

    Args:
        energy: a differentiable energy ``energy(x, weights) -> scalar``.
        x: (n, d) tokens on the unit sphere.
        weights: handed to the energy (None: its default, 1/n for InteractionEnergy).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.tile(jnp.array([[1.0, 0.0, 0.0]]), (4, 1))  # synchronised
        >>> h = af.riemannian_hessian(af.InteractionEnergy(1.0), x)
        >>> h.shape
        (8, 8)
        >>> [round(abs(v), 6) for v in jnp.linalg.eigvalsh(h)[-3:].tolist()]  # -e/4, the orbit
        [0.67957, 0.0, 0.0]
    """
    _check_energy(energy)
    x = check_tokens(x, "x")
    weights = check_weights(weights, x.shape[0])
    return _riemannian_hessian(energy, x, weights)


@eqx.filter_jit
def _riemannian_hessian(energy, x, weights):
    n, d = x.shape
    basis = _tangent_basis(x)

    def restricted(c):
        return energy(x + jnp.einsum("nk,nkd->nd", c, basis), weights)

    m = n * (d - 1)
    # Linearise the gradient once (the exponentials are computed once, not once per column),
    # then push the m basis vectors through in chunks: jax.hessian would vmap all m HVPs at
    # once, holding m copies of the (n, n) pairwise intermediates (16 GB at n(d−1) = 2000).
    _, hvp = jax.linearize(jax.grad(restricted), jnp.zeros((n, d - 1), x.dtype))

    def column(e):
        return hvp(e.reshape(n, d - 1)).ravel()

    chunk = max(1, min(m, _CHUNK_ELEMENTS // (n * n)))
    euclidean = jax.lax.map(column, jnp.eye(m, dtype=x.dtype), batch_size=chunk)
    weingarten = weingarten_term(x, jax.grad(energy)(x, weights))
    hessian = euclidean - jnp.diag(jnp.repeat(weingarten, d - 1))
    return (hessian + hessian.T) / 2


def hessian_vector_product(
    energy: AbstractEnergy,
    x: Float[Array, "n d"],
    v: Float[Array, "n d"],
    weights: Float[Array, " n"] | None = None,
) -> Float[Array, "n d"]:
    """Hess E(x)[v] without forming the matrix: P_x(∇²E v) − ⟨x_i, ∇_i E⟩ v_i, row by row.

    ``v`` is first projected onto the tangent space, so on all of R^{n×d} this is the symmetric
    operator P Hess P. One forward-over-reverse pass: the cost of about two gradients.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> e = af.InteractionEnergy(2.0)
        >>> x = af.random_tokens(jr.key(0), 6, 3)
        >>> b = af.tangent_basis(x)
        >>> v = b[:, 0, :]
        >>> hv = af.landscape.hessian_vector_product(e, x, v)
        >>> h = af.riemannian_hessian(e, x)
        >>> coords = jnp.einsum("nkd,nd->nk", b, hv).ravel()
        >>> bool(jnp.allclose(coords, h @ jnp.einsum("nkd,nd->nk", b, v).ravel()))
        True
    """
    _check_energy(energy)
    x = check_tokens(x, "x")
    weights = check_weights(weights, x.shape[0])
    if jnp.shape(v) != x.shape:
        raise ValueError(
            f"v: expected a tangent vector of the shape of x {x.shape}, got {jnp.shape(v)}"
        )
    return _hessian_vector_product(energy, x, v, weights)


@eqx.filter_jit
def _hessian_vector_product(energy, x, v, weights):
    v = tangent(x, v)
    grad, hv = jax.jvp(lambda y: jax.grad(energy)(y, weights), (x,), (v,))
    return tangent(x, hv) - jnp.sum(x * grad, axis=-1, keepdims=True) * v


def _orbit_generators(x):
    """(B x_i)_i for the basis B_kl = e_k e_lᵀ − e_l e_kᵀ (k < l) of so(d): (d(d−1)/2, n, d)."""
    d = x.shape[1]
    first, second = jnp.triu_indices(d, 1)
    eye = jnp.eye(d, dtype=x.dtype)
    # (B_kl x)_i = e_k x_il − e_l x_ik
    return (
        eye[first][:, None, :] * x[:, second].T[:, :, None]
        - eye[second][:, None, :] * x[:, first].T[:, :, None]
    )


@eqx.filter_jit
def _orbit_frame(x, rtol):
    """An orthonormal frame (p, n, d) of the orbit tangent space and a mask of its live columns.

    The orbit of x under O(d) has tangent space {(B x_i)_i : B skew}; its dimension is
    d(d−1)/2 minus that of the stabiliser (d − 1 when all tokens coincide). Directions whose
    singular value is below ``rtol`` times the largest are dropped.
    """
    generators = _orbit_generators(x)
    p = generators.shape[0]
    u, s, _ = jnp.linalg.svd(generators.reshape(p, -1).T, full_matrices=False)
    mask = s > rtol * s[0]
    return u.T.reshape(p, *x.shape), mask


def rotation_orbit_basis(x: Float[Array, "n d"], rtol: float = 1e-6) -> Float[Array, "m r"]:
    """Orthonormal basis, in :func:`tangent_basis` coordinates, of the O(d)-orbit tangent space.

    The columns span {(B x_i)_i : B ∈ so(d)}: the directions in which rotating all tokens together
    moves x. Every O(d)-invariant energy (the interaction energy with A = I included) is constant
    along the orbit, so at a critical point these are zero modes of the Hessian (docs/maths.md §7).
    The rank r is d(d−1)/2 minus the stabiliser dimension, decided by singular values above
    ``rtol`` × the largest; the shape (n(d−1), r) depends on x, so this is not jittable.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> af.landscape.rotation_orbit_basis(af.random_tokens(jr.key(0), 5, 3)).shape  # so(3) free
        (10, 3)
        >>> af.landscape.rotation_orbit_basis(jnp.tile(jnp.array([[0.0, 0.0, 1.0]]), (5, 1))).shape
        (10, 2)
    """
    x = check_tokens(x, "x")
    rtol = check_tolerance(rtol, "rtol")
    frame, mask = _orbit_frame(x, rtol)
    coords = jnp.einsum("nkd,pnd->pnk", _tangent_basis(x), frame[mask])
    return coords.reshape(coords.shape[0], -1).T


def hessian_extreme_eigenvalues(
    energy: AbstractEnergy,
    x: Float[Array, "n d"],
    weights: Float[Array, " n"] | None = None,
    *,
    num_iterations: int = 60,
    key: PRNGKeyArray | None = None,
    remove_orbit: bool = True,
    orbit_rtol: float = 1e-6,
) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """Smallest and largest eigenvalues of the Riemannian Hessian by Lanczos on HVPs.

    Never forms the (n(d−1))² matrix: each iteration is one
    :func:`attnflow.landscape.hessian_vector_product`
    (O(n²d) for the interaction energy), with full reorthogonalisation against the Krylov basis
    (memory ``num_iterations`` × n·d). Vectors stay in the tangent space and, with
    ``remove_orbit``, orthogonal to the O(d)-orbit directions, so the orbit zero modes do not
    mask the sign of the top eigenvalue at a local maximum. On breakdown (an invariant subspace
    found) the iteration restarts from a fresh random vector; the Ritz values remain exact
    eigenvalues of the compressed operator. Extreme Ritz values converge first; increase
    ``num_iterations`` (capped at the dimension) to tighten them. Jittable.

    Returns:
        ``(lowest, highest)`` Ritz values.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> e, x = af.InteractionEnergy(1.0), af.random_tokens(jr.key(1), 30, 3)
        >>> lo, hi = af.landscape.hessian_extreme_eigenvalues(
        ...     e, x, num_iterations=40, remove_orbit=False
        ... )
        >>> dense = jnp.linalg.eigvalsh(af.riemannian_hessian(e, x))
        >>> bool(jnp.allclose(jnp.array([lo, hi]), dense[jnp.array([0, -1])], rtol=1e-8))
        True
    """
    key = None if key is None else check_key(key)
    _check_energy(energy)
    x = check_tokens(x, "x")
    weights = check_weights(weights, x.shape[0])
    num_iterations = check_int(num_iterations, "num_iterations", low=1)
    remove_orbit = check_bool(remove_orbit, "remove_orbit")
    orbit_rtol = check_tolerance(orbit_rtol, "orbit_rtol")
    key = jr.key(0) if key is None else key
    steps = min(num_iterations, x.shape[0] * (x.shape[1] - 1))
    return _lanczos(energy, x, weights, key, steps, remove_orbit, orbit_rtol)


@eqx.filter_jit
def _lanczos(energy, x, weights, key, steps, remove_orbit, orbit_rtol):
    n, d = x.shape
    if remove_orbit:
        frame, mask = _orbit_frame(x, orbit_rtol)
        frame = frame * mask[:, None, None].astype(x.dtype)
    else:
        frame = jnp.zeros((1, n, d), x.dtype)

    def project(v):
        v = tangent(x, v)
        return v - jnp.einsum("p,pnd->nd", jnp.einsum("pnd,nd->p", frame, v), frame)

    def orthonormalise(v, basis):
        # two passes of classical Gram-Schmidt ("twice is enough")
        for _ in range(2):
            v = project(v - jnp.einsum("k,knd->nd", jnp.einsum("knd,nd->k", basis, v), basis))
        return v

    def fresh(i, basis):
        """A random unit vector orthogonal to ``basis``, and whether one was left to draw."""
        v = orthonormalise(jr.normal(jr.fold_in(key, i), (n, d), x.dtype), basis)
        norm = jnp.linalg.norm(v)
        left = norm > jnp.sqrt(jnp.finfo(x.dtype).eps)
        return jnp.where(left, v / jnp.where(left, norm, 1.0), 0.0), left

    first, _ = fresh(0, jnp.zeros((1, n, d), x.dtype))
    basis = jnp.zeros((steps, n, d), x.dtype).at[0].set(first)
    tiny = jnp.finfo(x.dtype).tiny

    def body(i, carry):
        basis, alphas, betas, live, scale = carry
        w = project(_hessian_vector_product(energy, x, basis[i], weights))
        alpha = jnp.sum(w * basis[i])
        w = orthonormalise(w, basis)
        beta = jnp.linalg.norm(w)
        scale = jnp.maximum(scale, jnp.abs(alpha) + beta)
        broke = beta <= 1e3 * jnp.finfo(x.dtype).eps * jnp.maximum(scale, tiny)
        restart, left = fresh(i + 1, basis)
        nxt = jnp.where(broke, restart, w / jnp.where(broke, 1.0, beta))
        basis = basis.at[i + 1].set(nxt, mode="drop")
        alphas = alphas.at[i].set(alpha)
        betas = betas.at[i].set(jnp.where(broke, 0.0, beta))
        live = live.at[i + 1].set(live[i] & (~broke | left), mode="drop")
        return basis, alphas, betas, live, scale

    alphas = jnp.zeros((steps,), x.dtype)
    betas = jnp.zeros((steps,), x.dtype)
    live = jnp.ones((steps,), bool)
    carry = (basis, alphas, betas, live, jnp.zeros((), x.dtype))
    _, alphas, betas, live, _ = jax.lax.fori_loop(0, steps, body, carry)
    # Once the space is exhausted (dimension minus orbit reached), the remaining rows are
    # padded with the Rayleigh quotient alphas[0], which lies inside the spectrum and so cannot
    # move its extremes.
    alphas = jnp.where(live, alphas, alphas[0])
    betas = jnp.where(live, betas, 0.0)
    tridiagonal = jnp.diag(alphas) + jnp.diag(betas[:-1], 1) + jnp.diag(betas[:-1], -1)
    ritz = jnp.linalg.eigvalsh(tridiagonal)
    return ritz[0], ritz[-1]


__all__ = [
    "tangent_basis",
    "riemannian_hessian",
    "hessian_vector_product",
    "rotation_orbit_basis",
    "hessian_extreme_eigenvalues",
]
