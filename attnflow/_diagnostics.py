"""Clustering diagnostics of one system of tokens."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ._check import check_shape_tokens


def gram(x: Float[Array, "n d"]) -> Float[Array, "n n"]:
    """The Gram matrix G_ij = ⟨x_i, x_j⟩.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.gram(jnp.eye(2))
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    check_shape_tokens(x)
    return x @ x.T


def _close(x, delta):
    return gram(x) >= 1 - delta


def clustered_fraction(x: Float[Array, "n d"], delta: float = 1e-3) -> Float[Array, ""]:
    """Fraction of ordered pairs i ≠ j with ⟨x_i, x_j⟩ ≥ 1 − δ (the statistic of Fig. 3).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> float(af.clustered_fraction(x))  # 2 of the 6 ordered pairs
        0.3333333432674408
    """
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"x: clustered_fraction needs at least two tokens, got n = {n}")
    close = _close(x, delta) & ~jnp.eye(n, dtype=bool)
    return jnp.sum(close) / (n * (n - 1))


def cluster_labels(x: Float[Array, "n d"], delta: float = 1e-3) -> Int[Array, " n"]:
    """Label of each token's cluster: the smallest index in its connected component of the graph
    i ~ j iff ⟨x_i, x_j⟩ ≥ 1 − δ (single linkage, so chains merge)."""
    n = x.shape[0]
    reach = _close(x, delta) | jnp.eye(n, dtype=bool)

    def square(r, _):
        r = (r.astype(jnp.int32) @ r.astype(jnp.int32)) > 0
        return r, None

    steps = max(1, int(n - 1).bit_length())
    reach, _ = jax.lax.scan(square, reach, None, length=steps)
    return jnp.argmax(reach, axis=1)


def count_clusters(x: Float[Array, "n d"], delta: float = 1e-3) -> Int[Array, ""]:
    """Number of connected components of the graph i ~ j iff ⟨x_i, x_j⟩ ≥ 1 − δ.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> int(af.count_clusters(x))
        2
    """
    labels = cluster_labels(x, delta)
    return jnp.sum(labels == jnp.arange(x.shape[0]))
