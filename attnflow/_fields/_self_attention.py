"""Softmax self-attention (SA, paper (2.3)), its unnormalised variant (USA) and multi-head
attention (2.7): the attention fields every other variant is built like."""

import warnings
from collections.abc import Iterator
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._attention_scaling import long_context_beta
from .._check import (
    as_array,
    check_beta,
    check_block_size,
    check_bool,
    check_finite_scalar,
    check_matrix,
    check_real_values,
    check_sa_normalization,
    hyperparameter,
)
from ._base import AbstractAttention, AttentionScores, check_real


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
    float32 (β = 100 included). USA's values genuinely grow like e^{|β|} and overflow float32
    past |β| ≈ 88. For β < 0 the weights decrease with the similarity ⟨Qx_i, Kx_j⟩: each token
    still moves towards a convex combination of the values, weighted towards the tokens least
    like it (arXiv:2507.22857; on the circle it synchronises for β ≥ −0.16 but not below −2/3).

    Trained parameters: Q, K and V are arrays, so ``eqx.filter_grad`` and optax train them. β
    given as a Python number is a hyperparameter: it stays a ``float``, which optax leaves
    unchanged; to train β, pass it as an array, ``SelfAttention(jnp.asarray(1.0), Q, K, V)``
    (docs/conventions.md, "Which parameters are trained"). ``jax.grad`` with respect to a β
    that is traced works either way.

    Args:
        beta: inverse temperature β (scalar, finite, of either sign; β < 0: attention favours
            dissimilar tokens, docs/conventions.md "Negative β"). The d^{-1/2} of practice is
            absorbed into β. A Python number is a fixed hyperparameter, an array a trained
            parameter.
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
        self.beta = hyperparameter(check_beta(beta, signed=True))
        check_sa_normalization(normalization)
        Q, K, V = (
            None
            if m is None
            else check_matrix(check_real(m, name), name, "(d, d)" if name == "V" else "(k, d)")
            for name, m in (("Q", Q), ("K", K), ("V", V))
        )
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

    @classmethod
    def long_context(cls, gamma, n, Q=None, K=None, V=None, **options) -> "SelfAttention":
        r"""Self-attention with the long-context scaling β = γ log n (arXiv:2510.05554; Thm 7
        of arXiv:2512.01868): ``SelfAttention(long_context_beta(gamma, n), Q, K, V, **options)``
        (:func:`attnflow.theory.long_context_beta`). For equiangular tokens at inner product ρ,
        γ = 1/(1 − ρ) separates attention that mixes all n tokens (γ below) from attention that
        is nearly the identity (γ above).

        Args:
            gamma: γ ≥ 0 (a number: β stays a hyperparameter; an array: a parameter).
            n: the context length the scaling is built for (an integer ≥ 1).
            Q, K, V, options: as for :class:`SelfAttention` (``normalization``, ``causal``,
                ``block_size``).

        Example:
            >>> import math, attnflow as af
            >>> af.SelfAttention.long_context(1.5, 100).beta == 1.5 * math.log(100)
            True
        """
        return cls(long_context_beta(gamma, n), Q, K, V, **options)

    @property
    def dim(self) -> int | None:
        """The token dimension d fixed by Q, K or V (None when all are the identity)."""
        for m in (self.Q, self.K, self.V):
            if m is not None:
                return m.shape[1]
        return None

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
    r"""Multi-head self-attention, paper (2.7) of arXiv:2312.10794: H heads summed, with one
    tangent projection outside the sum,

        ẋ_i = P^⊥_{x_i} ( c Σ_h Σ_j a^h_ij V_h x_j ),   a^h_ij = e^{β_h⟨Q_h x_i, K_h x_j⟩} / Z^h_i,

    with Z^h_i = Σ_j e^{β_h⟨Q_h x_i, K_h x_j⟩} in a ``"softmax"`` head (SA) and Z^h_i = n in an
    ``"n"`` head (USA); a causal head sums over j ≤ i only. c is ``scale`` (1 unless given).

    The heads are stored as stacked arrays, Q_h, K_h the rows of Q, K: (H, k, d) and V_h of
    V: (H, d, d) (``None``: the identity in every head), and computed together: the scores carry
    a head axis (:class:`AttentionScores`), the base class maps the one kernel over it and sums
    once, at cost O(H(n²k + n d²)) and no Python loop over the heads. Two constructions of the
    same field:

    - ``MultiHeadAttention(beta, Q, K, V, scale=c)``: from the stacked arrays, with β shared by
      the heads or one per head (the random model of :func:`random_multihead_attention` stacks
      these once more over the layers).
    - :meth:`MultiHeadAttention.from_heads`: from a sequence of :class:`SelfAttention` heads on
      the same d, each with its own β, normalisation and mask (heads of different head
      dimensions k padded with zero rows). The former call form ``MultiHeadAttention(heads)``
      still works, with a DeprecationWarning.

    ``logits`` and ``attention_matrix`` are (H, n, n), in head order; :attr:`heads` gives the
    heads back as :class:`SelfAttention` fields. Heads that differ in mask or normalisation are
    evaluated in runs of consecutive alike heads.

    Trained parameters: Q, K and V are arrays, so ``eqx.filter_grad`` and optax train them. β
    and c given as Python numbers are hyperparameters (floats, left unchanged by optax); pass
    arrays to train them (docs/conventions.md, "Which parameters are trained"). From heads, β is
    a tuple of floats when every head's β is a number, else an (H,) array.

    Args:
        beta: inverse temperature β (finite, either sign): a scalar shared by the heads, or one
            per head (H,).
        Q, K: (H, k, d) stacked query and key matrices, or ``None`` (the identity, k = d).
        V: (H, d, d) stacked value matrices, or ``None`` (the identity).
        scale: the scalar c in front of the sum over heads (default 1).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA), for every head or one per head
            (default ``"softmax"``).
        causal: mask j > i, for every head or one per head (default False).
        block_size: ``None`` (dense up to n = 4096, blocked above) or a positive integer to force
            the blocked kernel with that block size.
        heads: deprecated, use :meth:`MultiHeadAttention.from_heads`.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 6, 4)
        >>> mha = af.MultiHeadAttention.from_heads([af.SelfAttention(1.0), af.SelfAttention(2.0)])
        >>> mha(0.0, x, None).shape, mha.attention_matrix(x).shape
        ((6, 4), (2, 6, 6))
        >>> Q = jr.normal(jr.key(1), (3, 2, 4))  # H = 3 heads, k = 2, d = 4
        >>> stacked = af.MultiHeadAttention(1.0, Q, Q, scale=0.5)
        >>> heads = [af.SelfAttention(1.0, Q[h], Q[h]) for h in range(3)]
        >>> heads = af.MultiHeadAttention.from_heads(heads)
        >>> bool(jnp.allclose(stacked(0.0, x), 0.5 * heads(0.0, x)))
        True
    """

    beta: float | tuple[float, ...] | Float[Array, ""] | Float[Array, " heads"]
    Q: Float[Array, "heads k d"] | None
    K: Float[Array, "heads k d"] | None
    V: Float[Array, "heads d d"] | None
    scale: float | Float[Array, ""]
    num_heads: int = eqx.field(static=True)
    normalization: str | tuple[str, ...] = eqx.field(static=True)
    causal: bool | tuple[bool, ...] = eqx.field(static=True)
    block_size: int | None = eqx.field(static=True)

    def __init__(
        self,
        beta=None,
        Q=None,
        K=None,
        V=None,
        *,
        scale=1.0,
        normalization="softmax",
        causal=False,
        block_size=None,
        heads=None,
    ):
        if heads is not None or _is_heads(beta):
            # Deprecated call forms MultiHeadAttention(heads) and MultiHeadAttention(heads=...).
            heads = _deprecated_heads(
                beta if heads is None else heads, heads, beta, Q, K, V, normalization, causal
            )
            beta, Q, K, V, normalization, causal, head_block = _stack_heads(heads)
            block_size = head_block if block_size is None else block_size
        elif beta is None:
            raise ValueError(
                "beta: expected β (a scalar shared by the heads, or one per head) with the "
                "stacked arrays Q, K, V; to build the field from SelfAttention heads use "
                "MultiHeadAttention.from_heads(heads)"
            )
        Q, K, V, num_heads = _check_stacked(Q, K, V)
        beta, num_heads = _check_head_betas(beta, num_heads)
        self.beta = beta
        self.Q, self.K, self.V = Q, K, V
        self.scale = hyperparameter(check_finite_scalar(scale, "scale"))
        self.num_heads = num_heads
        self.normalization = _per_head(
            normalization, "normalization", num_heads, check_sa_normalization
        )
        self.causal = _per_head(causal, "causal", num_heads, check_bool)
        self.block_size = check_block_size(block_size)

    @classmethod
    def from_heads(cls, heads, *, scale=1.0, block_size=None) -> "MultiHeadAttention":
        r"""The multi-head field of a sequence of :class:`SelfAttention` heads on the same d:
        their β, Q, K, V, normalisation and mask stacked per head (c = ``scale``). A missing Q,
        K or V is materialised as the identity unless every head lacks it; heads of different
        head dimensions k are padded with zero rows of Q_h and K_h (exact: a zero row adds
        nothing to ⟨Q_h x, K_h y⟩); the block size is the smallest a head asks for (or
        ``block_size``).

        Args:
            heads: a non-empty sequence of :class:`SelfAttention` heads acting on the same d.
            scale: the scalar c in front of the sum over heads (default 1).
            block_size: ``None`` (the smallest block size of the heads) or a positive integer.

        Example:
            >>> import jax.random as jr, attnflow as af
            >>> x = af.random_tokens(jr.key(0), 6, 4)
            >>> heads = [af.SelfAttention(1.0), af.SelfAttention(2.0)]
            >>> mha = af.MultiHeadAttention.from_heads(heads)
            >>> mha.num_heads, mha.beta
            (2, (1.0, 2.0))
        """
        beta, Q, K, V, normalization, causal, head_block = _stack_heads(heads)
        return cls(
            beta,
            Q,
            K,
            V,
            scale=scale,
            normalization=normalization,
            causal=causal,
            block_size=head_block if block_size is None else block_size,
        )

    @property
    def dim(self) -> int | None:
        """The token dimension d fixed by Q, K or V (None when all are the identity)."""
        for m in (self.Q, self.K, self.V):
            if m is not None:
                return m.shape[-1]
        return None

    @property
    def heads(self) -> tuple[SelfAttention, ...]:
        """The H heads as :class:`SelfAttention` fields (c folded into V_h; Q_h and K_h with the
        zero rows of padding, if any; ``None`` where every head has the identity)."""
        norms, causal = self._per_head_settings()
        scale_is_one = isinstance(self.scale, float) and self.scale == 1.0
        heads = []
        for h in range(self.num_heads):
            per_head = isinstance(self.beta, tuple) or jnp.ndim(self.beta) == 1
            beta = self.beta[h] if per_head else self.beta
            V = None if self.V is None else self.V[h]
            if not scale_is_one:
                d = self.dim
                V = self.scale * (jnp.eye(d, dtype=self._dtype()) if V is None else V)
            heads.append(
                SelfAttention(
                    beta,
                    None if self.Q is None else self.Q[h],
                    None if self.K is None else self.K[h],
                    V,
                    normalization=norms[h],
                    causal=causal[h],
                    block_size=self.block_size,
                )
            )
        return tuple(heads)

    def _dtype(self):
        arrays = [m for m in (self.Q, self.K, self.V) if m is not None]
        return jnp.result_type(*arrays) if arrays else jnp.result_type(float)

    def _per_head_settings(self):
        H = self.num_heads
        norms = self.normalization
        causal = self.causal
        return (
            norms if isinstance(norms, tuple) else (norms,) * H,
            causal if isinstance(causal, tuple) else (causal,) * H,
        )

    def scores(self, x, weights):
        """q^h_i = β_h Q_h x_i, k^h_j = K_h x_j, v^h_j = c V_h x_j on the head axis; runs of
        consecutive heads that share the mask and normalisation form one group each (a tuple of
        groups when there are several)."""
        H, dtype = self.num_heads, x.dtype

        def project(m):
            if m is None:
                return jnp.broadcast_to(x, (H,) + x.shape)
            return jnp.einsum("hkd,nd->hnk", jnp.asarray(m, dtype), x)

        beta = jnp.asarray(self.beta, dtype)
        beta = beta[:, None, None] if beta.ndim else beta
        scores = AttentionScores(
            queries=beta * project(self.Q),
            keys=project(self.K),
            values=jnp.asarray(self.scale, dtype) * project(self.V),
            weights=weights,
        )
        norms, causal = self._per_head_settings()
        runs: list[list] = []  # [start, stop, mask, normalization]
        for h in range(H):
            kernel = "softmax" if norms[h] == "softmax" else "sum"
            setting = ["causal" if causal[h] else None, kernel]
            if runs and runs[-1][2:] == setting:
                runs[-1][1] = h + 1
            else:
                runs.append([h, h + 1, *setting])
        groups = tuple(
            scores._replace(
                queries=scores.queries[start:stop],
                keys=scores.keys[start:stop],
                values=scores.values[start:stop],
                mask=mask,
                normalization=normalization,
            )
            for start, stop, mask, normalization in runs
        )
        if len(groups) == 1:
            return scores._replace(mask=runs[0][2], normalization=runs[0][3])
        return groups


def _per_head(value, name, num_heads, check):
    """One setting for every head, or a list/tuple of one per head (collapsed when alike)."""
    if not isinstance(value, list | tuple):
        return check(value, name)
    if len(value) != num_heads:
        raise ValueError(
            f"{name}: expected one value for every head or one per head ({num_heads}), got "
            f"{len(value)}"
        )
    values = tuple(check(v, f"{name}[{h}]") for h, v in enumerate(value))
    return values[0] if len(set(values)) == 1 else values


def _is_heads(value) -> bool:
    """Whether the first argument is the deprecated sequence of heads rather than β."""
    if isinstance(value, AbstractAttention | Iterator):
        return True
    return isinstance(value, list | tuple) and any(isinstance(v, AbstractAttention) for v in value)


def _deprecated_heads(heads, heads_keyword, beta, Q, K, V, normalization, causal):
    """The heads of the deprecated call forms, with a warning naming ``from_heads``; the stacked
    arrays must not come with them."""
    warnings.warn(
        "MultiHeadAttention(heads) is deprecated: use MultiHeadAttention.from_heads(heads)",
        DeprecationWarning,
        stacklevel=5,  # the caller, past eqx's Module.__call__ (two frames)
    )
    stacked = dict(beta=None if heads_keyword is None else beta, Q=Q, K=K, V=V)
    given = [name for name, value in stacked.items() if value is not None]
    given += ["normalization"] * (normalization != "softmax") + ["causal"] * (causal is not False)
    if given:
        raise ValueError(
            f"heads: give either the heads or the stacked arrays, not both (got heads "
            f"and {', '.join(given)}); each head carries its own β, Q, K, V, "
            "normalization and causal"
        )
    return heads


def _stack_heads(heads):
    """β, Q, K, V, normalizations, causal flags and block size of a sequence of heads."""
    if isinstance(heads, AbstractAttention | str | bytes) or not hasattr(heads, "__iter__"):
        raise ValueError(
            f"heads: expected a sequence of SelfAttention heads, got {type(heads).__name__}"
        )
    heads = tuple(heads)
    if not heads:
        raise ValueError("heads: expected at least one SelfAttention head, got none")
    for i, head in enumerate(heads):
        if not isinstance(head, SelfAttention):
            raise ValueError(f"heads[{i}]: expected a SelfAttention, got {type(head).__name__}")
    dims = {h.dim for h in heads} - {None}
    if len(dims) > 1:
        raise ValueError(f"heads: all heads must act on the same d, got dimensions {dims}")
    d = dims.pop() if dims else None
    matrices = [m for h in heads for m in (h.Q, h.K, h.V) if m is not None]
    dtype = jnp.result_type(*matrices) if matrices else None

    def eye():
        return jnp.eye(d, dtype=dtype)

    Q = K = V = None
    if any(h.Q is not None or h.K is not None for h in heads):
        qs = [eye() if h.Q is None else h.Q for h in heads]
        ks = [eye() if h.K is None else h.K for h in heads]
        k = max(q.shape[0] for q in qs)
        pad = lambda m: jnp.pad(m, [(0, k - m.shape[0]), (0, 0)])  # noqa: E731
        Q = jnp.stack([pad(q) for q in qs])
        K = jnp.stack([pad(m) for m in ks])
    if any(h.V is not None for h in heads):
        V = jnp.stack([eye() if h.V is None else h.V for h in heads])
    betas = [h.beta for h in heads]
    if all(isinstance(b, float) for b in betas):
        beta = tuple(betas)
    else:
        beta = jnp.stack([jnp.asarray(b) for b in betas])
    sizes = [h.block_size for h in heads if h.block_size is not None]
    return (
        beta,
        Q,
        K,
        V,
        tuple(h.normalization for h in heads),
        tuple(h.causal for h in heads),
        min(sizes) if sizes else None,
    )


def _check_stacked(Q, K, V):
    """Stacked Q, K: (H, k, d) and V: (H, d, d), any of them None; returns them and H."""
    given = {}
    for name, m in (("Q", Q), ("K", K), ("V", V)):
        if m is None:
            continue
        m = as_array(m, name)
        check_matrix(m, name, "(H, d, d)" if name == "V" else "(H, k, d)", ndim=3)
        given[name] = jnp.asarray(check_real(m, name))
    shapes = {name: m.shape for name, m in given.items()}
    if len({(s[0], s[2]) for s in shapes.values()}) > 1:
        listed = ", ".join(f"{name}: {s}" for name, s in shapes.items())
        raise ValueError(
            "Q, K, V: expected the same number of heads H and token dimension d (first and last "
            f"axes), got {listed}"
        )
    if "V" in shapes and shapes["V"][1] != shapes["V"][2]:
        raise ValueError(f"V: expected square value matrices (H, d, d), got shape {shapes['V']}")
    if ("Q" in shapes) != ("K" in shapes):
        present, other = ("Q", "K") if "Q" in shapes else ("K", "Q")
        if shapes[present][1] != shapes[present][2]:
            raise ValueError(
                f"{other}: is missing (identity) so {present} must be square (H, d, d), got "
                f"shape {shapes[present]}; pass both Q and K for rectangular forms"
            )
    if "Q" in shapes and "K" in shapes and shapes["Q"] != shapes["K"]:
        raise ValueError(
            f"Q, K: expected the same shape (H, k, d) to form ⟨Q_h x, K_h y⟩, got Q: "
            f"{shapes['Q']}, K: {shapes['K']}"
        )
    num_heads = next(iter(shapes.values()))[0] if shapes else None
    return given.get("Q"), given.get("K"), given.get("V"), num_heads


def _check_head_betas(beta, num_heads):
    """β shared (a scalar) or per head (a list/tuple of numbers, or an (H,) array)."""
    if isinstance(beta, list | tuple):
        checked = [check_beta(b, signed=True, name=f"beta[{h}]") for h, b in enumerate(beta)]
        if all(isinstance(b, int | float | np.integer | np.floating) for b in checked):
            beta = tuple(hyperparameter(b) for b in checked)
        else:
            beta = jnp.stack([jnp.asarray(b) for b in checked])
        count = len(checked)
    elif hasattr(beta, "ndim") and jnp.ndim(beta) == 1:
        beta = jnp.asarray(check_real_values(beta, "beta"))
        count = beta.shape[0]
    else:
        beta = hyperparameter(check_beta(beta, signed=True))
        if num_heads is None:
            raise ValueError(
                "beta: expected one β per head when Q, K and V are all None (the identity): "
                "the number of heads H is the length of beta"
            )
        return beta, num_heads
    if count == 0:
        raise ValueError("beta: expected a scalar or one β per head, got an empty sequence")
    if num_heads is not None and count != num_heads:
        raise ValueError(
            f"beta: expected a scalar or one β per head ({num_heads} heads), got {count} values"
        )
    return beta, count if num_heads is None else num_heads


def StackedMultiHeadAttention(beta, Q, K, V, scale=1.0) -> MultiHeadAttention:  # noqa: N802
    """Deprecated name: ``MultiHeadAttention(beta=beta, Q=Q, K=K, V=V, scale=scale)``."""
    return MultiHeadAttention(beta=beta, Q=Q, K=K, V=V, scale=scale)


__all__ = ["SelfAttention", "MultiHeadAttention", "project_rows"]
