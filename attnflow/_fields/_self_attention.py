"""Softmax self-attention (SA, paper (2.3)), its unnormalised variant (USA) and multi-head
attention (2.7): the attention fields every other variant is built like."""

from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import (
    check_beta,
    check_block_size,
    check_matrix,
    check_sa_normalization,
    check_shape_tokens,
)
from ._base import AbstractAttention, AttentionScores, check_real, hyperparameter


class SelfAttention(AbstractAttention):
    r"""Self-attention dynamics, paper (2.3) (SA) and its unnormalised variant (USA):

        ẋ_i = P^⊥_{x_i} ( Σ_j a_ij V x_j ),   a_ij = exp(β⟨Q x_i, K x_j⟩) / Z_i,

    with Z_i = Σ_j exp(β⟨Q x_i, K x_j⟩) for ``normalization="softmax"`` (SA, (2.4)) and Z_i = n
    for ``normalization="n"`` (USA, §3.3). With ``causal=True`` token i attends only to j ≤ i
    (KPR24, docs/maths.md §1.7; the USA variant keeps the factor 1/n). Missing Q, K, V are the
    identity.

    Weighted measures (``args`` = weights w, see :class:`AbstractField`): with
    s_ij = β⟨Qx_i, Kx_j⟩, SA becomes Σ_j w_j e^{s_ij} V x_j / Σ_j w_j e^{s_ij} and USA
    Σ_j w_j e^{s_ij} V x_j: the mean-field field 𝒳[μ] of (3.3)/(3.8) at μ = Σ_j w_j δ_{x_j}.
    Uniform weights w_j = 1/n give the fields above.

    Large n: with ``block_size`` set, or when ``block_size`` is None and n > 4096
    (``AUTO_BLOCK_THRESHOLD``), the output is computed by :func:`attnflow.blocked_attention`
    (online softmax over key blocks, memory O(n·d + block²), never n × n). Below that the dense
    path computes each row's exact two-pass softmax (row maximum, then exponentials) over all n
    keys; for n > 2048 it does so a few query rows at a time (``jax.lax.map`` over tiles of
    about 2^22 logits, ``DENSE_TILE``; 1024 rows at n = 4096), which keeps XLA's CPU backend on
    its matrix-multiply kernels and bounds the forward temporaries by the tile (reverse mode
    still stores the n × n exponentials). The blocked and dense
    paths agree to rounding; ``logits`` and ``attention_matrix`` are always dense.

    Softmax weights are computed with the row maximum subtracted, so SA is finite for any β in
    float32 (β = 100 included). USA's values genuinely grow like e^β and overflow float32 past
    β ≈ 88.

    Trained parameters: Q, K and V are arrays, so ``eqx.filter_grad`` and optax train them. β
    given as a Python number is a hyperparameter: it stays a ``float``, which optax leaves
    unchanged; to train β, pass it as an array, ``SelfAttention(jnp.asarray(1.0), Q, K, V)``
    (docs/conventions.md, "Which parameters are trained"). ``jax.grad`` with respect to a β
    that is traced works either way.

    Args:
        beta: inverse temperature β ≥ 0 (scalar). The d^{-1/2} of practice is absorbed into β.
            A Python number is a fixed hyperparameter, an array a trained parameter.
        Q, K: (k, d) query and key matrices (rectangular allowed).
        V: (d, d) value matrix.
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).
        causal: mask j > i.
        block_size: ``None`` (dense up to n = 4096, blocked above) or a positive integer to force
            the blocked kernel with that block size.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 8, 3)
        >>> v = af.SelfAttention(1.0)(0.0, x, None)
        >>> bool(jnp.abs(jnp.sum(v * x, axis=1)).max() < 1e-6)
        True
    """

    beta: float | Float[Array, ""]
    Q: Float[Array, "k d"] | None
    K: Float[Array, "k d"] | None
    V: Float[Array, "d d"] | None
    normalization: Literal["softmax", "n"] = eqx.field(static=True)
    causal: bool = eqx.field(static=True)
    block_size: int | None = eqx.field(static=True, default=None)

    def __init__(
        self,
        beta,
        Q=None,
        K=None,
        V=None,
        *,
        normalization="softmax",
        causal=False,
        block_size=None,
    ):
        self.beta = hyperparameter(check_beta(beta))
        check_sa_normalization(normalization)
        for name, matrix in (("Q", Q), ("K", K), ("V", V)):
            if matrix is not None:
                check_matrix(matrix, name, "(d, d)" if name == "V" else "(k, d)")
                check_real(matrix, name)
        given = {name: m for name, m in (("Q", Q), ("K", K), ("V", V)) if m is not None}
        if len({m.shape[1] for m in given.values()}) > 1:
            shapes = ", ".join(f"{name}: {m.shape}" for name, m in given.items())
            raise ValueError(
                f"Q, K, V: their column counts must all equal the token dimension d, got {shapes}"
            )
        if V is not None and V.shape[0] != V.shape[1]:
            raise ValueError(f"V: expected a square (d, d) value matrix, got shape {V.shape}")
        if (Q is None) != (K is None):
            given, other = ("Q", "K") if K is None else ("K", "Q")
            m = Q if K is None else K
            if m.shape[0] != m.shape[1]:
                raise ValueError(
                    f"{other}: is missing (identity) so {given} must be square, got "
                    f"shape {m.shape}; pass both Q and K for rectangular forms"
                )
        if Q is not None and K is not None and Q.shape[0] != K.shape[0]:
            raise ValueError(
                f"Q, K: must have the same number of rows k to form ⟨Qx, Ky⟩, got "
                f"Q {Q.shape} and K {K.shape}"
            )
        self.Q = None if Q is None else jnp.asarray(Q)
        self.K = None if K is None else jnp.asarray(K)
        self.V = None if V is None else jnp.asarray(V)
        self.normalization = normalization
        if not isinstance(causal, bool | np.bool_):
            raise ValueError(f"causal: expected True or False, got {causal!r}")
        self.causal = bool(causal)
        self.block_size = check_block_size(block_size)

    @property
    def dim(self) -> int | None:
        """The token dimension d fixed by Q, K or V (None when all are the identity)."""
        for m in (self.Q, self.K, self.V):
            if m is not None:
                return m.shape[1]
        return None

    def check_tokens(self, x):
        check_shape_tokens(x)
        if self.dim is not None and x.shape[1] != self.dim:
            raise ValueError(
                f"x: tokens have dimension d = {x.shape[1]} but Q, K, V act on d = {self.dim}"
            )

    def scores(self, x, weights):
        """q_i = β Q x_i, k_j = K x_j, v_j = V x_j; softmax (SA) or sum with w = 1/n (USA)."""
        queries = project_rows(x, self.Q)
        return AttentionScores(
            queries=jnp.asarray(self.beta, x.dtype) * queries,
            keys=project_rows(x, self.K),
            values=project_rows(x, self.V),
            weights=weights,
            mask="causal" if self.causal else None,
            normalization="softmax" if self.normalization == "softmax" else "sum",
        )


def project_rows(x, matrix):
    """Rows x_i ↦ M x_i (M maps column vectors: x Mᵀ), in the tokens' precision; None is I."""
    return x if matrix is None else x @ jnp.asarray(matrix, x.dtype).T


class MultiHeadAttention(AbstractAttention):
    """Multi-head self-attention, paper (2.7): one projection outside the sum over heads,

        ẋ_i = P^⊥_{x_i} ( Σ_h Σ_j a^h_ij V_h x_j ).

    The heads' scores are stacked on the head axis of :class:`AttentionScores`, and the base
    class maps the kernel over it and sums: ``logits`` and ``attention_matrix`` are
    (heads, n, n), in the order of ``heads``. For many heads of one shape,
    :class:`attnflow.StackedMultiHeadAttention` stores them as stacked arrays instead.

    Args:
        heads: a sequence of :class:`SelfAttention` heads acting on the same d.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 6, 4)
        >>> mha = af.MultiHeadAttention([af.SelfAttention(1.0), af.SelfAttention(2.0)])
        >>> mha(0.0, x, None).shape, mha.attention_matrix(x).shape
        ((6, 4), (2, 6, 6))
    """

    heads: tuple[SelfAttention, ...]

    def __init__(self, heads):
        self.heads = tuple(heads)

    def __check_init__(self):
        if not self.heads:
            raise ValueError("heads: expected at least one SelfAttention head, got none")
        for i, head in enumerate(self.heads):
            if not isinstance(head, SelfAttention):
                raise ValueError(f"heads[{i}]: expected a SelfAttention, got {type(head).__name__}")
        dims = {h.dim for h in self.heads} - {None}
        if len(dims) > 1:
            raise ValueError(f"heads: all heads must act on the same d, got dimensions {dims}")

    @property
    def block_size(self) -> int | None:
        """The smallest block size any head asks for (None: each head's default)."""
        sizes = [h.block_size for h in self.heads if h.block_size is not None]
        return min(sizes) if sizes else None

    def check_tokens(self, x):
        for head in self.heads:
            head.check_tokens(x)

    def scores(self, x, weights):
        """Each head's scores stacked on the head axis, in the order of ``heads``: consecutive
        heads that share the mask, normalisation and head dimension form one group (a tuple of
        groups when there are several)."""
        runs: list[list] = []
        for head in self.heads:
            s = head.scores(x, weights)
            key = (s.mask, s.normalization, s.queries.shape[-1])
            if runs and runs[-1][0] == key:
                runs[-1][1].append(s)
            else:
                runs.append([key, [s]])
        stacked = tuple(
            members[0]._replace(
                queries=jnp.stack([m.queries for m in members]),
                keys=jnp.stack([m.keys for m in members]),
                values=jnp.stack([m.values for m in members]),
            )
            for _, members in runs
        )
        return stacked[0] if len(stacked) == 1 else stacked


__all__ = ["SelfAttention", "MultiHeadAttention", "project_rows"]
