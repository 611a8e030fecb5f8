"""The log-distance form L = log D of a system with Q = K = V = I (D in :mod:`._distance`).

L̇_ij = Ḋ_ij / D_ij. Inside a cluster D_ij decays like e^{−2t}: a straight line in L, which the
Runge–Kutta steps follow exactly, where in D it held the step size to the stability limit (36%
fewer steps on a Fig. 3 panel). The threshold test ⟨x_i, x_j⟩ ≥ 1 − δ becomes L_ij ≤ log δ,
and the error control is relative in D_ij. The diagonal holds a constant (exp → 0 exactly),
so diag(D) = 0 (|x_i| = 1) holds exactly in floating point.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._distance import distance_rate
from ._form import AbstractStateForm

# log D_ii: exp(LOG_ZERO) = 0 exactly in float32 and float64, so D_ii = 0 and L̇_ii = 0.
LOG_ZERO = -1000.0


def log_floor(delta: float, dtype) -> float:
    """Smallest distance whose rate the log form resolves: far below δ, far above rounding,
    max(10⁻³ δ, 100 eps)."""
    return max(1e-3 * delta, 100 * float(jnp.finfo(dtype).eps))


class LogDistance(AbstractStateForm):
    """State L (n × n), L_ij = log(1 − ⟨x_i, x_j⟩) (L_ii = ``LOG_ZERO``), for SA
    (``"softmax"``) or USA (``"n"``) with Q = K = V = I; clustered pairs are L_ij ≤ log δ.

    The rate is L̇ = Ḋ / max(D, floor). Ḋ_ij = O(D_ij) is computed as a difference of O(1)
    terms, with a rounding error ≈ eps; dividing by max(D_ij, floor) (eps ≪ floor ≤ δ/16, see
    :func:`log_floor`) keeps the rate of pairs far inside the threshold bounded: below the
    floor a pair moves more slowly than the true flow, so it can only stay clustered longer,
    and only once it is already 16× (float32, δ = 1e-3: 83×) closer than δ.

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._phase._log_distance import LogDistance, LOG_ZERO
        >>> form = LogDistance((2, 2), "softmax", jnp.asarray(1e-3), jnp.asarray(1e-6))
        >>> L = jnp.array([[LOG_ZERO, 0.0], [0.0, LOG_ZERO]])  # two orthogonal tokens, D_12 = 1
        >>> form.rate(L, jnp.asarray(0.0), {}).tolist()  # β = 0: Ḋ_12 = −1, so L̇_12 = −1/D_12
        [[0.0, -1.0], [-1.0, 0.0]]
    """

    shape: tuple[int, int] = eqx.field(static=True)
    normalization: str = eqx.field(static=True)
    delta: Float[Array, ""]
    floor: Float[Array, ""]
    signed: bool = eqx.field(static=True, default=True)
    """Whether some β may be negative (:func:`._distance.distance_rate`); False only for β ≥ 0."""

    def rate(self, y, beta, params):
        del params
        D = jnp.exp(y)
        rate = distance_rate(D, beta, self.normalization, signed=self.signed)
        return rate / jnp.maximum(D, self.floor)

    def clustered(self, y) -> Bool[Array, "*batch nn"]:
        # L_ii = LOG_ZERO ≤ log δ: the diagonal is marked.
        return y <= jnp.log(self.delta)
