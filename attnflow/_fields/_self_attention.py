"""Vector fields on (S^{d-1})^n with diffrax's signature ``field(t, x, args) -> (n, d)``."""

import abc
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import check_beta, check_matrix, check_shape_tokens, check_weights
from .._energy import AbstractEnergy
from .._metric import AbstractMetric, riemannian_gradient
from .._sphere import project_tangent
from ._blocked import AUTO_BLOCK_THRESHOLD, DEFAULT_BLOCK_SIZE, blocked_attention


class AbstractField(eqx.Module):
    """A tangent vector field on (S^{d-1})^n: ``field(t, x, args)`` returns (n, d), row i ⟂ x_i.

    Fields act on ONE system ``x`` of shape (n, d); batch with ``jax.vmap``. Off the sphere they
    use P_x = I − x xᵀ/|x|² so that |x_i| is conserved exactly (MATH.md §1.12).

    Weighted empirical measures μ = Σ_i w_i δ_{x_i}: the attention fields and
    :class:`GradientFlow` read ``args`` as ``None`` (uniform weights 1/n), a (n,) array of
    non-negative weights, or a dict whose ``"weights"`` entry is one of those. So
    ``solve(field, x0, t1, args=w)`` evolves a weighted measure; weights are constant in time
    (the continuity equation moves mass, it does not create it).
    """

    @abc.abstractmethod
    def __call__(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        raise NotImplementedError


def _as(array, x):
    """Parameters follow the tokens' precision (float32 tokens stay float32 under x64)."""
    return None if array is None else jnp.asarray(array, dtype=x.dtype)


def _logits(beta, Q, K, x):
    """β ⟨Q x_i, K x_j⟩ as an (n, n) matrix: x Qᵀ (x Kᵀ)ᵀ, so rectangular Q, K cost O(n k d)."""
    queries = x if Q is None else x @ _as(Q, x).T
    keys = x if K is None else x @ _as(K, x).T
    return _as(beta, x) * (queries @ keys.T)


def _causal_mask(n: int):
    return jnp.tril(jnp.ones((n, n), dtype=bool))


DENSE_TILE = 2**20
"""Entries of the (rows, m) logit tile the dense path works on at once: it takes
DENSE_TILE // m query rows (at least one) against all m keys (exact two-pass softmax), so one
expression up to n = 1024, 256 rows at n = 4096, 64 at 16384 (4 MiB tiles in float32).

Measured on a 2-core CPU (benchmarks/RESULTS_scaling.md, d = 64, float32): evaluated as one
expression, the n × n logits and exponentials leave the cache past n ≈ 2000 and XLA's CPU
backend fuses the whole field into one loop nest that reached 30% of the matmul peak at
n = 4096–16384; in tiles of rows the two products run as matrix multiplications again.
"""


def _dense_attention(beta, queries, keys, values, weights, normalization: str, causal: bool):
    """Σ_j a_ij v_j over full rows of the logits, a tile of ``DENSE_TILE`` entries at a time.

    Each row is the exact two-pass softmax (row maximum, then e^{s − max}); blocking only the
    queries changes no arithmetic, it bounds the forward temporaries by (rows, m) instead of
    (n, m). Reverse mode still stores every block's exponentials: n × m in all, as a dense
    field must.
    """
    n, k = queries.shape
    m = keys.shape[0]

    def rows(q, index):
        logits = beta * (q @ keys.T)
        if causal:
            logits = jnp.where(jnp.arange(m)[None, :] <= index[:, None], logits, -jnp.inf)
        row_max = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
        e = jnp.exp(logits - row_max)
        if weights is not None:
            e = e * weights[None, :]
        out = e @ values
        if normalization == "softmax":
            return out / jnp.sum(e, axis=-1, keepdims=True)
        return out * (jnp.exp(row_max) if weights is not None else jnp.exp(row_max) / m)

    index = jnp.arange(n)
    block = max(1, DENSE_TILE // m)
    if n <= block:
        return rows(queries, index)
    # Whole blocks through lax.map, the remainder in one smaller call: no padded rows.
    whole = n - n % block
    out = jax.lax.map(
        lambda q_and_index: rows(*q_and_index),
        (queries[:whole].reshape(-1, block, k), index[:whole].reshape(-1, block)),
    ).reshape(whole, -1)
    if whole == n:
        return out
    return jnp.concatenate([out, rows(queries[whole:], index[whole:])])


def _weights_from_args(args, n: int):
    """The weights a field reads from ``args``: None, a (n,) array, or {"weights": array}."""
    if isinstance(args, dict):
        args = args.get("weights")
    if args is None:
        return None
    if jnp.ndim(args) != 1:
        raise ValueError(
            "args: attention fields read args as None, a (n,) array of weights or a dict with "
            f"key 'weights'; got {type(args).__name__} of shape {jnp.shape(args)}"
        )
    return check_weights(args, n, "args (weights)")


class SelfAttention(AbstractField):
    r"""Self-attention dynamics, paper (2.3) (SA) and its unnormalised variant (USA):

        ẋ_i = P^⊥_{x_i} ( Σ_j a_ij V x_j ),   a_ij = exp(β⟨Q x_i, K x_j⟩) / Z_i,

    with Z_i = Σ_j exp(β⟨Q x_i, K x_j⟩) for ``normalization="softmax"`` (SA, (2.4)) and Z_i = n
    for ``normalization="n"`` (USA, §3.3). With ``causal=True`` token i attends only to j ≤ i
    (KPR24, MATH.md §1.7; the USA variant keeps the factor 1/n). Missing Q, K, V are the identity.

    Weighted measures (``args`` = weights w, see :class:`AbstractField`): with
    s_ij = β⟨Qx_i, Kx_j⟩, SA becomes Σ_j w_j e^{s_ij} V x_j / Σ_j w_j e^{s_ij} and USA
    Σ_j w_j e^{s_ij} V x_j: the mean-field field 𝒳[μ] of (3.3)/(3.8) at μ = Σ_j w_j δ_{x_j}.
    Uniform weights w_j = 1/n give the fields above.

    Large n: with ``block_size`` set, or when ``block_size`` is None and n > 4096
    (``AUTO_BLOCK_THRESHOLD``), the output is computed by :func:`attnflow.blocked_attention`
    (online softmax over key blocks, memory O(n·d + block²), never n × n). Below that the dense
    path computes each row's exact two-pass softmax (row maximum, then exponentials) over all n
    keys; for n > 1024 it does so a few query rows at a time (``jax.lax.map`` over tiles of
    about 2^20 logits, ``DENSE_TILE``; 256 rows at n = 4096), which keeps XLA's CPU backend on
    its matrix-multiply kernels and bounds the forward temporaries by the tile (reverse mode
    still stores the n × n exponentials). The blocked and dense
    paths agree to rounding; ``logits`` and ``attention_matrix`` are always dense.

    Softmax weights are computed with the row maximum subtracted, so SA is finite for any β in
    float32 (β = 100 included). USA's values genuinely grow like e^β and overflow float32 past
    β ≈ 88.

    Args:
        beta: inverse temperature β ≥ 0 (scalar). The d^{-1/2} of practice is absorbed into β.
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

    beta: Float[Array, ""]
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
        self.beta = jnp.asarray(check_beta(beta))
        if normalization not in ("softmax", "n"):
            raise ValueError(
                f"normalization: expected 'softmax' (SA) or 'n' (USA), got {normalization!r}"
            )
        for name, matrix in (("Q", Q), ("K", K), ("V", V)):
            if matrix is not None:
                check_matrix(matrix, name, "(d, d)" if name == "V" else "(k, d)")
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
        self.causal = bool(causal)
        if block_size is not None and (
            not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1
        ):
            raise ValueError(f"block_size: expected None or a positive integer, got {block_size!r}")
        self.block_size = block_size

    @property
    def dim(self) -> int | None:
        for m in (self.Q, self.K, self.V):
            if m is not None:
                return m.shape[1]
        return None

    def _check(self, x):
        check_shape_tokens(x)
        if self.dim is not None and x.shape[1] != self.dim:
            raise ValueError(
                f"x: tokens have dimension d = {x.shape[1]} but Q, K, V act on d = {self.dim}"
            )

    def logits(self, x: Float[Array, "n d"]) -> Float[Array, "n n"]:
        """β⟨Q x_i, K x_j⟩."""
        self._check(x)
        return _logits(self.beta, self.Q, self.K, x)

    def attention_matrix(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "n n"]:
        """a_ij of (2.5): row-stochastic for SA; exp(logits)/n for USA (causal: zero for j > i).

        With ``weights``: w_j e^{s_ij} / Σ_k w_k e^{s_ik} (SA) or w_j e^{s_ij} (USA).
        """
        logits = self.logits(x)
        mask = _causal_mask(x.shape[0]) if self.causal else None
        if weights is not None:
            w = check_weights(weights, x.shape[0])
            if self.causal:
                logits = jnp.where(mask, logits, -jnp.inf)
            row_max = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
            e = jnp.exp(logits - row_max) * w[None, :]
            if self.normalization == "softmax":
                return e / jnp.sum(e, axis=-1, keepdims=True)
            return e * jnp.exp(row_max)
        if self.normalization == "softmax":
            return jax.nn.softmax(logits, axis=-1, where=mask)
        e = jnp.exp(logits) / x.shape[0]
        return e if mask is None else jnp.where(mask, e, 0.0)

    def attention_output(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "n d"]:
        """Σ_j a_ij V x_j before the tangent projection (one head of (2.7)); ``weights`` as in
        :meth:`attention_matrix`. Blocked above the size threshold (see the class docstring)."""
        n = x.shape[0]
        if self.block_size is not None or n > AUTO_BLOCK_THRESHOLD:
            return self._blocked_output(x, weights)
        self._check(x)
        w = None if weights is None else _as(check_weights(weights, n), x)
        queries = x if self.Q is None else x @ _as(self.Q, x).T
        keys = x if self.K is None else x @ _as(self.K, x).T
        values = x if self.V is None else x @ _as(self.V, x).T
        return _dense_attention(
            _as(self.beta, x), queries, keys, values, w, self.normalization, self.causal
        )

    def _blocked_output(self, x, weights):
        self._check(x)
        w = None if weights is None else check_weights(weights, x.shape[0])
        queries = x if self.Q is None else x @ self.Q.T
        keys = x if self.K is None else x @ self.K.T
        values = x if self.V is None else x @ _as(self.V, x).T
        return blocked_attention(
            self.beta * queries,
            keys,
            values,
            w,
            normalization=self.normalization,
            causal=self.causal,
            block_size=self.block_size or DEFAULT_BLOCK_SIZE,
        )

    def __call__(self, t, x, args=None):
        return project_tangent(x, self.attention_output(x, _weights_from_args(args, x.shape[0])))


class MultiHeadAttention(AbstractField):
    """Multi-head self-attention, paper (2.7): one projection outside the sum over heads,

        ẋ_i = P^⊥_{x_i} ( Σ_h Σ_j a^h_ij V_h x_j ).

    Args:
        heads: a sequence of :class:`SelfAttention` heads acting on the same d.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 6, 4)
        >>> mha = af.MultiHeadAttention([af.SelfAttention(1.0), af.SelfAttention(2.0)])
        >>> mha(0.0, x, None).shape
        (6, 4)
    """

    heads: tuple[SelfAttention, ...]

    def __init__(self, heads):
        heads = tuple(heads)
        if not heads:
            raise ValueError("heads: expected at least one SelfAttention head, got none")
        for i, head in enumerate(heads):
            if not isinstance(head, SelfAttention):
                raise ValueError(f"heads[{i}]: expected a SelfAttention, got {type(head).__name__}")
        dims = {h.dim for h in heads} - {None}
        if len(dims) > 1:
            raise ValueError(f"heads: all heads must act on the same d, got dimensions {dims}")
        self.heads = heads

    def __call__(self, t, x, args=None):
        weights = _weights_from_args(args, x.shape[0])
        total = sum(head.attention_output(x, weights) for head in self.heads)
        return project_tangent(x, total)


class GradientFlow(AbstractField):
    """The Riemannian gradient flow ẋ = ± grad_metric E(x) (ascent by default).

    ``GradientFlow(InteractionEnergy(β), WassersteinMetric())`` is USA (Lemma 3.6, (3.11));
    ``GradientFlow(InteractionEnergy(β, A), AttentionMetric(β, A))`` is SA with V = A = QᵀK
    symmetric (§3.4, (3.12)). ``descent=True`` flips the sign (the repulsive V = −I case).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(1), 5, 3)
        >>> flow = af.GradientFlow(af.InteractionEnergy(2.0), af.AttentionMetric(2.0))
        >>> bool(jnp.allclose(flow(0.0, x, None), af.SelfAttention(2.0)(0.0, x, None), atol=1e-5))
        True
    """

    energy: AbstractEnergy
    metric: AbstractMetric
    descent: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if not isinstance(self.energy, AbstractEnergy):
            raise ValueError(
                f"energy: expected an AbstractEnergy, got {type(self.energy).__name__}"
            )
        if not isinstance(self.metric, AbstractMetric):
            raise ValueError(
                f"metric: expected an AbstractMetric, got {type(self.metric).__name__}"
            )

    def __call__(self, t, x, args=None):
        check_shape_tokens(x)
        weights = _weights_from_args(args, x.shape[0])
        grad = riemannian_gradient(self.energy, self.metric, x, weights)
        return -grad if self.descent else grad
