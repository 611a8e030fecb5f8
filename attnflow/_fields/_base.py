"""The field base classes: :class:`AbstractField` and the one attention interface
:class:`AbstractAttention`."""

import abc
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import (
    check_dict_keys,
    check_shape_tokens,
    check_traced_field_input,
    check_weights,
    convert_array_likes_in_subclass,
    is_traced,
)
from .._sphere import project_tangent
from ._kernel import AUTO_BLOCK_THRESHOLD, DEFAULT_BLOCK_SIZE, attention, attention_matrix


class AbstractField(eqx.Module):
    """A tangent vector field on (S^{d-1})^n: ``field(t, x, args)`` returns (n, d), row i ⟂ x_i.

    Fields act on ONE system ``x`` of shape (n, d); batch with ``jax.vmap``. Off the sphere they
    use P_x = I − x xᵀ/|x|² so that |x_i| is conserved exactly (see the conventions page).

    Weighted empirical measures μ = Σ_i w_i δ_{x_i}: every attention field and
    :class:`GradientFlow` reads ``args`` as ``None`` (uniform weights 1/n), a (n,) array of
    non-negative weights, or a dict whose ``"weights"`` entry is one of those. So
    ``solve(field, x0, t1, args=w)`` evolves a weighted measure; weights are constant in time
    (the continuity equation moves mass, it does not create it).

    ``x`` may be a Python list or tuple (an array-like): every subclass's ``__call__`` and
    ``residual`` convert it at the boundary, as JAX does.

    ``jump_times``: the times where the field jumps in t (``None`` for a field continuous in
    t, the default); :func:`attnflow.solve` steps exactly to them
    (:class:`attnflow.PiecewiseConstant` declares its switching times).
    """

    jump_times: ClassVar[Float[Array, " switches"] | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        convert_array_likes_in_subclass(cls, ("__call__", "residual"))

    @abc.abstractmethod
    def __call__(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        raise NotImplementedError

    @abc.abstractmethod
    def residual(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        """The update a residual block adds before the layer normalisation.

        For an attention field this is the unprojected attention output Σ_j a_ij V x_j, the
        update of the paper's discrete Transformer (see :func:`attnflow.layers`); for a field
        without an unprojected form (a gradient flow) it is the field itself.
        """
        raise NotImplementedError


class AbstractPureField(eqx.Module):
    """A vector field on (R^d)^n without the tangent projection: the pure family of paper §9
    (:class:`PureSelfAttention` (9.1), :class:`RescaledSelfAttention` (9.3)–(9.4),
    :class:`HardmaxRescaledAttention` (9.5)) and the feed-forward :class:`Perceptron`.

    Not an :class:`AbstractField`: these fields are not tangent to the sphere, so
    :func:`attnflow.solve` (which normalises tokens) is not their integrator. Integrate them
    with ``diffrax.diffeqsolve`` (the signature ``field(t, x, args) -> (n, d)`` is diffrax's) or
    in discrete time with :func:`attnflow.residual_layers`, whose update is the field itself
    (there is no projection to leave out, so no separate ``residual``). ``jump_times`` as for
    :class:`AbstractField` (the :class:`Perceptron`'s switching times; ``None`` by default).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> f = af.PureSelfAttention(1.0)
        >>> isinstance(f, af.AbstractPureField), isinstance(f, af.AbstractField)
        (True, False)
        >>> f(0.0, jnp.array([[1.0, 0.0], [0.0, 2.0]])).shape
        (2, 2)
    """

    jump_times: ClassVar[Float[Array, " switches"] | None] = None

    @abc.abstractmethod
    def __call__(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        raise NotImplementedError


def weights_from_args(args, n: int):
    """The measure weights a field reads from ``args``: None, a (n,) array, or {"weights": w}."""
    check_dict_keys(args, "args", {"weights"})  # a misspelt key would mean uniform weights
    if isinstance(args, dict):
        args = args.get("weights")
    if args is None:
        return None
    if jnp.ndim(args) != 1:
        raise ValueError(
            "args: attention fields read args as None, a (n,) array of weights or a dict with "
            f"key 'weights'; got {type(args).__name__} of shape {jnp.shape(args)}"
        )
    weights = check_weights(args, n, "args (weights)")
    message = "args (weights): the weights sum to 0; a measure needs positive total mass"
    if is_traced(weights):
        return eqx.error_if(weights, ~(jnp.sum(weights) > 0), message)
    if not float(jnp.sum(weights)) > 0:
        raise ValueError(message)
    return weights


def check_field_input(x, name: str = "x", *, nonzero: bool = True):
    """Shape check always; for concrete arrays also finite entries and (``nonzero``) non-zero rows.

    Fields are called directly (not only inside :func:`attnflow.solve`), so an eager call on a
    NaN or zero row raises here instead of returning NaN; so does a call under the user's
    ``jit`` (``eqx.error_if``), but not one traced by an engine (``solve``, ``solve_sde``, the
    layer loop), which checked its x0 at its entry: the engines' programs gain nothing.
    """
    check_shape_tokens(x, name)
    if is_traced(x):
        return check_traced_field_input(x, name, nonzero=nonzero)
    values = np.asarray(x)
    if not np.all(np.isfinite(values)):
        row = int(np.argwhere(~np.isfinite(values))[0, 0])
        raise ValueError(f"{name}: tokens contain NaN or inf (first at row {row})")
    norms = np.linalg.norm(values, axis=-1)
    if nonzero and np.any(norms == 0):
        raise ValueError(
            f"{name}: row {int(np.argmax(norms == 0))} is zero; a zero token has no tangent "
            "space on the sphere"
        )
    return x


def check_real(matrix, name: str):
    """Complex parameters would silently lose their imaginary part: reject them."""
    if jnp.iscomplexobj(matrix):
        raise ValueError(
            f"{name}: expected a real floating-point matrix, got dtype {jnp.result_type(matrix)} "
            "(attention on the real sphere has real Q, K, V)"
        )
    return matrix


class AttentionScores(NamedTuple):
    """What an attention variant contributes: s_ij = ⟨q_i, k_j⟩ + b_ij, values and normalisation.

    ``queries`` (n, k) carry β; ``keys`` (m, k); ``values`` (m, e); ``weights`` (m,) or None
    (1/m); ``bias`` (n, m) or None; ``mask`` None, "causal" or "strict"; ``normalization``
    "softmax", "sum" or "hardmax"; ``hardmax_tol`` the tie tolerance of "hardmax".

    Heads: ``queries`` (H, n, k), ``keys`` (H, m, k), ``values`` (H, m, e) and ``bias`` (n, m)
    or (H, n, m) carry a leading head axis; the kernel is mapped over it and the H outputs are
    summed (paper (2.7)). The weights, mask and normalisation are shared by the heads.

    Per query row are ``queries`` and ``bias``; per key are ``keys``, ``values`` and ``weights``:
    :meth:`query_rows` keeps a block of query rows, which is how :func:`attnflow.sharded_solve`
    gives each device its queries against every key.
    """

    queries: Array
    keys: Array
    values: Array
    weights: Array | None = None
    bias: Array | None = None
    mask: str | None = None
    normalization: str = "softmax"
    hardmax_tol: float = 0.0

    @property
    def num_heads(self) -> int | None:
        """H, or None without a head axis."""
        return self.queries.shape[0] if self.queries.ndim == 3 else None

    def query_rows(self, start, size: int) -> "AttentionScores":
        """The scores of query rows start … start + size − 1 (``start`` may be traced)."""

        def rows(a):
            return jax.lax.dynamic_slice_in_dim(a, start, size, axis=a.ndim - 2)

        bias = None if self.bias is None else rows(self.bias)
        return self._replace(queries=rows(self.queries), bias=bias)


def per_head(function, scores):
    """``function(scores of one head)`` for each head, stacked on a leading axis (or once).

    ``scores`` is one :class:`AttentionScores` or a tuple of them (groups of heads that differ in
    mask or normalisation), whose heads are concatenated in order.
    """
    if not isinstance(scores, AttentionScores):
        return jnp.concatenate([_with_head_axis(per_head(function, g), g) for g in scores])
    if scores.num_heads is None:
        return function(scores)
    bias_axis = None if scores.bias is None or scores.bias.ndim == 2 else 0
    heads = (scores.queries, scores.keys, scores.values, scores.bias)
    return jax.vmap(
        lambda q, k, v, b: function(scores._replace(queries=q, keys=k, values=v, bias=b)),
        in_axes=(0, 0, 0, bias_axis),
    )(*heads)


def _with_head_axis(result, scores):
    return result if scores.num_heads is not None else result[None]


def query_rows(scores, start, size: int):
    """:meth:`AttentionScores.query_rows` of one set of scores or of each group."""
    if isinstance(scores, AttentionScores):
        return scores.query_rows(start, size)
    return tuple(g.query_rows(start, size) for g in scores)


def attend(scores, block_size: int | None, query_offset=0):
    """Σ_h Σ_j a^h_ij v^h_j: the one kernel, mapped over the heads and summed (the one sum)."""
    if not isinstance(scores, AttentionScores):
        return sum(attend(g, block_size, query_offset) for g in scores)
    if scores.normalization == "hardmax":
        block_size = None

    def one_head(s):
        return attention(
            s.queries,
            s.keys,
            s.values,
            block_size=block_size,
            query_offset=query_offset,
            **_kernel_options(s),
        )

    out = per_head(one_head, scores)
    return out if scores.num_heads is None else jnp.sum(out, axis=0)


def _logits_of(s: AttentionScores):
    logits = s.queries @ s.keys.T
    if s.bias is not None:
        logits = logits + s.bias
    n, m = logits.shape
    rows, cols = jnp.arange(n)[:, None], jnp.arange(m)[None, :]
    if s.mask == "causal":
        logits = jnp.where(cols <= rows, logits, -jnp.inf)
    elif s.mask == "strict":
        logits = jnp.where(cols < rows, logits, -jnp.inf)
    return logits


def _kernel_options(s: AttentionScores) -> dict:
    """The keyword arguments that :func:`attention` and :func:`attention_matrix` take from
    one head's scores."""
    return dict(
        weights=s.weights,
        bias=s.bias,
        mask=s.mask,
        normalization=s.normalization,
        hardmax_tol=s.hardmax_tol,
    )


def _matrix_of(s: AttentionScores):
    return attention_matrix(s.queries, s.keys, **_kernel_options(s))


class AbstractAttention(AbstractField):
    r"""The one attention interface: a variant gives its scores, the base does the rest.

    A subclass implements :meth:`scores`, returning the queries (with β), keys, values, bias,
    mask and normalisation of :class:`AttentionScores` for tokens x and measure weights w, with
    a leading head axis for several heads. The base class then provides, all computed by the
    one kernel :func:`attnflow.attention` (mapped over the heads, whose outputs are summed):

    - ``attention_output(x, weights)`` = Σ_h Σ_j a^h_ij v^h_j, unprojected;
    - ``attention_matrix(x, weights)`` = a_ij ((heads, n, n) with heads);
    - ``logits(x)`` = s_ij (−∞ where masked; (heads, n, n) with heads);
    - ``field(t, x, args)`` = P_x(attention_output(x, w)) with w read from ``args``, which is
      the flow's vector field, and ``residual`` = the unprojected output, which is the update of
      the discrete Transformer (:func:`attnflow.layers`);
    - validation of the tokens (shapes always; NaN, inf and zero rows in eager calls).

    Declared attributes, ``None`` by default, that a variant gives as a field or property:

    - ``block_size``: the key-block size of the blocked kernel (``None``: dense up to
      n = ``AUTO_BLOCK_THRESHOLD``, blocked above);
    - ``dim``: the token dimension d its Q, K, V act on (``None``: any d);
    - ``num_tokens``: the number of tokens n its parameters are built for, e.g. an (n, n)
      positional bias (``None``: any n).

    :meth:`check_tokens` reads ``dim`` and ``num_tokens``; a variant declares them rather than
    overriding it.
    """

    # Not annotated here, so that a variant's static field keeps its place among its fields.
    block_size = None
    dim = None
    num_tokens = None

    @abc.abstractmethod
    def scores(self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None) -> AttentionScores:
        """The variant's own part: queries, keys, values, bias, mask and normalisation."""
        raise NotImplementedError

    def check_tokens(self, x: Float[Array, "n d"]):
        """Shape checks of ``x``: (n, d) tokens, d = ``dim`` and n = ``num_tokens`` where the
        variant declares them."""
        check_shape_tokens(x)
        if self.dim is not None and x.shape[1] != self.dim:
            raise ValueError(
                f"x: tokens have dimension d = {x.shape[1]} but Q, K, V act on d = {self.dim}"
            )
        if self.num_tokens is not None and x.shape[0] != self.num_tokens:
            raise ValueError(
                f"x: the positional bias is for n = {self.num_tokens} tokens, got n = {x.shape[0]}"
            )

    def _block_size(self, n: int) -> int | None:
        block = self.block_size
        if block is None and n > AUTO_BLOCK_THRESHOLD:
            return DEFAULT_BLOCK_SIZE
        return block

    def _weights(self, weights, n):
        return None if weights is None else check_weights(weights, n)

    def logits(self, x: Float[Array, "n d"]) -> Float[Array, "*heads n n"]:
        """s_ij = ⟨q_i, k_j⟩ + b_ij (−∞ where masked); (heads, n, n) with heads."""
        self.check_tokens(x)
        return per_head(_logits_of, self.scores(x, None))

    def attention_matrix(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "*heads n n"]:
        """a_ij, so that ``attention_output`` = a @ values (zero where masked); per head."""
        self.check_tokens(x)
        return per_head(_matrix_of, self.scores(x, self._weights(weights, x.shape[0])))

    def attention_output(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "n d"]:
        """Σ_h Σ_j a^h_ij v^h_j before the tangent projection (dense, or blocked for large n)."""
        self.check_tokens(x)
        s = self.scores(x, self._weights(weights, x.shape[0]))
        return attend(s, self._block_size(x.shape[0]))

    def residual(self, t, x, args=None):
        x = check_field_input(x)
        return self._checked(self.attention_output(x, weights_from_args(args, x.shape[0])))

    def __call__(self, t, x, args=None):
        return project_tangent(x, self.residual(t, x, args))

    def _checked(self, out):
        """Eager calls: an overflowing output is an error that names its likely cause."""
        if not is_traced(out) and not bool(jnp.all(jnp.isfinite(out))):
            raise ValueError(overflow_message(self, out.dtype))
        return out


def overflow_message(field, dtype) -> str:
    """Why an attention output is not finite, and what to do about it."""
    limit = 88 if jnp.dtype(dtype) == jnp.float32 else 709
    name = jnp.dtype(dtype).name
    return (
        f"{type(field).__name__}: the attention output is not finite. Unnormalised attention "
        f"(USA, normalization='n', and other 'sum' kernels) multiplies by e^(β⟨Qx, Kx⟩), which "
        f"overflows {name} once the logits exceed about {limit} (e.g. USA with Q = K = I "
        f"overflows {name} for β > {limit}): use float64, a smaller β, or SA "
        "(normalization='softmax'); otherwise check Q, K, V and the weights for NaN or inf"
    )


__all__ = [
    "AbstractField",
    "AbstractPureField",
    "AbstractAttention",
    "AttentionScores",
    "attend",
    "query_rows",
    "per_head",
    "weights_from_args",
    "check_field_input",
]
