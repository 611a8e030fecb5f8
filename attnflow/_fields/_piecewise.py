"""Time-dependent fields constant on each layer interval: piecewise-constant Q(t), K(t), V(t)."""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._check import (
    check_finite_scalar,
    is_traced,
)
from ._base import AbstractField
from ._self_attention import SelfAttention


def _num_pieces_of(switch_times) -> int:
    return int(jnp.shape(switch_times)[0]) + 1


def _check_switch_times(switch_times):
    if jnp.ndim(switch_times) != 1:
        raise ValueError(
            f"switch_times: expected a 1-d array of increasing times, got shape "
            f"{jnp.shape(switch_times)}"
        )
    if is_traced(switch_times):
        return
    values = np.asarray(switch_times)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"switch_times: expected finite times, got {values}")
    if np.any(np.diff(values) <= 0):
        raise ValueError(f"switch_times: expected strictly increasing times, got {values}")


class _PerPiece(eqx.Module):
    """Numbers (hyperparameters, e.g. a β given as a Python float) that differ between the
    pieces of a :class:`PiecewiseConstant`: kept as static data, one per piece, so that
    ``eqx.partition(field, eqx.is_inexact_array)`` and optax leave them alone, as they leave a
    number β of an unstacked field (docs/conventions.md, "Which parameters are trained")."""

    values: tuple[float, ...] = eqx.field(static=True)

    @property
    def shape(self) -> tuple[int]:
        return (len(self.values),)

    def __getitem__(self, k):
        if isinstance(k, int | np.integer):
            return self.values[k]
        return jnp.asarray(self.values)[k]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.values, dtype=dtype)


def _stack_numbers(*values, per_piece: bool = False):
    """One number for all pieces stays that number (unless ``per_piece``); different ones
    become a static _PerPiece."""
    values = tuple(float(v) for v in values)
    if not per_piece and all(v == values[0] for v in values):
        return values[0]
    return _PerPiece(values)


class PiecewiseConstant(AbstractField):
    r"""A field whose parameters are constant between switching times: a time-dependent layer stack.

    With switching times s_0 < s_1 < … < s_{L-2} and L pieces F_0, …, F_{L-1},

        ẋ = F_k(t, x)   for t ∈ [s_{k-1}, s_k),   s_{-1} = −∞, s_{L-1} = +∞,

    i.e. the (SA) dynamics (2.3) with Q(t), K(t), V(t) piecewise constant in t, as in the
    measure-to-measure transport constructions (Geshkovski–Rigollet–Ruiz-Balet). The pieces are
    stored *stacked*: ``field`` is any attnflow field (``SelfAttention``, ``MultiHeadAttention``,
    …) every array leaf of which carries a leading axis of length L; piece k is that field with
    every array leaf indexed at k. Build it with :meth:`from_fields` (a list of fields) or
    :meth:`from_attention` (lists of Q, K, V), or directly from a stacked field (e.g. made with
    ``eqx.filter_vmap`` over a constructor).

    Numbers in the pieces (a β given as a Python float) stay numbers: one shared by all pieces is
    kept as it is, different ones are kept as static per-piece data (``field.beta.values``), so
    the training recipe of the conventions page (``eqx.partition(field,
    eqx.is_inexact_array)`` and optax) leaves them fixed, as for an unstacked field; give β as
    an array to train it.

    The field is differentiable (reverse and forward mode) with respect to every array in every
    piece. It is *not* differentiable with respect to the switching times: their gradient is
    zero by construction (``stop_gradient``; the piece index is an integer, and the solver's
    steps to each switch would otherwise leak a discretisation-error gradient, which Adam
    normalises into a step of the learning rate), so the training recipe leaves them in place.
    :func:`attnflow.solve` reads :attr:`jump_times` and tells the adaptive step-size
    controller to step exactly to each discontinuity (diffrax ``jump_ts``), which keeps the
    solver's error estimate honest across switches.

    **Which piece owns a switch time.** Piece k owns [s_{k-1}, s_k): at t = s_k exactly the new
    piece applies. t and s_k are compared after rounding both to the *coarser* of their two
    dtypes, so a float64 layer time 0.1 meets float32 switch times at float32's 0.1 instead of
    falling an ulp short of it (which made :func:`attnflow.layers` repeat a piece);
    :attr:`jump_times` are the matching discontinuities in the default float dtype. A switch
    meant to land on a layer boundary of ``layers(f, x0, L, h, t0=t0)`` should be computed as
    ``t0 + k * h`` (as ``layers`` computes its times), or use :meth:`piece` with the index
    directly where it is known.

    Args:
        field: the stacked field (leading axis L on every array leaf).
        switch_times: (L − 1,) strictly increasing times; empty for a single piece.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> I, R = jnp.eye(3), jnp.diag(jnp.array([1.0, -1.0, 1.0]))
        >>> f = af.PiecewiseConstant.from_attention(1.0, V=[I, R], switch_times=[2.0])
        >>> f.num_pieces, f.jump_times.shape
        (2, (1,))
        >>> x0 = af.random_tokens(jr.key(0), 5, 3)
        >>> af.solve(f, x0, 4.0).ys.shape
        (1, 5, 3)
    """

    field: AbstractField
    switch_times: Float[Array, " switches"]

    def __init__(self, field: AbstractField, switch_times):
        if not isinstance(field, AbstractField):
            raise ValueError(
                f"field: expected a stacked attnflow field (an AbstractField), got "
                f"{type(field).__name__}"
            )
        switch_times = jnp.asarray(switch_times)
        if not jnp.issubdtype(switch_times.dtype, jnp.floating):
            switch_times = switch_times.astype(float)
        _check_switch_times(switch_times)
        num_pieces = _num_pieces_of(switch_times)
        leaves = jax.tree.leaves(eqx.filter(field, eqx.is_array))
        numbers = jax.tree.leaves(field, is_leaf=lambda x: isinstance(x, _PerPiece))
        numbers = [leaf for leaf in numbers if isinstance(leaf, _PerPiece)]
        if not leaves and not numbers and num_pieces > 1:
            # One piece needs nothing stacked (issue 44 item 8: from_fields([F], [])).
            raise ValueError(
                f"field: expected parameters stacked over the L = {num_pieces} pieces (arrays "
                "with a leading axis of length L, or per-piece numbers), got a field with none; "
                "build it with PiecewiseConstant.from_fields([F_0, ..., F_{L-1}], switch_times)"
            )
        for leaf in numbers:
            if leaf.shape[0] != num_pieces:
                raise ValueError(
                    f"field: per-piece numbers must have L = len(switch_times) + 1 = "
                    f"{num_pieces} values, got {leaf.values}"
                )
        for leaf in leaves:
            if leaf.ndim == 0 or leaf.shape[0] != num_pieces:
                raise ValueError(
                    f"field: every array leaf must be stacked with a leading axis of length "
                    f"L = len(switch_times) + 1 = {num_pieces}, got a leaf of shape {leaf.shape}"
                )
        self.field = field
        self.switch_times = switch_times

    @property
    def num_pieces(self) -> int:
        """L, the number of pieces."""
        return _num_pieces_of(self.switch_times)

    @property
    def jump_times(self) -> Float[Array, " switches"]:
        """The switching times, where the field is discontinuous in t (diffrax ``jump_ts``).

        In the default float dtype: the earliest time that :meth:`piece_index` puts in the next
        piece. That is s_k itself unless the switching times are coarser (float32 under x64),
        where it is the lower rounding boundary of s_k, so that the solver's steps to just
        before and just after each jump see the old and the new piece.
        """
        s = jax.lax.stop_gradient(self.switch_times)  # not differentiated (class docstring)
        default = jnp.dtype(jnp.result_type(float))
        # The wider of the two (an explicit promotion: strict dtype promotion refuses one).
        wide = s.dtype if jnp.finfo(s.dtype).bits >= jnp.finfo(default).bits else default
        if wide == s.dtype:
            return s
        below = jnp.nextafter(s, jnp.asarray(-jnp.inf, s.dtype)).astype(wide)
        # Exact in the wider dtype; ties round to even, so step past a midpoint that rounds down.
        midpoint = (below + s.astype(wide)) / 2
        return jnp.where(
            midpoint.astype(s.dtype) >= s,
            midpoint,
            jnp.nextafter(midpoint, jnp.asarray(jnp.inf, wide)),
        )

    def piece_index(self, t) -> Int[Array, ""]:
        """k such that s_{k-1} ≤ t < s_k (right-continuous: at t = s_k the new piece applies),
        compared in the coarser of the dtypes of t and of the switching times.

        Example:
            >>> import jax.numpy as jnp, attnflow as af
            >>> f = af.PiecewiseConstant.from_attention(
            ...     1.0, V=jnp.ones((2, 3, 3)), switch_times=jnp.array([0.1], jnp.float32))
            >>> [int(f.piece_index(jnp.asarray(t, jnp.float64))) for t in (0.0, 0.1, 0.2)]
            [0, 1, 1]
        """
        if not is_traced(t):
            # A NaN time compares false with every switch and would select the last piece.
            check_finite_scalar(t, "t")
        t = jnp.asarray(t)
        switch_times = jax.lax.stop_gradient(self.switch_times)
        dtype = switch_times.dtype
        if jnp.issubdtype(t.dtype, jnp.floating) and jnp.finfo(t.dtype).eps > jnp.finfo(dtype).eps:
            dtype = t.dtype
        return jnp.searchsorted(switch_times.astype(dtype), t.astype(dtype), side="right")

    def piece(self, k) -> AbstractField:
        """Piece k as an ordinary (unstacked) field; ``k`` may be traced."""
        per_piece = lambda x: eqx.is_array(x) or isinstance(x, _PerPiece)  # noqa: E731
        dynamic, static = eqx.partition(self.field, per_piece, is_leaf=per_piece)
        pieces = jax.tree.map(lambda leaf: leaf[k], dynamic, is_leaf=per_piece)
        return eqx.combine(pieces, static, is_leaf=per_piece)

    def __call__(self, t, x, args=None):
        return self.piece(self.piece_index(t))(t, x, args)

    def residual(self, t, x, args=None):
        """The current piece's residual update (its unprojected attention output)."""
        return self.piece(self.piece_index(t)).residual(t, x, args)

    @classmethod
    def from_fields(cls, fields: Sequence[AbstractField], switch_times) -> "PiecewiseConstant":
        """Stack L fields of the same kind and static configuration into one piecewise field.

        Example:
            >>> import attnflow as af
            >>> f = af.PiecewiseConstant.from_fields(
            ...     [af.SelfAttention(1.0), af.SelfAttention(4.0)], switch_times=[1.5])
            >>> f.field.beta.values, f.piece(1).beta  # numbers, one per piece: not trained
            ((1.0, 4.0), 4.0)
        """
        fields = list(fields)
        if not fields:
            raise ValueError("fields: expected at least one field, got none")
        switch_times = jnp.asarray(switch_times)
        if jnp.ndim(switch_times) == 1 and len(fields) != _num_pieces_of(switch_times):
            raise ValueError(
                f"fields: expected len(switch_times) + 1 = {_num_pieces_of(switch_times)} "
                f"fields, got {len(fields)}"
            )
        # Scalar hyperparameters (Python floats, e.g. β) may differ per piece: kept as numbers
        # (static data, one per piece; not trained), arrays are stacked.
        stackable = lambda leaf: eqx.is_array(leaf) or isinstance(leaf, float)  # noqa: E731
        dynamic, static = zip(*(eqx.partition(f, stackable) for f in fields), strict=True)
        structure = jax.tree.structure(dynamic[0])
        for k, (dyn, stat) in enumerate(zip(dynamic, static, strict=True)):
            if jax.tree.structure(dyn) != structure or not eqx.tree_equal(stat, static[0]):
                raise ValueError(
                    f"fields: piece {k} differs from piece 0 in kind or static configuration "
                    "(normalization, causal, which of Q, K, V are given, number of heads); "
                    "all pieces must share them"
                )
            shapes = [jnp.shape(a) for a in jax.tree.leaves(dyn)]
            if shapes != [jnp.shape(a) for a in jax.tree.leaves(dynamic[0])]:
                raise ValueError(
                    f"fields: piece {k} has array shapes {shapes}, piece 0 has "
                    f"{[jnp.shape(a) for a in jax.tree.leaves(dynamic[0])]}"
                )
        # Pieces with numbers only (SelfAttention(1.0) twice): kept per piece, so that the
        # stacked field has something per piece even where the numbers agree.
        per_piece = len(fields) > 1 and not jax.tree.leaves(eqx.filter(dynamic[0], eqx.is_array))
        stacked = jax.tree.map(
            lambda *leaves: (
                jnp.stack(leaves)
                if eqx.is_array(leaves[0])
                else _stack_numbers(*leaves, per_piece=per_piece)
            ),
            *dynamic,
        )
        is_number = lambda x: isinstance(x, _PerPiece)  # noqa: E731
        return cls(eqx.combine(stacked, static[0], is_leaf=is_number), switch_times)

    @classmethod
    def from_attention(
        cls,
        beta,
        Q=None,
        K=None,
        V=None,
        *,
        switch_times,
        normalization="softmax",
        causal=False,
    ) -> "PiecewiseConstant":
        """Piecewise-constant (SA)/(USA) from lists of matrices: piece k is
        ``SelfAttention(beta[k], Q[k], K[k], V[k], normalization=…, causal=…)``.

        Args:
            beta: a scalar shared by all pieces, or L values. Numbers (a Python float or a
                list of them) are hyperparameters, fixed under training as for every attention
                field; an array (a JAX scalar or (L,) array) is a parameter, stacked and trained
                with Q, K, V.
            Q, K: ``None`` (identity), a sequence of L (k, d) matrices or an (L, k, d) array.
            V: ``None`` (identity), a sequence of L (d, d) matrices or an (L, d, d) array.
            switch_times: (L − 1,) strictly increasing times.

        Example:
            >>> import jax.numpy as jnp, attnflow as af
            >>> f = af.PiecewiseConstant.from_attention(
            ...     2.0, Q=jnp.ones((3, 2, 4)), K=jnp.ones((3, 2, 4)), switch_times=[1.0, 2.0])
            >>> f.field.Q.shape, f.field.beta  # a number β: shared and fixed, as in SelfAttention
            ((3, 2, 4), 2.0)
        """
        switch_times = jnp.asarray(switch_times)
        if jnp.ndim(switch_times) != 1:
            raise ValueError(
                f"switch_times: expected a 1-d array of increasing times, got shape "
                f"{jnp.shape(switch_times)}"
            )
        num_pieces = _num_pieces_of(switch_times)

        def per_piece(name, value, scalar):
            if value is None:
                return [None] * num_pieces
            if scalar and np.ndim(value) == 0:
                return [value] * num_pieces
            if len(value) != num_pieces:
                raise ValueError(
                    f"{name}: expected {'a scalar or ' if scalar else ''}L = len(switch_times) "
                    f"+ 1 = {num_pieces} values, one per piece, got {len(value)}"
                )
            return list(value)

        if isinstance(beta, np.ndarray | jax.Array):
            beta = jnp.asarray(beta)  # an array β: a parameter, each piece's entry an array too
        pieces = zip(
            per_piece("beta", beta, True),
            per_piece("Q", Q, False),
            per_piece("K", K, False),
            per_piece("V", V, False),
            strict=True,
        )
        fields = []
        for k, (b, q, kk, v) in enumerate(pieces):
            try:
                fields.append(
                    SelfAttention(b, q, kk, v, normalization=normalization, causal=causal)
                )
            except ValueError as error:
                raise ValueError(f"piece {k}: {error}") from error
        return cls.from_fields(fields, switch_times)
