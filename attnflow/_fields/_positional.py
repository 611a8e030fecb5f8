"""Positional biases on the attention logits (ALiBi and any fixed (n, n) bias), and the
retrieval profile of causal attention (the lost-in-the-middle model).

Tokens of a prompt are ordered; self-attention (2.3) is permutation-equivariant and sees the
order only through a mask (causal attention, docs/maths.md §1.7) or a bias added to the logits.
ALiBi (Press, Smith, Lewis, ICLR 2022) adds −m·|i − j| to β⟨Q x_i, K x_j⟩, with one slope m per
head. Duerinckx–Geshkovski–Rossi ("Kinetic theory for Transformers and the
lost-in-the-middle phenomenon") study causal self-attention of i.i.d. uniform tokens and show
that the token retrieval profile, as a function of the source position, is U-shaped (primacy,
recency, an interior minimum) for their kinetic model, :class:`CausalALiBiAttention`;
:func:`retrieval_profile` measures a related covariance profile for any field by Monte Carlo.
"""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import (
    as_array_like,
    check_bool,
    check_dtype_option,
    check_int,
    check_size,
    check_tokens,
    is_traced,
)
from .._solve import solve
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


def retrieval_profile(
    field: Callable,
    x0: Float[Array, "batch n d"],
    t1,
    *,
    query: int = -1,
    max_steps: int = 4096,
    rtol: float = 1e-6,
    atol: float = 1e-9,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    r"""Monte Carlo retrieval profile r(j) = E⟨x_q(t1), x_j(0)⟩ over a batch of prompts.

    How much of the source token at position j the query token (default the last) still carries
    after depth t1. For i.i.d. uniform prompts E x_j(0) = 0, so r(j) is the covariance between
    output and source. It shows a U shape by a different mechanism from the lost-in-the-middle
    paper: under causal softmax SA every token eventually collapses onto x_1(0) (primacy), while
    r(q) starts at 1 (recency). It is not that paper's observable: for the kinetic causal ALiBi
    model (:class:`CausalALiBiAttention`) use :func:`attnflow.theory.lost_in_the_middle_profile`,
    the limit N·Σ_n ω_n E cos(n(θ_N(t) − θ_{sN}(0))), and its particle Monte Carlo in
    ``attnflow.figures.lost_in_the_middle``.

    Args:
        field: any attnflow field (e.g. ``SelfAttention(β, causal=True)`` or
            :class:`PositionalAttention` with a causal ALiBi bias).
        x0: (batch, n, d) prompts, e.g. ``random_tokens(key, n, d, batch_shape=(B,))``.
        t1: depth (time) of the readout.
        query: position q of the reading token.

    Returns:
        ``(mean, standard_error)``, each of shape (n,): the batch mean of ⟨x_q(t1), x_j(0)⟩ and
        its standard error (sample std / √batch).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 4, 2, batch_shape=(8,))
        >>> mean, se = af.retrieval_profile(af.SelfAttention(1.0, causal=True), x0, 1.0)
        >>> mean.shape, bool(mean[-1] > 0.5)
        ((4,), True)
    """
    x0 = as_array_like(x0, "x0")
    if jnp.ndim(x0) != 3:
        raise ValueError(
            f"x0: expected a batch of prompts of shape (batch, n, d), got shape {jnp.shape(x0)}"
        )
    batch, n, _ = x0.shape
    if batch < 2:
        raise ValueError(f"x0: a Monte Carlo estimate needs at least 2 prompts, got {batch}")
    if not -n <= check_int(query, "query") < n:
        raise ValueError(f"query: expected a position in [-{n}, {n}), got {query}")
    # One (batch·n, d) check validates every prompt's tokens at once.
    x0 = check_tokens(x0.reshape(-1, x0.shape[-1]), "x0").reshape(x0.shape)

    def readout(prompt):
        sol = solve(field, prompt, t1, max_steps=max_steps, rtol=rtol, atol=atol, throw=False)
        return prompt @ sol.ys[-1][query], sol.result == diffrax.RESULTS.successful

    overlaps, ok = jax.vmap(readout)(x0)
    overlaps = eqx.error_if(
        overlaps,
        ~jnp.all(ok),
        "retrieval_profile: a solve stopped early "
        "(max_steps reached); raise max_steps or loosen rtol/atol",
    )
    mean = jnp.mean(overlaps, axis=0)
    stderr = jnp.std(overlaps, axis=0, ddof=1) / jnp.sqrt(batch)
    return mean, stderr


__all__ = ["PositionalAttention", "alibi_bias", "alibi_slopes", "retrieval_profile"]
