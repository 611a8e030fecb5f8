"""Blocked (flash-attention style) attention: the kernel's blocked path as a function of its
own, with the block size required."""

from jaxtyping import Array, Float, Int

from .._check import check_bool, check_sa_normalization, check_weights
from ._kernel import AUTO_BLOCK_THRESHOLD, DEFAULT_BLOCK_SIZE, attention


def blocked_attention(
    queries: Float[Array, "n k"],
    keys: Float[Array, "m _k"],
    values: Float[Array, "_m e"],
    weights: Float[Array, " _m"] | None = None,
    *,
    normalization: str = "softmax",
    causal: bool = False,
    block_size=DEFAULT_BLOCK_SIZE,
    query_offset: int | Int[Array, ""] = 0,
) -> Float[Array, "n e"]:
    r"""Attention outputs without the n × m logit matrix, by an online (running-max) softmax:

        softmax:  o_i = Σ_j w_j e^{s_ij} v_j / Σ_j w_j e^{s_ij},   s_ij = ⟨q_i, k_j⟩,
        "n":      o_i = Σ_j w_j e^{s_ij} v_j,

    the weighted forms of (SA), paper (2.3)–(2.4), and of (USA), §3.3. With q_i = β Q x_i,
    k_j = K x_j, v_j = V x_j and w_j = 1/n these are :meth:`SelfAttention.attention_output`.

    Keys are visited in blocks of ``block_size``; each query block carries a running maximum
    m_i, the running sum l_i = Σ w_j e^{s_ij − m_i} and the running numerator, rescaled by
    e^{m_old − m_new} when the maximum grows (Milakov–Gimelshein 2018; FlashAttention). Queries are
    also blocked, so the largest temporary is a (block_size, block_size) tile and memory is
    O((n + m)(k + e) + block_size²). The maximum is taken over every unmasked key, zero weights
    included, exactly as in the dense field, so e^{s − m} ≤ 1 and softmax never overflows.

    This is :func:`attnflow.attention` with ``block_size`` set: derivatives come from the
    kernel's hand-written rule, and reverse mode saves only the per-row log-normaliser and
    recomputes each tile in the backward pass (O(n·e) memory, never n × m). Forward mode and
    higher derivatives work too.

    Shapes that must agree (k between queries and keys, m between keys, values and weights) are
    checked here with explicit messages, not by the annotations.

    Args:
        queries: (n, k) rows q_i, already multiplied by β.
        keys: (m, k) rows k_j.
        values: (m, e) rows v_j.
        weights: (m,) non-negative w_j; ``None`` means 1/m (the empirical measure).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA: no denominator).
        causal: query i attends only to keys j ≤ i + ``query_offset``.
        block_size: rows per query block and per key block; n and m need not be multiples.
        query_offset: global index of query 0 (for particles sharded across devices).

    Returns:
        (n, e) outputs o_i.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 10, 3)
        >>> out = af.blocked_attention(2.0 * x, x, x, block_size=4)
        >>> dense = af.SelfAttention(2.0).attention_output(x)
        >>> bool(jnp.allclose(out, dense, atol=1e-6))
        True
    """
    check_sa_normalization(normalization)
    causal = check_bool(causal, "causal")
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise ValueError(f"block_size: expected a positive integer, got {block_size!r}")
    if weights is not None:
        if len(getattr(weights, "shape", ())) != 1 or weights.shape[0] != keys.shape[0]:
            raise ValueError(
                f"weights: expected shape ({keys.shape[0]},) to match the {keys.shape[0]} keys, "
                f"got {getattr(weights, 'shape', None)}"
            )
        weights = check_weights(weights, keys.shape[0])
    return attention(
        queries,
        keys,
        values,
        weights=weights,
        mask="causal" if causal else None,
        normalization="softmax" if normalization == "softmax" else "sum",
        block_size=block_size,
        query_offset=query_offset,
    )


__all__ = ["blocked_attention", "AUTO_BLOCK_THRESHOLD", "DEFAULT_BLOCK_SIZE"]
