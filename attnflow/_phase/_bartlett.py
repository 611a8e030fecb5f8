"""Uniform tokens on S^{d−1} sampled directly in coordinates of their span (Bartlett factor)."""

import functools

import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from .._check import check_key, check_size
from .._sphere import unit_rows


def bartlett_tokens(
    key: PRNGKeyArray, n: int, d: int, batch_shape: tuple[int, ...] = (), dtype=None
) -> Float[Array, "*batch n r"]:
    r"""Coordinates of n i.i.d. uniform tokens on S^{d−1} in an orthonormal basis of their span:
    shape ``batch_shape + (n, r)``, r = min(n, d), without drawing d-dimensional vectors.

    If X is an n × d standard Gaussian matrix and Xᵀ = U R its QR decomposition, the rows of
    X are Rᵀ in the basis U, and Rᵀ is lower-trapezoidal with independent entries: (Rᵀ)_ii ~ χ
    with d − i degrees of freedom (i = 0 … r−1), N(0, 1) below the diagonal (Bartlett
    decomposition). Normalising its rows gives tokens with exactly the inner products
    (the Gram matrix) of :func:`attnflow.random_tokens`, at O(n r) cost instead of O(n d).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> y = af.bartlett_tokens(jr.key(0), 5, 1024)
        >>> y.shape, bool(abs((y * y).sum(-1) - 1).max() < 1e-12)
        ((5, 5), True)
    """
    key = check_key(key)
    n = check_size(n, "n", low=1)
    d = check_size(d, "d", low=2)  # the sphere S^(d-1)
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    # d enters only through the χ degrees of freedom: one compilation serves every d ≥ n.
    return _bartlett(key, jnp.asarray(d, dtype), n, min(n, d), tuple(batch_shape), dtype)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _bartlett(key, d, n, r, batch_shape, dtype):
    ones = (1,) * len(batch_shape)
    k_normal, k_chi = jr.split(key)
    lower = jnp.tril(jnp.ones((n, r), bool), k=-1).reshape(ones + (n, r))
    L = jnp.where(lower, jr.normal(k_normal, batch_shape + (n, r), dtype), 0)
    dof = (d - jnp.arange(r, dtype=dtype)).reshape(ones + (r,))
    chi = jnp.sqrt(2 * jr.gamma(k_chi, dof / 2, batch_shape + (r,), dtype))
    L = L + jnp.eye(n, r, dtype=dtype).reshape(ones + (n, r)) * chi[..., None, :]
    return unit_rows(L)
