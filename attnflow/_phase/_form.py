"""The state forms of the phase engine: what the integrator integrates for one system."""

import abc

import equinox as eqx
from jaxtyping import Array, Bool, Float


class AbstractStateForm(eqx.Module):
    """A representation of one system of n tokens as an (n, m) state y, with its flow and the
    clustering test ⟨x_i, x_j⟩ ≥ 1 − δ read off the state.

    The integrator holds states flat, (…, n·m) (XLA's CPU backend loops over a small minor
    dimension m several times more slowly than over n·m), and batches :meth:`rate` with
    ``jax.vmap``.
    """

    shape: eqx.AbstractVar[tuple[int, int]]
    """(n, m): tokens and state columns per token."""

    @abc.abstractmethod
    def rate(self, y: Float[Array, "n m"], beta: Float[Array, ""], params) -> Float[Array, "n m"]:
        """ẏ at the state y of one system with inverse temperature β; ``params`` holds that
        system's own parameters (a dict of arrays, possibly empty)."""

    @abc.abstractmethod
    def clustered(self, y: Float[Array, "*batch nm"]) -> Bool[Array, "*batch nn"]:
        """For flat states (…, n·m): which ordered pairs (i, j) have ⟨x_i, x_j⟩ ≥ 1 − δ, as
        (…, n²) booleans. The diagonal counts as clustered (i = j)."""
