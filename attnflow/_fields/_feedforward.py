"""The perceptron (feed-forward) block of paper (2.8) and the full Transformer field (its
Lie–Trotter splitting into attention-then-MLP layers is :func:`attnflow.lie_trotter_layers`)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import check_matrix, check_shape_tokens
from .._sphere import project_tangent
from ._base import AbstractField


class FeedForward(AbstractField):
    r"""The perceptron block of paper (2.8) as a field on the sphere:

        ẋ_i = P^⊥_{x_i} ( w σ(a x_i + b) ),

    with σ Lipschitz and acting componentwise (as in the neural ODE (2.2)). Hidden width m.

    Args:
        w: (d, m) output weights.
        a: (m, d) input weights.
        b: (m,) bias.
        activation: componentwise σ; default ``jax.nn.relu``.

    Time-varying weights w(t), a(t), b(t): stack them in a :class:`attnflow.PiecewiseConstant`.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> ff = af.FeedForward(jnp.ones((3, 4)), jnp.ones((4, 3)), jnp.zeros(4))
        >>> x = af.random_tokens(jr.key(0), 5, 3)
        >>> v = ff(0.0, x)
        >>> v.shape, bool(jnp.abs(jnp.sum(v * x, axis=1)).max() < 1e-12)
        ((5, 3), True)
    """

    w: Float[Array, "d m"]
    a: Float[Array, "m d"]
    b: Float[Array, " m"]
    activation: Callable = eqx.field(static=True)

    def __init__(self, w, a, b, activation: Callable = jax.nn.relu):
        # Lists and tuples become arrays (check_matrix's conversion); arrays pass unchanged.
        w = check_matrix(w, "w", "(d, m)")
        a = check_matrix(a, "a", "(m, d)")
        b = check_matrix(b, "b", "(m,)", ndim=1)
        if a.shape[0] != w.shape[1] or b.shape[0] != w.shape[1]:
            raise ValueError(
                f"w, a, b: the hidden width m must agree (w: (d, m), a: (m, d), b: (m,)), got "
                f"w {w.shape}, a {a.shape}, b {b.shape}"
            )
        if a.shape[1] != w.shape[0]:
            raise ValueError(
                f"w, a: a takes tokens of dimension d = a.shape[1] = {a.shape[1]} and w returns "
                f"d = w.shape[0] = {w.shape[0]}; they must agree"
            )
        if not callable(activation):
            raise ValueError(f"activation: expected a callable, got {type(activation).__name__}")
        self.w = jnp.asarray(w)
        self.a = jnp.asarray(a)
        self.b = jnp.asarray(b)
        self.activation = activation

    def output(self, x: Float[Array, "n d"]) -> Float[Array, "n d"]:
        """w σ(a x_i + b) for every token, before the tangent projection."""
        check_shape_tokens(x)
        if x.shape[1] != self.w.shape[0]:
            raise ValueError(
                f"x: tokens have dimension d = {x.shape[1]} but the feed-forward block acts on "
                f"d = {self.w.shape[0]}"
            )
        return self.activation(x @ self.a.T + self.b[None, :]) @ self.w.T

    def residual(self, t, x, args=None):
        """The unprojected perceptron output w σ(a x_i + b) (the residual update)."""
        return self.output(x)

    def __call__(self, t, x, args=None):
        return project_tangent(x, self.output(x))


class TransformerBlock(AbstractField):
    r"""The full Transformer field of paper (2.8): attention plus perceptron inside one projection,

        ẋ_i = P^⊥_{x_i} ( Σ_h Σ_j a^h_ij V_h x_j + w σ(a x_i + b) ).

    Both parts are tangent fields built with the same projection P_x, which is linear, so the
    unsplit field is their sum. Solve it with :func:`attnflow.solve`; its discrete-time version,
    the Lie–Trotter splitting, is :func:`attnflow.lie_trotter_layers`.

    Args:
        attention: any attnflow field (``SelfAttention``, ``MultiHeadAttention``, ...).
        feedforward: a :class:`FeedForward` (or any attnflow field, e.g. a ``PiecewiseConstant``
            stack of them).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> ff = af.FeedForward(jnp.ones((3, 4)), jnp.ones((4, 3)), jnp.zeros(4), jnp.tanh)
        >>> block = af.TransformerBlock(af.SelfAttention(1.0), ff)
        >>> x0 = af.random_tokens(jr.key(0), 5, 3)
        >>> af.solve(block, x0, 1.0).ys.shape
        (1, 5, 3)
    """

    attention: AbstractField
    feedforward: AbstractField

    def __check_init__(self):
        for name in ("attention", "feedforward"):
            part = getattr(self, name)
            if not isinstance(part, AbstractField):
                raise ValueError(
                    f"{name}: expected an attnflow field (AbstractField), got {type(part).__name__}"
                )

    def __call__(self, t, x, args=None):
        return self.attention(t, x, args) + self.feedforward(t, x, args)

    def residual(self, t, x, args=None):
        """Attention output plus perceptron output, both unprojected (the residual update)."""
        return self.attention.residual(t, x, args) + self.feedforward.residual(t, x, args)
