"""Blocked (flash-attention style) attention: keys in blocks, online softmax, never n × n."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from .._check import check_weights

DEFAULT_BLOCK_SIZE = 512
"""Rows of queries and of keys handled together; a (block, block) tile is the largest temporary."""

AUTO_BLOCK_THRESHOLD = 4096
"""Fields with more tokens than this use the blocked kernel when ``block_size`` is ``None``.

Measured on a 2-core CPU (benchmarks/RESULTS_scaling.md, d = 64, float32): the dense path
(full softmax rows, a tile of ``DENSE_TILE`` logits at a time) is as fast as the blocked kernel at
n = 1000 and 1.1–1.5× faster from n = 2048 to 16384, so speed does not call for the switch there.
Memory does: reverse mode through the dense path stores the n × n exponentials (measured 75 MiB
of XLA temporaries in float32 at n = 4096, 278 MiB at 8192, per field evaluation a solver
keeps), while the blocked kernel stays linear in n. On a GPU the crossover may lie
elsewhere: force the blocked kernel with ``block_size``.
"""


def _pad_rows(a, rows: int):
    pad = rows - a.shape[0]
    if pad == 0:
        return a
    return jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1))


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

    Reverse-mode memory: both loops are wrapped in ``jax.checkpoint``, so the backward pass
    recomputes tiles instead of storing them; at any time it holds the running carries of one
    query block for every key block, O(m·e), never n × m (measured: 52 MiB of XLA buffers for
    the gradient at n = 32768, d = 64, float32, against 4 GiB for one dense n × n matrix).
    Forward mode (``jax.jvp``) and higher derivatives work too: this is plain JAX, not a
    hand-written VJP.

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
    if normalization not in ("softmax", "n"):
        raise ValueError(
            f"normalization: expected 'softmax' (SA) or 'n' (USA), got {normalization!r}"
        )
    if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
        raise ValueError(f"block_size: expected a positive integer, got {block_size!r}")
    n, k = queries.shape
    m = keys.shape[0]
    if keys.shape[1] != k:
        raise ValueError(
            f"keys: expected {k} columns to match queries {queries.shape}, got {keys.shape}"
        )
    if values.shape[0] != m:
        raise ValueError(
            f"values: expected {m} rows to match keys {keys.shape}, got {values.shape}"
        )
    dtype = jnp.result_type(queries, keys, values)
    if weights is None:
        weights = jnp.full((m,), 1.0 / m, dtype=dtype)
    elif jnp.shape(weights) != (m,):
        raise ValueError(
            f"weights: expected shape ({m},) to match the {m} keys, got {jnp.shape(weights)}"
        )
    weights = jnp.asarray(check_weights(weights, m), dtype=dtype)
    queries, keys, values = (a.astype(dtype) for a in (queries, keys, values))

    bq, bk = min(block_size, n), min(block_size, m)
    nq, nk = -(-n // bq), -(-m // bk)
    q_blocks = _pad_rows(queries, nq * bq).reshape(nq, bq, k)
    q_index = (jnp.arange(nq * bq) + query_offset).reshape(nq, bq)
    k_blocks = _pad_rows(keys, nk * bk).reshape(nk, bk, k)
    v_blocks = _pad_rows(values, nk * bk).reshape(nk, bk, -1)
    w_blocks = _pad_rows(weights, nk * bk).reshape(nk, bk)
    k_index = jnp.arange(nk * bk).reshape(nk, bk)

    def one_query_block(block):
        q, qi = block

        def one_key_block(carry, key_block):
            running_max, total, numerator = carry
            kb, vb, wb, kj = key_block
            s = q @ kb.T
            valid = kj[None, :] < m
            if causal:
                valid = valid & (kj[None, :] <= qi[:, None])
            s = jnp.where(valid, s, -jnp.inf)
            # Every query row sees key 0 in the first block, so the maximum is finite from then on.
            new_max = jnp.maximum(running_max, jax.lax.stop_gradient(jnp.max(s, axis=1)))
            rescale = jnp.exp(running_max - new_max)
            e = jnp.exp(s - new_max[:, None]) * wb[None, :]
            total = total * rescale + jnp.sum(e, axis=1)
            numerator = numerator * rescale[:, None] + e @ vb
            return (new_max, total, numerator), None

        init = (
            jnp.full((bq,), -jnp.inf, dtype),
            jnp.zeros((bq,), dtype),
            jnp.zeros((bq, values.shape[1]), dtype),
        )
        (running_max, total, numerator), _ = jax.lax.scan(
            jax.checkpoint(one_key_block), init, (k_blocks, v_blocks, w_blocks, k_index)
        )
        if normalization == "softmax":
            return numerator / total[:, None]
        return numerator * jnp.exp(running_max)[:, None]

    out = jax.lax.map(jax.checkpoint(one_query_block), (q_blocks, q_index))
    return out.reshape(nq * bq, -1)[:n]
