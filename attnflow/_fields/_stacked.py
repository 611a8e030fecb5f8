"""Multi-head attention with the heads stored as stacked arrays (vectorised over heads)."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import check_beta, check_shape_tokens
from ._base import AbstractAttention
from ._kernel import attention, attention_matrix


class StackedMultiHeadAttention(AbstractAttention):
    r"""Multi-head self-attention (2.7) with the H heads stored as stacked arrays and a scale c:

        ẋ_i = P^⊥_{x_i} ( c Σ_h Σ_j a^h_ij V_h x_j ),   a^h_ij = softmax_j β⟨Q_h x_i, K_h x_j⟩.

    The same field as ``c · MultiHeadAttention([SelfAttention(β, Q_h, K_h, V_h) ...])``, but the
    heads are vectorised (cost O(H(n²k + n d²)) without unrolling H), so hundreds of heads are
    cheap. Stacking it once more over layers gives the piecewise-constant random model of
    :func:`random_multihead_attention`.

    Args:
        beta: inverse temperature β ≥ 0 (scalar).
        Q, K: (H, k, d) query and key matrices.
        V: (H, d, d) value matrices.
        scale: the scalar c in front of the sum over heads (default 1).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> Q = jr.normal(jr.key(0), (4, 2, 3))
        >>> f = af.StackedMultiHeadAttention(1.0, Q, Q, jnp.broadcast_to(jnp.eye(3), (4, 3, 3)))
        >>> f(0.0, af.random_tokens(jr.key(1), 5, 3)).shape
        (5, 3)
    """

    beta: Float[Array, ""]
    Q: Float[Array, "heads k d"]
    K: Float[Array, "heads k d"]
    V: Float[Array, "heads d d"]
    scale: Float[Array, ""]

    def __init__(self, beta, Q, K, V, scale=1.0):
        self.beta = jnp.asarray(check_beta(beta))
        shapes = {name: jnp.shape(m) for name, m in (("Q", Q), ("K", K), ("V", V))}
        if any(len(s) != 3 for s in shapes.values()):
            raise ValueError(
                f"Q, K, V: expected stacked heads Q, K: (H, k, d) and V: (H, d, d), got {shapes}"
            )
        (H, k, d) = shapes["Q"]
        if shapes["K"] != (H, k, d) or shapes["V"] != (H, d, d):
            raise ValueError(
                f"Q, K, V: expected Q and K of the same shape (H, k, d) and V of shape "
                f"(H, d, d) = {(H, d, d)}, got {shapes}"
            )
        if jnp.ndim(scale) != 0:
            raise ValueError(f"scale: expected a scalar, got shape {jnp.shape(scale)}")
        self.Q, self.K, self.V = jnp.asarray(Q), jnp.asarray(K), jnp.asarray(V)
        self.scale = jnp.asarray(scale, dtype=self.V.dtype)

    @property
    def num_heads(self) -> int:
        return self.Q.shape[-3]

    def check_tokens(self, x):
        check_shape_tokens(x)
        if x.shape[1] != self.Q.shape[-1]:
            raise ValueError(
                f"x: tokens have dimension d = {x.shape[1]} but the heads act on "
                f"d = {self.Q.shape[-1]}"
            )

    def _head_scores(self, x, weights):
        Q, K, V = (jnp.asarray(m, x.dtype) for m in (self.Q, self.K, self.V))
        queries = jnp.asarray(self.beta, x.dtype) * jnp.einsum("hkd,nd->hnk", Q, x)
        keys = jnp.einsum("hkd,nd->hnk", K, x)
        values = jnp.einsum("hed,md->hme", V, x)
        return queries, keys, values, weights

    def scores(self, x, weights):
        raise TypeError(
            "StackedMultiHeadAttention has one set of scores per head: see attention_matrices"
        )

    def logits(self, x: Float[Array, "n d"]) -> Float[Array, "heads n n"]:
        """β⟨Q_h x_i, K_h x_j⟩ for every head: (heads, n, n)."""
        self.check_tokens(x)
        queries, keys, _, _ = self._head_scores(x, None)
        return jnp.einsum("hnk,hmk->hnm", queries, keys)

    def attention_matrices(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "heads n n"]:
        """The H row-stochastic attention matrices a^h."""
        self.check_tokens(x)
        queries, keys, _, w = self._head_scores(x, self._weights(weights, x.shape[0]))
        return jax.vmap(lambda q, k: attention_matrix(q, k, weights=w))(queries, keys)

    attention_matrix = attention_matrices

    def attention_output(self, x, weights=None):
        """c Σ_h Σ_j a^h_ij V_h x_j before the projection (heads vectorised through the kernel)."""
        self.check_tokens(x)
        queries, keys, values, w = self._head_scores(x, self._weights(weights, x.shape[0]))
        block = self._block_size(x.shape[0])
        per_head = jax.vmap(lambda q, k, v: attention(q, k, v, weights=w, block_size=block))(
            queries, keys, values
        )
        return self.scale.astype(x.dtype) * jnp.sum(per_head, axis=0)


__all__ = ["StackedMultiHeadAttention"]
