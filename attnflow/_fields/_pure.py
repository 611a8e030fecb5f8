"""Pure self-attention on R^d (no projection, no layer norm), paper (9.1), and its rescaling (9.3).

These fields live on R^d, not on the sphere: integrate them with ``diffrax.diffeqsolve`` directly
(:func:`attnflow.solve` normalises tokens) or in discrete time with
:func:`attnflow.residual_layers`.
"""

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, ArrayLike, Float

from .._check import accepts_array_likes, check_matrix, check_real_values, check_shape_tokens
from ._base import AbstractPureField, check_field_input, weights_from_args
from ._kernel import attention
from ._self_attention import SelfAttention


def _value_matrix(V, name: str = "V"):
    V = check_matrix(V, name, "(d, d)")  # lists and tuples become arrays
    if V.shape[0] != V.shape[1]:
        raise ValueError(f"{name}: expected a square (d, d) value matrix, got shape {V.shape}")
    return jnp.asarray(V)


def _propagator(t, V):
    """e^{tV} (matrix exponential; differentiable in t and V)."""
    return jsl.expm(jnp.asarray(t, dtype=V.dtype) * V)


def _apply_rows(x, t, M_of_t, d: int, name: str):
    """Rows of x (…, n, d) multiplied by M(t)ᵀ, with t broadcast over the leading axes of x."""
    x, t = jnp.asarray(x), jnp.asarray(t)
    if x.ndim < 2 or x.shape[-1] != d:
        raise ValueError(
            f"{name}: expected tokens of shape (..., n, {d}) to match V, got shape {x.shape}"
        )
    if t.ndim == 0:
        return x @ M_of_t(t).T
    if t.shape != x.shape[: t.ndim] or x.ndim != t.ndim + 2:
        raise ValueError(
            f"t: expected a scalar or one time per leading entry of x, i.e. shape "
            f"{x.shape[:-2]}, got shape {t.shape}"
        )
    return jax.vmap(lambda ti, xi: _apply_rows(xi, ti, M_of_t, d, name))(t, x)


def rescale(
    x: Float[ArrayLike, "*batch n d"], t, V: Float[ArrayLike, "..."]
) -> Float[Array, "*batch n d"]:
    """The rescaled tokens of paper (9.2): z_i = e^{−tV} x_i.

    Args:
        x: (n, d) tokens, or a trajectory (T, n, d).
        t: a scalar time, or (T,) times matching the leading axis of a trajectory.
        V: (d, d) value matrix.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> z = af.rescale(jnp.ones((2, 2)), 1.0, jnp.eye(2))
        >>> round(float(z[0, 0]), 6)
        0.367879
    """
    V = _value_matrix(V)
    t = check_real_values(t, "t")
    return _apply_rows(x, t, lambda s: _propagator(-s, V), V.shape[0], "x")


def unrescale(
    z: Float[ArrayLike, "*batch n d"], t, V: Float[ArrayLike, "..."]
) -> Float[Array, "*batch n d"]:
    """Inverse of :func:`rescale`: x_i = e^{tV} z_i (paper (9.2)).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> V = jnp.array([[0.0, 1.0], [-1.0, 0.5]])
        >>> x = jnp.array([[1.0, 2.0], [0.5, -1.0]])
        >>> bool(jnp.allclose(af.unrescale(af.rescale(x, 0.7, V), 0.7, V), x))
        True
    """
    V = _value_matrix(V)
    t = check_real_values(t, "t")
    return _apply_rows(z, t, lambda s: _propagator(s, V), V.shape[0], "z")


class PureSelfAttention(AbstractPureField):
    r"""Pure self-attention without the tangent projection, paper (9.1), on R^d:

        ẋ_i = Σ_j a_ij V x_j,   a_ij = exp(β⟨Q x_i, K x_j⟩) / Σ_k exp(β⟨Q x_i, K x_k⟩).

    Tokens are not constrained to the sphere (GLPR23, arXiv:2305.05465). With the rescaling
    z = e^{−tV} x of (9.2) the dynamics becomes :class:`RescaledSelfAttention` (9.3), whose
    clusters are described by Table 1 of GLPR (docs/maths.md §1.8). Missing Q, K, V are the
    identity.

    Signature ``field(t, x, args) -> (n, d)`` (diffrax's); an :class:`attnflow.AbstractPureField`,
    not an :class:`attnflow.AbstractField`, because it is not tangent to the sphere.

    Example:
        >>> import diffrax, jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x0 = jr.normal(jr.key(0), (5, 2))
        >>> sol = diffrax.diffeqsolve(diffrax.ODETerm(af.PureSelfAttention(1.0)),
        ...                           diffrax.Tsit5(), 0.0, 1.0, 0.1, x0)
        >>> sol.ys.shape
        (1, 5, 2)
    """

    attention: SelfAttention

    def __init__(self, beta, Q=None, K=None, V=None):
        self.attention = SelfAttention(beta, Q, K, V)

    @accepts_array_likes("x")  # F(0.0, x.tolist()) works as F(0.0, x)
    def __call__(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        check_field_input(x, nonzero=False)
        return self.attention.attention_output(x, weights_from_args(args, x.shape[0]))


class RescaledSelfAttention(AbstractPureField):
    r"""Pure self-attention in the rescaled variables z = e^{−tV} x, paper (9.3):

        ż_i = Σ_j a_ij(t) V (z_j − z_i),
        a_ij(t) = softmax_j β⟨Q e^{tV} z_i, K e^{tV} z_j⟩,

    so that z(t) = e^{−tV} x(t) when x solves (9.1) from the same initial tokens (the attention
    weights of x and z coincide). With ``logits_at="z"`` the logits are evaluated at z instead,
    β⟨Q z_i, K z_j⟩: this is the time-independent dynamics (9.4), whose β → ∞ limit is the hardmax
    dynamics (9.5), :class:`attnflow.HardmaxRescaledAttention`.

    Args:
        beta: inverse temperature β ≥ 0.
        Q, K: (k, d) query and key matrices (identity when omitted).
        V: (d, d) value matrix (identity when omitted).
        logits_at: ``"x"`` for (9.3), ``"z"`` for (9.4).

    Example:
        >>> import diffrax, jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> z0 = jr.normal(jr.key(0), (5, 2))
        >>> f = af.RescaledSelfAttention(1.0)
        >>> sol = diffrax.diffeqsolve(diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, 1.0, 0.1, z0)
        >>> sol.ys.shape
        (1, 5, 2)
    """

    attention: SelfAttention
    logits_at: Literal["x", "z"] = eqx.field(static=True)

    def __init__(self, beta, Q=None, K=None, V=None, *, logits_at="x"):
        if logits_at not in ("x", "z"):
            raise ValueError(
                f"logits_at: expected 'x' (paper (9.3)) or 'z' (paper (9.4)), got {logits_at!r}"
            )
        self.attention = SelfAttention(beta, Q, K, V)
        self.logits_at = logits_at

    def _logit_points(self, t, z):
        if self.logits_at == "z":
            return z
        V = self.attention.V
        # V = I (omitted) still rescales: e^{tI} z = e^t z raises the effective β to β e^{2t}.
        return z * jnp.exp(jnp.asarray(t, z.dtype)) if V is None else z @ _propagator(t, V).T

    @accepts_array_likes("z")
    def attention_matrix(
        self, t, z: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "n n"]:
        """a_ij(t) of (9.3) (or of (9.4) when ``logits_at="z"``); row-stochastic."""
        check_shape_tokens(z, "z")
        return self.attention.attention_matrix(self._logit_points(t, z), weights)

    @accepts_array_likes("z")  # F(0.0, z.tolist()) works as F(0.0, z)
    def __call__(self, t, z: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        check_field_input(z, "z", nonzero=False)
        weights = weights_from_args(args, z.shape[0])
        scores = self.attention.scores(self._logit_points(t, z), weights)
        values = z if self.attention.V is None else z @ jnp.asarray(self.attention.V, z.dtype).T
        # Rows of a sum to one, so Σ_j a_ij V(z_j − z_i) = Σ_j a_ij V z_j − V z_i.
        out = attention(
            scores.queries,
            scores.keys,
            values,
            weights=scores.weights,
            block_size=self.attention._block_size(z.shape[0]),
        )
        return out - values
