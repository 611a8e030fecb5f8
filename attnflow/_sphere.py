"""Geometry of the token manifold (S^{d-1})^n: projection, tangent spaces, random tokens."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ._check import (
    as_array,
    check_finite_scalar,
    check_int,
    check_key,
    check_nonzero_rows,
    check_real,
    check_size,
    check_tokens,
    expected,
    is_traced,
    unit_norm_tolerance,
)


def _check_pair(x, v, names=("x", "v")):
    """Two real arrays of one shape (x and a vector field at x); finite when concrete."""
    x, v = as_array(x, names[0]), as_array(v, names[1])
    for value, name in ((x, names[0]), (v, names[1])):
        check_real(value, name)
        if jnp.ndim(value) < 1:
            expected(name, "an array of shape (..., d)", value)
        if not is_traced(value) and not np.all(np.isfinite(np.asarray(value))):
            raise ValueError(f"{name}: expected finite values, got NaN or inf")
    if jnp.shape(x) != jnp.shape(v):
        raise ValueError(
            f"{names[1]}: expected the shape of {names[0]} {jnp.shape(x)}, got {jnp.shape(v)}"
        )
    return x, v


def _check_dtype_arg(dtype):
    if dtype is None:
        return jnp.result_type(float)
    try:
        dtype = jnp.dtype(dtype)
    except TypeError:
        expected("dtype", "float32 or float64", dtype)
    if dtype.name not in ("float32", "float64"):
        expected("dtype", "float32 or float64", f"= {dtype}")
    return dtype


def unit_rows(y: Float[Array, "*batch d"]) -> Float[Array, "*batch d"]:
    """y_i / |y_i| without checks: the normalisation used inside compiled loops (solvers, layers).

    :func:`normalize` is the checked public form; use this one where y is known non-zero (e.g.
    a small step from the sphere).
    """
    return y / jnp.linalg.norm(y, axis=-1, keepdims=True)


def retract(x: Float[Array, "*batch d"], v: Float[Array, "*batch d"], t=1.0):
    """The projection retraction R_x(t v) = (x + t v)/|x + t v| (first-order agreement with
    :func:`geodesic`; for tangent v the error is O(t³|v|³))."""
    return unit_rows(x + t * v)


def normalize(x: Float[Array, "*batch d"]) -> Float[Array, "*batch d"]:
    """Project each row onto the unit sphere: x_i ↦ x_i / |x_i|.

    This is the layer normalisation of the paper (§2). Zero rows raise an error. Rows whose
    norm underflows or overflows the dtype (subnormal entries, or entries near its maximum)
    are rescaled by their largest entry first, so every finite non-zero row has a direction.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> [round(v, 6) for v in af.normalize(jnp.array([[3.0, 4.0]]))[0].tolist()]
        [0.6, 0.8]
    """
    x = check_nonzero_rows(x, "x")
    x = (
        x
        if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)
        else jnp.asarray(x, float)
    )
    norm = jnp.linalg.norm(x, axis=-1, keepdims=True)
    tiny = jnp.finfo(x.dtype).tiny
    plain = (norm >= tiny) & jnp.isfinite(norm)
    if not is_traced(plain) and bool(jnp.all(plain)):
        return x / norm  # the common case, as before
    # Scale by a power of two (exact; a division by a huge number would pass through a subnormal
    # reciprocal, which XLA flushes to zero).
    _, exponent = jnp.frexp(jnp.max(jnp.abs(x), axis=-1, keepdims=True))
    y = jnp.ldexp(x, -exponent)
    return jnp.where(plain, x / jnp.where(plain, norm, 1), unit_rows(y))


def tangent(x: Float[Array, "*batch d"], v: Float[Array, "..."]) -> Float[Array, "*batch d"]:
    """Row-wise tangent projection P^⊥_{x} v = v − ⟨x, v⟩ x (docs/maths.md §0).

    ``x`` is assumed on the sphere; see :func:`project_tangent` for points off it.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.tangent(jnp.array([[1.0, 0.0]]), jnp.array([[2.0, 3.0]])).tolist()
        [[0.0, 3.0]]
    """
    x, v = _check_pair(x, v)
    return v - jnp.sum(x * v, axis=-1, keepdims=True) * x


def project_tangent(
    x: Float[Array, "*batch d"], v: Float[Array, "*batch d"]
) -> Float[Array, "*batch d"]:
    """P_x v = v − ⟨x, v⟩ x / |x|²: the tangent projection extended off the sphere.

    Unlike :func:`tangent` it satisfies ⟨x, P_x v⟩ = 0 for every non-zero x, so a flow driven by it
    conserves |x_i| exactly (docs/maths.md §1.12: the plain extension is repelling when V = −I).

    Called eagerly, a zero row of ``x`` is refused; traced (inside a solver step, under ``jit``)
    a zero row gives NaN, as a NaN row does: both propagate to the caller, which diagnoses them
    (docs/conventions.md, "Left to NaN propagation").
    """
    x, v = _check_pair(x, v)
    if not is_traced(x):
        x = check_nonzero_rows(x, "x")
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
    key = check_key(key)
    n, d = check_size(n, "n", low=1), check_size(d, "d", low=None)
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    if isinstance(batch_shape, (int, np.integer)):
        batch_shape = (batch_shape,)
    if not isinstance(batch_shape, (tuple, list)):
        expected("batch_shape", "a tuple of integers >= 0", batch_shape)
    batch_shape = tuple(check_int(b, "batch_shape", low=0) for b in batch_shape)
    dtype = _check_dtype_arg(dtype)
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
    n, d = check_size(n, "n", low=1), check_size(d, "d", low=None)
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    if n > d:
        raise ValueError(f"n: {n} pairwise orthogonal tokens need d >= n, got d = {d}")
    key = None if key is None else check_key(key)
    dtype = _check_dtype_arg(dtype)
    basis = jnp.eye(n, d, dtype=dtype)
    if key is None:
        return basis
    q, r = jnp.linalg.qr(jr.normal(key, (d, d), dtype=dtype))
    q = q * jnp.sign(jnp.diag(r))[None, :]
    return basis @ q.T


def equiangular_tokens(
    n: int, d: int, rho: float, key: PRNGKeyArray | None = None, dtype=None
) -> Float[Array, "n d"]:
    """n unit vectors of R^d with every pairwise inner product equal to ρ (the equiangular
    configurations of the survey's §6 reduction, ``attnflow.theory``'s ρ(t)).

    Built from the Gram matrix G = (1 − ρ) I + ρ 11ᵀ: its eigenvalues are 1 + (n − 1)ρ (on 1)
    and 1 − ρ (n − 1 times), so it is a Gram matrix exactly for −1/(n − 1) ≤ ρ ≤ 1, of rank n
    inside, n − 1 at ρ = −1/(n − 1) (the regular simplex) and 1 at ρ = 1; the tokens are the rows
    of V Λ^{1/2} (G = VΛVᵀ, computed in float64), which need d ≥ that rank. Without ``key`` they
    lie in the first coordinates; with ``key`` they are rotated by a Haar-random orthogonal
    matrix of R^d (the Gram matrix is unchanged).

    Args:
        n: the number of tokens (≥ 2).
        d: the dimension (≥ 2 and ≥ the rank of G).
        rho: ρ in [−1/(n − 1), 1], a Python number.
        key: optional PRNG key for a random rotation.
        dtype: the float dtype (default: JAX's default float).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = af.equiangular_tokens(4, 3, -1 / 3)   # the regular tetrahedron
        >>> g = x @ x.T
        >>> bool(jnp.allclose(g, jnp.where(jnp.eye(4) > 0, 1.0, -1 / 3), atol=1e-6))
        True
    """
    n = check_size(n, "n", low=2)
    d = check_size(d, "d", low=None)
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    rho = float(check_finite_scalar(rho, "rho"))
    low = -1.0 / (n - 1)
    tol = 64 * np.finfo(np.float64).eps
    if not low - tol <= rho <= 1 + tol:
        expected(
            "rho",
            f"an inner product in [-1/(n - 1), 1] = [{low:.6g}, 1] for n = {n} (else no unit "
            "vectors have it pairwise)",
            rho,
        )
    rho = min(max(rho, low), 1.0)
    rank = 1 if rho >= 1 - tol else (n - 1 if rho <= low + tol else n)
    if d < rank:
        expected(
            "d",
            f"d >= {rank}: {n} equiangular unit vectors with inner product {rho:.6g} span "
            f"{rank} dimensions",
            d,
        )
    key = None if key is None else check_key(key)
    dtype = _check_dtype_arg(dtype)
    gram = (1 - rho) * np.eye(n) + rho * np.ones((n, n))
    values, vectors = np.linalg.eigh(gram)
    order = np.argsort(values)[::-1][:rank]  # the nonzero eigenvalues
    tokens = vectors[:, order] * np.sqrt(np.maximum(values[order], 0.0))
    tokens /= np.linalg.norm(tokens, axis=1, keepdims=True)  # exact unit rows
    x = jnp.asarray(np.pad(tokens, ((0, 0), (0, d - rank))), dtype)
    if key is None:
        return x
    q, r = jnp.linalg.qr(jr.normal(key, (d, d), dtype=dtype))
    return x @ (q * jnp.sign(jnp.diag(r))[None, :]).T


def geodesic(x: Float[Array, "n d"], v: Float[Array, "n d"], t) -> Float[Array, "n d"]:
    """The exponential map of (S^{d-1})^n: x_i cos(t|v_i|) + v_i/|v_i| sin(t|v_i|), v tangent.

    ``x``: (n, d) tokens on the sphere; ``v``: (n, d) tangent vectors at x; ``t``: a real scalar.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> y = af.geodesic(jnp.array([[1.0, 0.0]]), jnp.array([[0.0, 1.0]]), jnp.pi / 2)
        >>> [round(v, 6) + 0.0 for v in y[0].tolist()]
        [0.0, 1.0]
    """
    x = check_tokens(x, "x")
    x, v = _check_pair(x, v)
    t = check_finite_scalar(t, "t")
    if not is_traced(x) and not is_traced(v):
        # The exponential map needs a tangent v: a normal part would leave the sphere.
        normal = np.abs(np.sum(np.asarray(x, np.float64) * np.asarray(v, np.float64), axis=-1))
        size = np.maximum(1.0, np.linalg.norm(np.asarray(v, np.float64), axis=-1))
        tol = unit_norm_tolerance(np.asarray(x).dtype)
        if np.any(normal > tol * size):
            i = int(np.argmax(normal / size))
            raise ValueError(
                f"v: expected tangent vectors at x (⟨x_i, v_i⟩ = 0), got ⟨x_{i}, v_{i}⟩ = "
                f"{normal[i]:.3g}; project them first with attnflow.tangent(x, v)"
            )
    norm = jnp.linalg.norm(v, axis=-1, keepdims=True)
    safe = jnp.where(norm > 0, norm, 1.0)
    return jnp.cos(t * norm) * x + jnp.where(norm > 0, jnp.sin(t * norm) / safe, t) * v


def tangent_basis(x: Float[Array, "n d"]) -> Float[Array, "n d-1 d"]:
    """An orthonormal basis of each tangent space T_{x_i}S^{d-1}: shape (n, d−1, d).

    Row ``basis[i, k]`` is a unit vector orthogonal to x_i and to ``basis[i, l]`` (l ≠ k). For
    d = 2 it is the rotation of x_i by +π/2, (−sin θ_i, cos θ_i) for x_i = (cos θ_i, sin θ_i), so
    coordinates in this basis are angle increments. For d ≥ 3 it is the last d − 1 columns of the
    Householder reflection that swaps x_i and ∓e_1 (stable: the reflector has norm ≥ √2).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 5, 4)
        >>> b = af.tangent_basis(x)
        >>> b.shape
        (5, 3, 4)
        >>> bool(jnp.abs(jnp.einsum("nkd,nd->nk", b, x)).max() < 1e-12)
        True
    """
    return _tangent_basis(check_tokens(x, "x"))


@jax.jit
def _tangent_basis(x):
    if x.shape[1] == 2:
        return jnp.stack([-x[:, 1], x[:, 0]], axis=-1)[:, None, :]
    sign = jnp.where(x[:, :1] >= 0, 1.0, -1.0).astype(x.dtype)
    u = x.at[:, :1].add(sign)
    reflector = (
        jnp.eye(x.shape[1], dtype=x.dtype)[None]
        - 2 * jnp.einsum("nd,ne->nde", u, u) / jnp.sum(u * u, axis=-1)[:, None, None]
    )
    return reflector[:, 1:, :]


def weingarten_term(x: Float[Array, "n d"], euclidean_gradient: Float[Array, "n d"]):
    """⟨x_i, ∇_i E⟩ per token: the Weingarten (shape-operator) term of the sphere.

    The Riemannian Hessian of E on (S^{d-1})^n is P_x ∇²E P_x − diag(⟨x_i, ∇_i E⟩) I on each
    tangent block (Absil–Mahony–Sepulchre; pymanopt's ``Oblique.euclidean_to_riemannian_hessian``).
    """
    return jnp.sum(x * euclidean_gradient, axis=-1)


__all__ = [
    "unit_rows",
    "retract",
    "tangent_basis",
    "weingarten_term",
    "normalize",
    "tangent",
    "project_tangent",
    "random_tokens",
    "orthogonal_tokens",
    "equiangular_tokens",
    "geodesic",
]
