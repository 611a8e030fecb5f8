"""Multi-head attention with the heads stored as stacked arrays (vectorised over heads)."""

import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import check_beta, check_shape_tokens
from ._base import AbstractAttention, AttentionScores, hyperparameter


class StackedMultiHeadAttention(AbstractAttention):
    r"""Multi-head self-attention (2.7) with the H heads stored as stacked arrays and a scale c:

        ẋ_i = P^⊥_{x_i} ( c Σ_h Σ_j a^h_ij V_h x_j ),   a^h_ij = softmax_j β⟨Q_h x_i, K_h x_j⟩.

    The same field as ``c · MultiHeadAttention([SelfAttention(β, Q_h, K_h, V_h) ...])``, but the
    heads are vectorised (cost O(H(n²k + n d²)) without unrolling H), so hundreds of heads are
    cheap. Stacking it once more over layers gives the piecewise-constant random model of
    :func:`random_multihead_attention`.

    β and c given as Python numbers are hyperparameters (optax leaves them unchanged); pass
    arrays to train them (docs/conventions.md, "Which parameters are trained").

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

    beta: float | Float[Array, ""]
    Q: Float[Array, "heads k d"]
    K: Float[Array, "heads k d"]
    V: Float[Array, "heads d d"]
    scale: float | Float[Array, ""]

    def __init__(self, beta, Q, K, V, scale=1.0):
        self.beta = hyperparameter(check_beta(beta))
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
        self.scale = hyperparameter(scale)

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

    def scores(self, x, weights):
        """q^h_i = β Q_h x_i, k^h_j = K_h x_j, v^h_j = c V_h x_j on the head axis (softmax)."""
        Q, K, V = (jnp.asarray(m, x.dtype) for m in (self.Q, self.K, self.V))
        return AttentionScores(
            queries=jnp.asarray(self.beta, x.dtype) * jnp.einsum("hkd,nd->hnk", Q, x),
            keys=jnp.einsum("hkd,nd->hnk", K, x),
            values=jnp.asarray(self.scale, x.dtype) * jnp.einsum("hed,md->hme", V, x),
            weights=weights,
        )

    def attention_matrices(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "heads n n"]:
        """The H row-stochastic attention matrices a^h (= ``attention_matrix``)."""
        return self.attention_matrix(x, weights)


__all__ = ["StackedMultiHeadAttention"]
