r"""The one attention kernel: o_i = Σ_j a_ij v_j for every attention field of attnflow.

Every attention variant reduces to the same computation on scores s_ij = ⟨q_i, k_j⟩ + b_ij:

    "softmax":  o_i = Σ_j w_j e^{s_ij} v_j / Σ_j w_j e^{s_ij}      (SA, paper (2.3)–(2.4)),
    "sum":      o_i = Σ_j w_j e^{s_ij} v_j                          (USA, §3.3, with w_j = 1/n),
    "hardmax":  o_i = Σ_{j ∈ C_i} w_j v_j / Σ_{j ∈ C_i} w_j          (the β → ∞ limit, (9.6)),

with measure weights w_j ≥ 0 (None: 1/m, the empirical measure), an additive bias b (positional
biases, log-weights of Sinkhorn scalings; −∞ masks an entry), and a mask ("causal": j ≤ i,
"strict": j < i, offset by ``query_offset``). A row with no admissible key returns 0.

Overflow-safe: exponentials are taken of s_ij − max_k s_ik, so "softmax" is finite for any β in
float32; "sum" multiplies back by e^{max} and overflows only when the output itself does.

Two evaluation paths compute the same numbers:

- dense: exact two-pass softmax over whole rows, a tile of ``DENSE_TILE`` logits at a time;
- blocked (``block_size`` given): online softmax over key blocks (Milakov–Gimelshein 2018,
  FlashAttention), memory O((n + m)(k + e) + block²), never n × m.

Derivatives come from a hand-written JVP rule (:func:`jax.custom_jvp`), so forward mode, reverse
mode and every composition (``jax.hessian``, ``jacfwd(jacrev(...))``) work. JAX obtains reverse
mode by transposing the rule, which is written so that the transpose is the FlashAttention
backward pass: with E_ij = w_j e^{s_ij − r_i} and the per-row normaliser ℓ_i = Σ_j E_ij,

    dV = Eᵀ Ĝ,   dS = E ⊙ (Ĝ Vᵀ − ⟨Ĝ_i, o_i⟩),   dQ = dS K,   dK = dSᵀ Q,   Ĝ_i = G_i / ℓ_i,

four products of the size of the forward's two, and no differentiation through the max, the
masks or the row sums (row sums are products with a column of ones, which XLA's CPU backend runs
as a matrix product rather than a slow tree reduction). The dense path stores E (n × m, as any
dense attention gradient must); the blocked path stores only the per-row log-normaliser and
recomputes E tile by tile in the backward pass (``jax.checkpoint``), so reverse mode stays
O(n·d) in memory.
"""

import functools
from typing import Literal

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Float

from .._check import (
    check_block_size,
    check_finite_array,
    check_finite_scalar,
    check_measure,
    is_traced,
)

DENSE_TILE = 2**22
"""Logits the dense path handles at once: DENSE_TILE // m query rows against all m keys.

One expression up to n = m = 2048; 1024 rows at m = 4096; 256 at 16384 (16 MiB tiles in
float32). Smaller tiles give the products e @ v too few rows to run at the matmul's speed.
Row tiles keep XLA's CPU backend on its matrix-multiply kernels where one n × m expression is
fused into a slow loop nest (see docs/benchmarks.md#bench-scaling).
"""

DEFAULT_BLOCK_SIZE = 512
"""Rows of queries and of keys the blocked path handles together (a (block, block) tile)."""

AUTO_BLOCK_THRESHOLD = 4096
"""Fields with more tokens than this use the blocked path when their ``block_size`` is ``None``.

Below it the dense path is as fast or faster; above it the dense path's reverse mode would store
the n × m exponentials (64 MiB in float32 at n = 4096), while the blocked path stays linear in n.
Force the blocked path with a field's ``block_size``.
"""

Normalization = Literal["softmax", "sum", "hardmax"]
Mask = Literal["causal", "strict"] | None


def _admissible(n_rows, m, query_index, mask):
    """(rows, m) boolean: key j is admissible for the query with global index query_index."""
    key_index = jnp.arange(m, dtype=query_index.dtype)
    if mask == "causal":
        return key_index[None, :] <= query_index[:, None]
    if mask == "strict":
        return key_index[None, :] < query_index[:, None]
    return None


def _scores(q, k, b, admissible):
    s = q @ k.T
    if b is not None:
        s = s + b
    if admissible is not None:
        s = jnp.where(admissible, s, -jnp.inf)
    return s


def _row_stats(s, w):
    """E = w e^{s − r} with r the (finite) row maximum, and the row maximum r itself.

    ``w`` None means uniform weights, applied as 1/m at the end (``_finish``), not per entry.
    """
    r = jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True))
    r = jnp.where(jnp.isfinite(r), r, 0.0)
    e = jnp.exp(s - r)
    if w is not None:
        e = e * w[None, :]
    return e, r[:, 0]


def _row_sums(a):
    """Σ_j a_ij as a product with a column of ones (a matrix–vector product on XLA's CPU
    backend, where a long-axis reduction becomes a slow tree reduction)."""
    return a @ jnp.ones((a.shape[-1],), a.dtype)


def _with_ones(v):
    """[v, 1]: one product gives Σ_j E_ij v_j and the row sum Σ_j E_ij together."""
    return jnp.concatenate([v, jnp.ones((v.shape[0], 1), v.dtype)], axis=1)


def _weights_tangent(p, g, q, k, dq, dk, db, dw):
    """Tangent of the unnormalised weights P = G ∘ w (G = e^{s − shift}, s = q kᵀ + b):
    P ∘ ds + G ∘ dw with ds = dq kᵀ + q dkᵀ + db, each term only where its tangent is non-zero
    (None); ``g`` is used only with ``dw``."""
    ds = None
    if dq is not None:
        ds = dq @ k.T
    if dk is not None:
        ds = q @ dk.T if ds is None else ds + q @ dk.T
    if db is not None:
        ds = db if ds is None else ds + db
    t = jnp.zeros_like(p) if ds is None else p * ds
    if dw is not None:
        t = t + g * dw[None, :]
    return t


def _finish(numerator, total, r, normalization, uniform_m=None):
    """Output and log-normaliser of a row from Σ E v, Σ E and the shift r (``uniform_m``: the
    number of keys when the weights are uniform and were left out of E)."""
    safe = jnp.where(total > 0, total, 1.0)
    if normalization == "softmax":
        out = numerator / safe[:, None]
    else:
        scale = jnp.exp(r) if uniform_m is None else jnp.exp(r) / uniform_m
        out = numerator * scale[:, None]
    if uniform_m is not None:
        total = total / uniform_m
    log_normaliser = jnp.where(total > 0, r + jnp.log(safe), -jnp.inf)
    return out, log_normaliser


# ----------------------------------------------------------------------------------------------
# The dense path: forward and tangent of whole rows, a tile of rows at a time.


def _dense_rows(q, k, v, w, b, index, dq, dk, dv, dw, db, mask, normalization):
    """Output and (if any tangent is non-zero) tangent of one tile of query rows."""
    s = _scores(q, k, b, _admissible(q.shape[0], k.shape[0], index, mask))
    e, r = _row_stats(s, w)
    uniform_m = k.shape[0] if w is None else None
    total = _row_sums(e)
    out, _ = _finish(e @ v, total, r, normalization, uniform_m)
    if dq is None and dk is None and dv is None and dw is None and db is None:
        return out, None
    safe = jnp.where(total > 0, total, 1.0)
    g = None if dw is None else jnp.exp(s - r[:, None])
    t = _weights_tangent(e, g, q, k, dq, dk, db, dw)
    numerator = t @ v if dv is None else t @ v + e @ dv
    if normalization == "softmax":
        tangent = (numerator - out * _row_sums(t)[:, None]) / safe[:, None]
    else:
        scale = jnp.exp(r) if uniform_m is None else jnp.exp(r) / uniform_m
        tangent = numerator * scale[:, None]
    return out, tangent


def _dense(q, k, v, w, b, offset, tangents, mask, normalization):
    n = q.shape[0]
    m = k.shape[0]
    index = jnp.arange(n, dtype=offset.dtype) + offset
    rows = max(1, DENSE_TILE // max(m, 1))
    dq, dk, dv, dw, db = tangents
    if n <= rows:
        return _dense_rows(q, k, v, w, b, index, dq, dk, dv, dw, db, mask, normalization)
    whole = n - n % rows

    def tiles(a):
        return None if a is None else a[:whole].reshape(-1, rows, *a.shape[1:])

    def one_tile(per_tile):
        qt, it, dqt, bt, dbt = per_tile
        return _dense_rows(qt, k, v, w, bt, it, dqt, dk, dv, dw, dbt, mask, normalization)

    out, tangent = jax.lax.map(one_tile, (tiles(q), tiles(index), tiles(dq), tiles(b), tiles(db)))
    out = out.reshape(whole, -1)
    tangent = None if tangent is None else tangent.reshape(whole, -1)
    if whole == n:
        return out, tangent

    def rest(a):
        return None if a is None else a[whole:]

    out_rest, tangent_rest = _dense_rows(
        q[whole:],
        k,
        v,
        w,
        rest(b),
        index[whole:],
        rest(dq),
        dk,
        dv,
        dw,
        rest(db),
        mask,
        normalization,
    )
    out = jnp.concatenate([out, out_rest])
    if tangent is not None:
        tangent = jnp.concatenate([tangent, tangent_rest])
    return out, tangent


# ----------------------------------------------------------------------------------------------
# The blocked path: online softmax forward; tangent recomputed tile by tile.


def _pad_rows(a, rows: int):
    if a is None:
        return None
    pad = rows - a.shape[0]
    if pad == 0:
        return a
    return jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1))


def _blocked_layout(q, k, v, w, b, offset, block):
    n, m = q.shape[0], k.shape[0]
    if w is None:
        w = jnp.full((m,), 1.0 / m, q.dtype)
    bq, bk = min(block, n), min(block, m)
    nq, nk = -(-n // bq), -(-m // bk)
    layout = dict(
        q=_pad_rows(q, nq * bq).reshape(nq, bq, -1),
        q_index=(jnp.arange(nq * bq, dtype=offset.dtype) + offset).reshape(nq, bq),
        k=_pad_rows(k, nk * bk).reshape(nk, bk, -1),
        v=_pad_rows(v, nk * bk).reshape(nk, bk, -1),
        w=_pad_rows(w, nk * bk).reshape(nk, bk),
        k_index=jnp.arange(nk * bk, dtype=offset.dtype).reshape(nk, bk),
    )
    if b is not None:
        b = jnp.pad(b, [(0, nq * bq - n), (0, nk * bk - m)])
        layout["b"] = b.reshape(nq, bq, nk, bk).transpose(0, 2, 1, 3)
    return layout, (n, m, bq, bk, nq, nk)


def _block_scores(qb, qi, kb, kj, bb, m, mask):
    """Scores of one (query block, key block) tile; padding keys and masked keys get −∞."""
    admissible = kj[None, :] < m
    if mask == "causal":
        admissible = admissible & (kj[None, :] <= qi[:, None])
    elif mask == "strict":
        admissible = admissible & (kj[None, :] < qi[:, None])
    return _scores(qb, kb, bb, admissible)


def _blocked_forward(layout, dims, mask, normalization):
    """Online softmax: running row maximum, Σ E v and Σ E rescaled as the maximum grows."""
    n, m, bq, bk, nq, nk = dims
    dtype = layout["q"].dtype
    e_dim = layout["v"].shape[-1]

    def one_query_block(args):
        qb, qi, bias_row = args

        def one_key_block(carry, key_block):
            running_max, numerator = carry
            kb, vb, wb, kj, bb = key_block
            s = _block_scores(qb, qi, kb, kj, bb, m, mask)
            new_max = jnp.maximum(running_max, jax.lax.stop_gradient(jnp.max(s, axis=1)))
            shift = jnp.where(jnp.isfinite(new_max), new_max, 0.0)
            seen = jnp.isfinite(running_max)
            rescale = jnp.where(seen, jnp.exp(jnp.where(seen, running_max, 0.0) - shift), 0.0)
            e = jnp.exp(s - shift[:, None]) * wb[None, :]
            numerator = numerator * rescale[:, None] + e @ _with_ones(vb)
            return (new_max, numerator), None

        init = (jnp.full((bq,), -jnp.inf, dtype), jnp.zeros((bq, e_dim + 1), dtype))
        xs = (layout["k"], layout["v"], layout["w"], layout["k_index"], bias_row)
        (running_max, numerator), _ = jax.lax.scan(one_key_block, init, xs)
        r = jnp.where(jnp.isfinite(running_max), running_max, 0.0)
        return _finish(numerator[:, :-1], numerator[:, -1], r, normalization)

    out, lse = jax.lax.map(one_query_block, (layout["q"], layout["q_index"], layout.get("b")))
    return out.reshape(nq * bq, -1)[:n], lse.reshape(-1)[:n]


def _blocked_tangent(layout, dims, out, lse, tangent_layout, mask, normalization):
    """Tangent of the blocked output, recomputing each tile from the saved log-normaliser.

    Both loops are checkpointed, so the transpose (reverse mode) recomputes E tile by tile and
    stores only the per-row quantities: O(n·e) memory, never n × m.
    """
    n, m, bq, bk, nq, nk = dims
    e_dim = layout["v"].shape[-1]
    dtype = out.dtype
    out_blocks = _pad_rows(out, nq * bq).reshape(nq, bq, -1)
    lse_blocks = _pad_rows(lse, nq * bq).reshape(nq, bq)

    @jax.checkpoint
    def one_query_block(args):
        qb, qi, ob, lb, bias_row, dqb, dbias_row = args
        finite = jnp.isfinite(lb)
        shift = jnp.where(finite, lb, 0.0)

        @jax.checkpoint
        def one_key_block(accumulated, key_block):
            kb, vb, wb, kj, bb, dkb, dvb, dwb, dbb = key_block
            s = _block_scores(qb, qi, kb, kj, bb, m, mask)
            g = jnp.where(finite[:, None], jnp.exp(s - shift[:, None]), 0.0)
            p = g * wb[None, :]
            t = _weights_tangent(p, g, qb, kb, dqb, dkb, dbb, dwb)
            contribution = t @ _with_ones(vb)
            if dvb is not None:
                contribution = contribution + jnp.pad(p @ dvb, [(0, 0), (0, 1)])
            return accumulated + contribution, None

        xs = (
            layout["k"],
            layout["v"],
            layout["w"],
            layout["k_index"],
            bias_row,
            tangent_layout.get("k"),
            tangent_layout.get("v"),
            tangent_layout.get("w"),
            dbias_row,
        )
        accumulated, _ = jax.lax.scan(one_key_block, jnp.zeros((bq, e_dim + 1), dtype), xs)
        if normalization == "softmax":
            return accumulated[:, :-1] - ob * accumulated[:, -1:]
        return accumulated[:, :-1] * jnp.where(finite, jnp.exp(shift), 0.0)[:, None]

    tangent = jax.lax.map(
        one_query_block,
        (
            layout["q"],
            layout["q_index"],
            out_blocks,
            lse_blocks,
            layout.get("b"),
            tangent_layout.get("q"),
            tangent_layout.get("b"),
        ),
    )
    return tangent.reshape(nq * bq, -1)[:n]


# ----------------------------------------------------------------------------------------------
# The custom JVP that both paths share.


@functools.partial(jax.custom_jvp, nondiff_argnums=(6, 7, 8))
def _kernel(q, k, v, w, b, offset, mask, normalization, block):
    if block is None:
        out, _ = _dense(q, k, v, w, b, offset, (None,) * 5, mask, normalization)
        return out
    layout, dims = _blocked_layout(q, k, v, w, b, offset, block)
    out, _ = _blocked_forward(layout, dims, mask, normalization)
    return out


def _nonzero(tangent):
    return None if isinstance(tangent, SymbolicZero) else tangent


def _kernel_jvp(mask, normalization, block, primals, tangents):
    q, k, v, w, b, offset = primals
    dq, dk, dv, dw, db, _ = (_nonzero(t) for t in tangents)
    if b is None:
        db = None
    if block is None:
        out, tangent = _dense(q, k, v, w, b, offset, (dq, dk, dv, dw, db), mask, normalization)
    else:
        layout, dims = _blocked_layout(q, k, v, w, b, offset, block)
        out, lse = _blocked_forward(layout, dims, mask, normalization)
        tangent_layout, _ = _blocked_layout(
            q if dq is None else dq,
            k if dk is None else dk,
            v if dv is None else dv,
            w if dw is None else dw,
            b if db is None else db,
            offset,
            block,
        )
        given = dict(
            q=dq is not None,
            k=dk is not None,
            v=dv is not None,
            w=dw is not None,
            b=db is not None,
        )
        tangent_layout = {key: tangent_layout[key] for key in given if given[key]}
        tangent = _blocked_tangent(layout, dims, out, lse, tangent_layout, mask, normalization)
    if tangent is None:
        tangent = jnp.zeros_like(out)
    return out, tangent


_kernel.defjvp(_kernel_jvp, symbolic_zeros=True)


# ----------------------------------------------------------------------------------------------
# Public entry points.


def _check_normalization(normalization):
    if normalization not in ("softmax", "sum", "hardmax"):
        raise ValueError(
            "normalization: expected 'softmax' (SA), 'sum' (USA: no denominator) or 'hardmax', "
            f"got {normalization!r}"
        )


def _check_mask(mask):
    if mask not in (None, "causal", "strict"):
        raise ValueError(
            f"mask: expected None, 'causal' (j <= i) or 'strict' (j < i), got {mask!r}"
        )


def _check_hardmax_tol(hardmax_tol):
    if not is_traced(hardmax_tol):
        check_finite_scalar(hardmax_tol, "hardmax_tol")
        if float(hardmax_tol) < 0:
            raise ValueError(f"hardmax_tol: expected a tie tolerance >= 0, got {hardmax_tol}")


def _prepare(queries, keys, values, weights, bias):
    # Concrete (eager) calls: real, finite inputs (NaN would only come back as a NaN row).
    queries, keys, values = (
        check_finite_array(a, name)
        for a, name in ((queries, "queries"), (keys, "keys"), (values, "values"))
    )
    if bias is not None:
        bias = check_finite_array(bias, "bias", allow_negative_infinity=True)
    if jnp.ndim(queries) != 2:
        raise ValueError(f"queries: expected shape (n, k), got {jnp.shape(queries)}")
    n, k = jnp.shape(queries)
    m = jnp.shape(keys)[0]
    if jnp.ndim(keys) != 2 or jnp.shape(keys)[1] != k:
        raise ValueError(
            f"keys: expected {k} columns to match queries {jnp.shape(queries)}, "
            f"got {jnp.shape(keys)}"
        )
    if jnp.ndim(values) != 2 or jnp.shape(values)[0] != m:
        raise ValueError(
            f"values: expected {m} rows to match keys {jnp.shape(keys)}, got {jnp.shape(values)}"
        )
    dtype = jnp.result_type(queries, keys, values)
    if weights is not None and not is_traced(weights):
        weights = check_measure(weights, m)
    elif weights is not None and jnp.shape(weights) != (m,):
        # Traced (every field's call inside a solver): the shape only; values are left to NaN
        # propagation (docs/conventions.md#argument-checking).
        raise ValueError(
            f"weights: expected shape ({m},) to match the {m} keys, got {jnp.shape(weights)}"
        )
    if bias is not None and jnp.shape(bias) != (n, m):
        raise ValueError(f"bias: expected shape ({n}, {m}) (queries × keys), got {jnp.shape(bias)}")
    cast = lambda a: None if a is None else jnp.asarray(a, dtype)  # noqa: E731
    return cast(queries), cast(keys), cast(values), cast(weights), cast(bias)


def attention(
    queries: Float[Array, "n k"],
    keys: Float[Array, "m k"],
    values: Float[Array, "m e"],
    *,
    weights: Float[Array, " m"] | None = None,
    bias: Float[Array, "n m"] | None = None,
    mask: Mask = None,
    normalization: Normalization = "softmax",
    block_size: int | None = None,
    query_offset=0,
    hardmax_tol=0.0,
) -> Float[Array, "n e"]:
    r"""o_i = Σ_j a_ij v_j: the kernel every attention field of attnflow is computed by.

    With s_ij = ⟨q_i, k_j⟩ + b_ij over the admissible keys j (see ``mask``):

        "softmax":  a_ij = w_j e^{s_ij} / Σ_k w_k e^{s_ik}   (SA, paper (2.3)–(2.4)),
        "sum":      a_ij = w_j e^{s_ij}                      (USA, §3.3, with w_j = 1/n),
        "hardmax":  a_ij = w_j 1{j ∈ C_i} / Σ_{k ∈ C_i} w_k,  C_i = {j : s_ij ≥ max_k s_ik − tol}.

    See the module docstring for the dense and blocked paths and the derivative rule.

    Args:
        queries: (n, k) rows q_i (with β already multiplied in).
        keys: (m, k) rows k_j.
        values: (m, e) rows v_j.
        weights: (m,) non-negative measure weights w_j; ``None`` means 1/m.
        bias: (n, m) additive scores b_ij; −∞ excludes an entry.
        mask: ``None``, ``"causal"`` (j ≤ i + offset) or ``"strict"`` (j < i + offset).
        normalization: ``"softmax"``, ``"sum"`` or ``"hardmax"``.
        block_size: ``None`` for the dense path, or the block size of the blocked path.
        query_offset: global index of query 0 (queries sharded across devices).
        hardmax_tol: tie tolerance of ``"hardmax"``.

    Returns:
        (n, e) outputs o_i; a row without admissible keys gives 0.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> out = af.attention(x, x, x)
        >>> w = jnp.exp(1.0) / (jnp.exp(1.0) + 1.0)
        >>> bool(jnp.allclose(out[0], jnp.array([w, 1 - w])))
        True
    """
    _check_normalization(normalization)
    _check_mask(mask)
    _check_hardmax_tol(hardmax_tol)
    check_block_size(block_size)
    queries, keys, values, weights, bias = _prepare(queries, keys, values, weights, bias)
    if normalization == "hardmax":
        a = _matrix(queries, keys, weights, bias, mask, "hardmax", query_offset, hardmax_tol)
        return a @ values
    offset = jnp.asarray(query_offset, jnp.int32)
    return _kernel(queries, keys, values, weights, bias, offset, mask, normalization, block_size)


def attention_matrix(
    queries: Float[Array, "n k"],
    keys: Float[Array, "m k"],
    *,
    weights: Float[Array, " m"] | None = None,
    bias: Float[Array, "n m"] | None = None,
    mask: Mask = None,
    normalization: Normalization = "softmax",
    query_offset=0,
    hardmax_tol=0.0,
) -> Float[Array, "n m"]:
    """The dense (n, m) matrix a_ij of :func:`attention` (zero where masked); same arguments.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> a = af.attention_matrix(x, x, mask="causal")
        >>> a.tolist()[0]
        [1.0, 0.0]
    """
    _check_normalization(normalization)
    _check_mask(mask)
    _check_hardmax_tol(hardmax_tol)
    queries, keys = check_finite_array(queries, "queries"), check_finite_array(keys, "keys")
    values = jnp.zeros((jnp.shape(keys)[0], 1), jnp.result_type(queries, keys))
    queries, keys, _, weights, bias = _prepare(queries, keys, values, weights, bias)
    return _matrix(queries, keys, weights, bias, mask, normalization, query_offset, hardmax_tol)


def _matrix(queries, keys, weights, bias, mask, normalization, query_offset, hardmax_tol):
    """:func:`attention_matrix` of checked, prepared arguments (as :func:`_prepare` returns)."""
    n, m = queries.shape[0], keys.shape[0]
    if weights is None:
        weights = jnp.full((m,), 1.0 / m, queries.dtype)
    index = jnp.arange(n, dtype=jnp.int32) + jnp.asarray(query_offset, jnp.int32)
    s = _scores(queries, keys, bias, _admissible(n, m, index, mask))
    if normalization == "hardmax":
        s = jax.lax.stop_gradient(s)
        s = jnp.where(weights[None, :] > 0, s, -jnp.inf)
        top = jnp.max(s, axis=-1, keepdims=True)
        selected = jnp.where(jnp.isfinite(top) & (s >= top - hardmax_tol), weights[None, :], 0.0)
        total = jnp.sum(selected, axis=-1, keepdims=True)
        return selected / jnp.where(total > 0, total, 1.0)
    e, r = _row_stats(s, weights)
    if normalization == "softmax":
        total = jnp.sum(e, axis=-1, keepdims=True)
        return e / jnp.where(total > 0, total, 1.0)
    return e * jnp.exp(r)[:, None]


__all__ = ["attention", "attention_matrix"]
