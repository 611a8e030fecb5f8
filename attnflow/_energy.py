"""Interaction energies on (S^{d-1})^n."""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._check import (
    check_beta,
    check_matrix,
    check_shape_tokens,
    check_symmetric,
    check_tokens,
    check_weights,
    hyperparameter,
    is_traced,
)


def check_form(A, user):
    """None, or ``A`` checked as a real symmetric (d, d) bilinear form for ``user``."""
    if A is None:
        return None
    A = check_matrix(A, "A", "(d, d)")
    check_symmetric(A, "A", f"{user} needs a symmetric bilinear form")
    return jnp.asarray(A)


def check_energy_input(x, name: str = "x"):
    """Tokens of one system, shape (n, d) (a (T, n, d) trajectory is diagnosed as such): finite
    when concrete. Energies and metrics are evaluated on the Euclidean extension (autodiff and
    Hessians see points off the sphere), so unit norm is not required, and traced calls (inside
    a solver or a Hessian) get the static shape check only."""
    if is_traced(x):
        check_shape_tokens(x, name)
        return x
    return check_tokens(x, name, unit=False)


def default_weights(n: int, dtype) -> Float[Array, " n"]:
    """Weights 1/n of the empirical measure (1/n) Σ_i δ_{x_i}."""
    return jnp.full((n,), 1.0 / n, dtype=dtype)


class AbstractEnergy(eqx.Module):
    """A differentiable energy E(x, weights) of one system of tokens x: (n, d) → scalar.

    Subclasses implement ``__call__`` (its only method, abstract). Energies are evaluated on the
    Euclidean extension, so autodiff gives the Euclidean gradient;
    :func:`attnflow.riemannian_gradient` projects it. An energy that can overflow (exponential
    in β) subclasses :class:`attnflow.AbstractRescaledEnergy` instead and gives its rescaled form.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> class Spread(af.AbstractEnergy):
        ...     def __call__(self, x, weights=None):
        ...         return -0.5 * jnp.sum((x - x.mean(0, keepdims=True)) ** 2)
        >>> x = af.orthogonal_tokens(2, 2)
        >>> af.riemannian_gradient(Spread(), af.AttentionMetric(1.0), x).shape
        (2, 2)
    """

    @abc.abstractmethod
    def __call__(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, ""]:
        raise NotImplementedError


class AbstractRescaledEnergy(AbstractEnergy):
    r"""An energy that can overflow, evaluated through its rescaled form: subclasses implement
    the two abstract methods

    - ``scaled(x, weights, log_shift)`` = E(x) · exp(−log_shift), computed without forming E(x)
      (for an exponential energy: the shift subtracted inside the exponent);
    - ``log_scale(x, weights)``: a log of the energy's magnitude (not differentiated), the
      shift that keeps ``scaled`` of order one;

    and ``__call__`` is final: E(x) = scaled(x, w, s) · e^s with s = log_scale(x, w).
    :func:`attnflow.riemannian_gradient` rescales such an energy together with an
    :class:`attnflow.AbstractRescaledMetric` (the gradient is unchanged, and finite at β = 100
    in float32), and :func:`attnflow.energy_along` uses ``scaled`` for its ``log_shift``. An
    energy that only subclasses :class:`attnflow.AbstractEnergy` is rescaled by the plain
    factor exp(−log_shift), with log-scale 0.

    Example:
        >>> import jax, jax.numpy as jnp, attnflow as af
        >>> class Exponential(af.AbstractRescaledEnergy):  # E(x) = exp(β Σ_i x_i1)
        ...     beta: float = 1000.0
        ...     def scaled(self, x, weights, log_shift):
        ...         return jnp.exp(self.beta * jnp.sum(x[:, 0]) - log_shift)
        ...     def log_scale(self, x, weights):
        ...         return jax.lax.stop_gradient(self.beta * jnp.sum(x[:, 0]))
        >>> x = jnp.array([[1.0, 0.0], [0.0, 1.0]])
        >>> float(Exponential().scaled(x, None, 1000.0)), bool(jnp.isinf(Exponential()(x)))
        (1.0, True)
    """

    @abc.abstractmethod
    def scaled(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None, log_shift
    ) -> Float[Array, ""]:
        """E(x) · exp(−log_shift), computed stably."""
        raise NotImplementedError

    @abc.abstractmethod
    def log_scale(
        self, x: Float[Array, "n d"], weights: Float[Array, " n"] | None
    ) -> Float[Array, ""]:
        """A (non-differentiated) log of the energy's magnitude, used to rescale it."""
        raise NotImplementedError

    def __call__(self, x, weights=None):
        shift = self.log_scale(x, weights)
        return self.scaled(x, weights, shift) * jnp.exp(shift)


def scaled_energy(energy: AbstractEnergy, x, weights, log_shift):
    """E(x) · exp(−log_shift): the energy's own rescaled form for an
    :class:`AbstractRescaledEnergy`, the plain product for any other :class:`AbstractEnergy`."""
    if isinstance(energy, AbstractRescaledEnergy):
        return energy.scaled(x, weights, log_shift)
    return energy(x, weights) * jnp.exp(-log_shift)


def energy_log_scale(energy: AbstractEnergy, x, weights):
    """The log-scale by which ``energy`` is rescaled: its own for an
    :class:`AbstractRescaledEnergy`, 0 for any other :class:`AbstractEnergy`."""
    if isinstance(energy, AbstractRescaledEnergy):
        return energy.log_scale(x, weights)
    return jnp.zeros(())


class InteractionEnergy(AbstractRescaledEnergy):
    r"""The interaction energy of paper (3.5), for an empirical measure Σ_i w_i δ_{x_i}:

        E_β(x) = 1/(2β) Σ_{i,j} w_i w_j exp(β x_iᵀ A x_j),

    with A symmetric (default I) and β ≠ 0. Weights default to 1/n, giving the particle energy
    1/(2βn²) Σ exp(β⟨x_i, x_j⟩) of §3.3; unit weights give the §3.4 energy (no 1/n²).

    β < 0 is allowed (docs/conventions.md, "Negative β"): the energy is then negative, and the
    identities of §3.3–3.4 hold unchanged, because ∇_{x_i}E = w_i Σ_j w_j e^{β x_iᵀAx_j} A x_j
    for either sign of β (the 1/β cancels the β of the exponent): (USA) is still the
    Wasserstein gradient ascent of E, (SA) the ascent in :class:`attnflow.AttentionMetric`.
    β = 0 is refused (the 1/(2β) form has no limit; its gradient's limit, the β = 0 field
    Σ_j w_j A x_j, is the ascent of ½ Σ w_i w_j x_iᵀAx_j).

    Args:
        beta: inverse temperature β ≠ 0 (scalar, either sign).
        A: (d, d) symmetric bilinear form; A = QᵀK in the §3.4 gradient-flow identity.

    An :class:`attnflow.AbstractRescaledEnergy`: ``scaled(x, weights, s)`` subtracts s inside
    the exponent and ``log_scale`` is max_ij β x_iᵀAx_j, so the sum never overflows.

    Calling it on ``x`` of shape (n, d) gives a scalar. A (T, n, d) trajectory is refused with
    "expected (n, d), got (T, n, d)": an energy is a function of one system (its gradient is what
    :func:`attnflow.riemannian_gradient` takes), and :func:`attnflow.energy_along` evaluates it
    along a trajectory.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = af.orthogonal_tokens(2, 2)
        >>> round(float(af.InteractionEnergy(1.0)(x)), 6)  # (2e + 2)/(2·1·4)
        0.92957
    """

    beta: float | Float[Array, ""]
    A: Float[Array, "d d"] | None = None

    def __init__(self, beta, A=None):
        # A number is a hyperparameter (fixed under training), an array a parameter
        # (docs/conventions.md, "Which parameters are trained").
        self.beta = hyperparameter(check_beta(beta, positive=True, signed=True))
        self.A = check_form(A, "the interaction energy")

    def _similarity(self, x):
        if self.A is None:
            return x @ x.T
        if self.A.shape != (x.shape[1],) * 2:
            raise ValueError(
                f"A: expected shape ({x.shape[1]}, {x.shape[1]}) to match tokens of "
                f"dimension d = {x.shape[1]}, got {self.A.shape}"
            )
        return x @ jnp.asarray(self.A, x.dtype) @ x.T

    def scaled(self, x, weights, log_shift):
        x = check_energy_input(x)
        n = x.shape[0]
        w = default_weights(n, x.dtype) if weights is None else check_weights(weights, n)
        beta = jnp.asarray(self.beta, x.dtype)
        logits = beta * self._similarity(x) - log_shift
        return jnp.einsum("i,ij,j->", w, jnp.exp(logits), w) / (2 * beta)

    def log_scale(self, x, weights):
        del weights
        x = check_energy_input(x)
        beta = jnp.asarray(self.beta, x.dtype)
        return jax.lax.stop_gradient(jnp.max(beta * self._similarity(x)))


__all__ = [
    "AbstractEnergy",
    "AbstractRescaledEnergy",
    "InteractionEnergy",
    "check_energy_input",
    "check_form",
    "default_weights",
    "energy_log_scale",
    "scaled_energy",
]
