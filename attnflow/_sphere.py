"""Geometry of the token manifold (S^{d-1})^n: projection, tangent spaces, random tokens."""

import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ._check import check_nonzero_rows


def normalize(x: Float[Array, "*batch d"]) -> Float[Array, "*batch d"]:
    """Project each row onto the unit sphere: x_i ↦ x_i / |x_i|.

    This is the layer normalisation of the paper (§2). Zero rows raise an error.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> [round(v, 6) for v in af.normalize(jnp.array([[3.0, 4.0]]))[0].tolist()]
        [0.6, 0.8]
    """
    x = check_nonzero_rows(x, "x")
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def tangent(x: Float[Array, "*batch d"], v: Float[Array, "..."]) -> Float[Array, "*batch d"]:
    """Row-wise tangent projection P^⊥_{x} v = v − ⟨x, v⟩ x (MATH.md notation).

    ``x`` is assumed on the sphere; see :func:`project_tangent` for points off it.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.tangent(jnp.array([[1.0, 0.0]]), jnp.array([[2.0, 3.0]])).tolist()
        [[0.0, 3.0]]
    """
    if jnp.shape(x) != jnp.shape(v):
        raise ValueError(f"v: expected the shape of x {jnp.shape(x)}, got {jnp.shape(v)}")
    return v - jnp.sum(x * v, axis=-1, keepdims=True) * x


def project_tangent(
    x: Float[Array, "*batch d"], v: Float[Array, "*batch d"]
) -> Float[Array, "*batch d"]:
    """P_x v = v − ⟨x, v⟩ x / |x|²: the tangent projection extended off the sphere.

    Unlike :func:`tangent` it satisfies ⟨x, P_x v⟩ = 0 for every non-zero x, so a flow driven by it
    conserves |x_i| exactly (MATH.md §1.12: the plain extension is repelling when V = −I).
    """
    return v - jnp.sum(x * v, axis=-1, keepdims=True) / jnp.sum(x * x, axis=-1, keepdims=True) * x


def random_tokens(
    key: PRNGKeyArray, n: int, d: int, batch_shape: tuple[int, ...] = (), dtype=None
) -> Float[Array, "*batch n d"]:
    """n i.i.d. tokens uniform on S^{d-1} (normalised standard Gaussians).

    Returns an array of shape ``batch_shape + (n, d)``; deterministic given ``key``.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> af.random_tokens(jr.key(0), 4, 3).shape
        (4, 3)
    """
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    if n < 1:
        raise ValueError(f"n: expected at least one token, got n = {n}")
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    g = jr.normal(key, (*tuple(batch_shape), n, d), dtype=dtype)
    return g / jnp.linalg.norm(g, axis=-1, keepdims=True)


def orthogonal_tokens(
    n: int, d: int, key: PRNGKeyArray | None = None, dtype=None
) -> Float[Array, "n d"]:
    """n pairwise orthogonal unit vectors in R^d (the setting of Thm 6.8); needs d >= n.

    Without ``key`` these are the first n standard basis vectors; with ``key`` they are rotated by
    a Haar-random orthogonal matrix.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = af.orthogonal_tokens(3, 5)
        >>> bool(abs(x @ x.T - jnp.eye(3)).max() < 1e-6)
        True
    """
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    if n > d:
        raise ValueError(f"n: {n} pairwise orthogonal tokens need d >= n, got d = {d}")
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    basis = jnp.eye(n, d, dtype=dtype)
    if key is None:
        return basis
    q, r = jnp.linalg.qr(jr.normal(key, (d, d), dtype=dtype))
    q = q * jnp.sign(jnp.diag(r))[None, :]
    return basis @ q.T


def geodesic(x: Float[Array, "n d"], v: Float[Array, "n d"], t) -> Float[Array, "n d"]:
    """The exponential map of (S^{d-1})^n: x_i cos(t|v_i|) + v_i/|v_i| sin(t|v_i|), v tangent."""
    norm = jnp.linalg.norm(v, axis=-1, keepdims=True)
    safe = jnp.where(norm > 0, norm, 1.0)
    return jnp.cos(t * norm) * x + jnp.where(norm > 0, jnp.sin(t * norm) / safe, t) * v


__all__ = [
    "normalize",
    "tangent",
    "project_tangent",
    "random_tokens",
    "orthogonal_tokens",
    "geodesic",
]
