"""Positional biases on the attention logits (ALiBi and any fixed (n, n) bias) for causal
attention (the lost-in-the-middle model).

Tokens of a prompt are ordered; self-attention (2.3) is permutation-equivariant and sees the
order only through a mask (causal attention, docs/maths.md §1.7) or a bias added to the logits.
ALiBi (Press, Smith, Lewis, ICLR 2022) adds −m·|i − j| to β⟨Q x_i, K x_j⟩, with one slope m per
head. Duerinckx–Geshkovski–Rossi ("Kinetic theory for Transformers and the
lost-in-the-middle phenomenon") study causal self-attention of i.i.d. uniform tokens and show
that the token retrieval profile, as a function of the source position, is U-shaped (primacy,
recency, an interior minimum) for their kinetic model, :class:`CausalALiBiAttention`;
:func:`attnflow.retrieval_profile` (in ``attnflow/_retrieval.py``, above ``solve``) measures a
related covariance profile for any field by Monte Carlo.
"""

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import (
    check_bool,
    check_dtype_option,
    check_size,
    is_traced,
)
from ._base import AbstractAttention
from ._self_attention import SelfAttention


def alibi_bias(n: int, slope, *, causal: bool = True, dtype=None) -> Float[Array, "n n"]:
    """The ALiBi bias b_ij = −m·|i − j|, with b_ij = −∞ for j > i when ``causal`` (the mask).

    Example:
        >>> import attnflow as af
        >>> af.alibi_bias(3, 0.5, causal=False).tolist()
        [[-0.0, -0.5, -1.0], [-0.5, -0.0, -0.5], [-1.0, -0.5, -0.0]]
    """
    n = check_size(n, "n", low=1)
    causal = check_bool(causal, "causal")
    if jnp.ndim(slope) != 0:
        raise ValueError(f"slope: expected a scalar ALiBi slope, got shape {jnp.shape(slope)}")
    if not is_traced(slope) and not (np.isfinite(float(slope)) and float(slope) >= 0):
        raise ValueError(f"slope: expected a finite slope m >= 0, got {float(slope)}")
    dtype = check_dtype_option(dtype, "dtype")
    dtype = dtype if dtype is not None else jnp.result_type(float)
    positions = jnp.arange(n)
    distance = jnp.abs(positions[:, None] - positions[None, :]).astype(dtype)
    bias = -jnp.asarray(slope, dtype) * distance
    if causal:
        bias = jnp.where(positions[None, :] <= positions[:, None], bias, -jnp.inf)
    return bias


def alibi_slopes(num_heads: int) -> Float[Array, " heads"]:
    """ALiBi's per-head slopes m_h = 2^{−8h/H}, h = 1 … H (Press et al., §3).

    Example:
        >>> import attnflow as af
        >>> af.alibi_slopes(4).tolist()
        [0.25, 0.0625, 0.015625, 0.00390625]
    """
    num_heads = check_size(num_heads, "num_heads", low=1)
    h = jnp.arange(1, int(num_heads) + 1, dtype=jnp.result_type(float))
    return 2.0 ** (-8.0 * h / num_heads)


class PositionalAttention(AbstractAttention):
    r"""Self-attention with a fixed positional bias b on the logits:

        ẋ_i = P^⊥_{x_i} ( Σ_j a_ij V x_j ),   a_ij = exp(β⟨Q x_i, K x_j⟩ + b_ij) / Z_i,

    Z_i = Σ_j exp(β⟨Q x_i, K x_j⟩ + b_ij) (``normalization="softmax"``, (2.4) with a bias) or
    Z_i = n (``"n"``, the USA analogue). Entries b_ij = −∞ mask j out of row i (every row must
    keep one finite entry). ALiBi is ``bias = alibi_bias(n, m, causal=...)``; b = 0 is (SA).

    When b is symmetric (bidirectional ALiBi), QᵀK = W symmetric and V = W, this is the gradient
    ascent of E(x) = 1/(2β) Σ_ij exp(β x_iᵀ W x_j + b_ij) in the metric Σ_i Z_i ⟨a_i, b_i⟩, as in
    §3.4; the causal bias is not symmetric and, like CSA, not a gradient flow.

    Args:
        beta: inverse temperature β (finite, either sign; docs/conventions.md "Negative β").
        bias: (n, n) additive bias; the field then acts on exactly n tokens.
        Q, K: (k, d) (identity when omitted).
        V: (d, d) (identity when omitted).
        normalization: ``"softmax"`` or ``"n"``.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 5, 3)
        >>> field = af.PositionalAttention(4.0, af.alibi_bias(5, 0.5))
        >>> bool(abs(field.attention_matrix(x).sum(1) - 1).max() < 1e-6)
        True
    """

    attention: SelfAttention
    bias: Float[Array, "n n"]

    def __init__(self, beta, bias, Q=None, K=None, V=None, *, normalization="softmax"):
        self.attention = SelfAttention(beta, Q, K, V, normalization=normalization)
        shape = jnp.shape(bias)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"bias: expected a square (n, n) positional bias, got shape {shape}")
        if not is_traced(bias):
            values = np.asarray(bias)
            if np.any(np.isnan(values)) or np.any(values == np.inf):
                raise ValueError("bias: entries must be finite or -inf (a mask), got NaN or +inf")
            empty = ~np.any(np.isfinite(values), axis=1)
            if np.any(empty):
                raise ValueError(
                    f"bias: row {int(np.argmax(empty))} is entirely -inf, so token "
                    f"{int(np.argmax(empty))} would attend to nothing"
                )
        self.bias = jnp.asarray(bias)

    @property
    def dim(self) -> int | None:
        """The token dimension d fixed by Q, K or V (None when all are the identity)."""
        return self.attention.dim

    @property
    def num_tokens(self) -> int:
        """n, the number of tokens the (n, n) bias is for."""
        return self.bias.shape[0]

    def scores(self, x, weights):
        """SelfAttention's scores plus the bias b_ij (−∞ entries mask)."""
        return self.attention.scores(x, weights)._replace(bias=self.bias.astype(x.dtype))


__all__ = ["PositionalAttention", "alibi_bias", "alibi_slopes"]
