"""Riemannian metrics on (S^{d-1})^n, diagonal across tokens: ⟨a, b⟩_x = Σ_i g_i(x) ⟨a_i, b_i⟩."""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._check import check_beta, check_weights, expected, hyperparameter
from ._energy import (
    AbstractEnergy,
    check_energy_input,
    check_form,
    default_weights,
    energy_log_scale,
    scaled_energy,
)
from ._sphere import project_tangent


class AbstractMetric(eqx.Module):
    """A metric ⟨a, b⟩_x = Σ_i g_i(x) ⟨a_i, b_i⟩ with positive token factors g_i(x).

    Subclasses implement :meth:`factors` (abstract); ``__call__`` is final. A metric whose
    factors share an exponential scale with an energy (so the pair can be rescaled jointly)
    subclasses :class:`attnflow.AbstractRescaledMetric` instead.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> class Doubled(af.AbstractMetric):  # twice the Wasserstein metric
        ...     def factors(self, x, weights=None):
        ...         return jnp.full(x.shape[:1], 2.0 / x.shape[0])
        >>> x = af.orthogonal_tokens(2, 2)
        >>> g = af.riemannian_gradient(af.InteractionEnergy(1.0), Doubled(), x)
        >>> w = af.riemannian_gradient(af.InteractionEnergy(1.0), af.WassersteinMetric(), x)
        >>> bool(jnp.allclose(2 * g, w))
        True
    """

    @abc.abstractmethod
    def factors(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, " n"]:
        raise NotImplementedError

    @property
    def rescales_with_energy(self) -> bool:
        """Whether the factors are rescaled with the energy: ``isinstance(self,
        AbstractRescaledMetric)``."""
        return isinstance(self, AbstractRescaledMetric)

    def __call__(self, x, a, b, weights=None) -> Float[Array, ""]:
        """The inner product ⟨a, b⟩_x of two tangent vectors at x."""
        return jnp.sum(self.factors(x, weights) * jnp.sum(a * b, axis=-1))


class AbstractRescaledMetric(AbstractMetric):
    r"""A metric whose factors scale like an energy's exponential: subclasses implement the
    abstract ``scaled_factors(x, weights, log_shift)`` = g_i(x) · exp(−log_shift), computed
    without forming g_i(x); ``factors`` is final (``scaled_factors`` at shift 0).
    :func:`attnflow.riemannian_gradient` multiplies energy and factors by the same
    exp(−log_scale) (the gradient is unchanged), which keeps β = 100 finite in float32.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> class Exponential(af.AbstractRescaledMetric):  # g_i = exp(β x_i1)
        ...     beta: float = 1.0
        ...     def scaled_factors(self, x, weights, log_shift):
        ...         return jnp.exp(self.beta * x[:, 0] - log_shift)
        >>> x = af.orthogonal_tokens(2, 2)
        >>> bool(jnp.allclose(Exponential().factors(x), jnp.array([jnp.e, 1.0])))
        True
    """

    @abc.abstractmethod
    def scaled_factors(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None, log_shift
    ) -> Float[Array, " n"]:
        """g_i(x) · exp(−log_shift), computed stably."""
        raise NotImplementedError

    def factors(self, x, weights=None):
        return self.scaled_factors(x, weights, 0.0)


class WassersteinMetric(AbstractMetric):
    """⟨a, b⟩_x = Σ_i w_i ⟨a_i, b_i⟩: the Otto (Wasserstein) metric on empirical measures.

    The Riemannian gradient of the interaction energy in this metric is the USA field (Lemma 3.6).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.WassersteinMetric().factors(jnp.eye(2)).tolist()
        [0.5, 0.5]
    """

    def factors(self, x, weights=None):
        x = check_energy_input(x)
        n = x.shape[0]
        return default_weights(n, x.dtype) if weights is None else check_weights(weights, n)


class AttentionMetric(AbstractRescaledMetric):
    """⟨a, b⟩_x = Σ_i w_i Z_i ⟨a_i, b_i⟩ with Z_i = Σ_j w_j exp(β x_iᵀ A x_j), paper (3.12).

    With A = QᵀK symmetric, the interaction energy's gradient in this metric is (SA) with V = A
    (§3.4). Uniform weights 1/n turn the paper's sum Z_{β,i} into the average Z_{β,μ}(x_i); the
    gradient is unchanged because energy and metric scale together. β ≠ 0 of either sign, as for
    :class:`attnflow.InteractionEnergy` (docs/conventions.md, "Negative β").

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> g = af.AttentionMetric(1.0).factors(jnp.eye(2))
        >>> g.shape
        (2,)
    """

    beta: float | Float[Array, ""]
    A: Float[Array, "d d"] | None = None

    def __init__(self, beta, A=None):
        # A number is a hyperparameter (fixed under training), an array a parameter
        # (docs/conventions.md, "Which parameters are trained").
        self.beta = hyperparameter(check_beta(beta, positive=True, signed=True))
        self.A = check_form(A, "the attention metric")

    def scaled_factors(self, x, weights, log_shift):
        x = check_energy_input(x)
        n = x.shape[0]
        w = default_weights(n, x.dtype) if weights is None else check_weights(weights, n)
        s = x @ x.T if self.A is None else x @ jnp.asarray(self.A, x.dtype) @ x.T
        return w * (jnp.exp(jnp.asarray(self.beta, x.dtype) * s - log_shift) @ w)


def riemannian_gradient(
    energy: AbstractEnergy,
    metric: AbstractMetric,
    x: Float[Array, "n d"],
    weights: Float[Array, " n"] | None = None,
) -> Float[Array, "n d"]:
    """grad E(x) in ``metric``: row i is P_{x_i} ∇_{x_i}E / g_i(x), with ∇E from autodiff.

    When the metric is an :class:`attnflow.AbstractRescaledMetric` (e.g. AttentionMetric),
    energy and metric factors are both multiplied by exp(−s) first, with s the energy's
    ``log_scale`` (an :class:`attnflow.AbstractRescaledEnergy`'s own, else 0), which leaves the
    gradient unchanged and keeps β = 100 finite in float32.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 5, 3)
        >>> g = af.riemannian_gradient(af.InteractionEnergy(1.0), af.WassersteinMetric(), x)
        >>> bool(jnp.allclose(g, af.SelfAttention(1.0, normalization="n")(0.0, x, None), atol=1e-5))
        True
    """
    if not isinstance(energy, AbstractEnergy):
        expected("energy", "an attnflow.AbstractEnergy (e.g. InteractionEnergy(beta))", energy)
    if not isinstance(metric, AbstractMetric):
        expected("metric", "an attnflow.AbstractMetric (e.g. WassersteinMetric())", metric)
    x = check_energy_input(x)
    weights = check_weights(weights, x.shape[0])
    if isinstance(metric, AbstractRescaledMetric):
        shift = jax.lax.stop_gradient(energy_log_scale(energy, x, weights))
        euclidean = jax.grad(lambda y: scaled_energy(energy, y, weights, shift))(x)
        factors = metric.scaled_factors(x, weights, shift)
    else:
        euclidean = jax.grad(energy)(x, weights)
        factors = metric.factors(x, weights)
    return project_tangent(x, euclidean) / factors[:, None]
