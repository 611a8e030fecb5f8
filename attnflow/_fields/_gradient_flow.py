"""Fields that are Riemannian gradients of an energy: :class:`GradientFlow`."""

import equinox as eqx

from .._check import check_bool, check_shape_tokens, check_traced_field_input
from .._energy import AbstractEnergy
from .._metric import AbstractMetric, riemannian_gradient
from ._base import AbstractField, weights_from_args


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
        check_bool(self.descent, "descent")
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
        x = check_traced_field_input(x, nonzero=False)  # under the user's jit; free in engines
        weights = weights_from_args(args, x.shape[0])
        grad = riemannian_gradient(self.energy, self.metric, x, weights)
        return -grad if self.descent else grad

    def residual(self, t, x, args=None):
        """The field itself: a Riemannian gradient has no unprojected form."""
        return self(t, x, args)


__all__ = ["GradientFlow"]
