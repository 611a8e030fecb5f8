"""The distance form D = 1 − G = (|x_i − x_j|²/2)_ij of a system with Q = K = V = I.

From Ġ = A G + (A G)ᵀ − (s_i + s_j) G, s_i = (A G)_ii, A = softmax(βG) (or e^{βG}/n), and
G = 1 − D (with a_i = Σ_k A_ik, r_i = (AD)_ii, so (AG)_ij = a_i − (AD)_ij, s_i = a_i − r_i), the
flow of D is closed:

    Ḋ_ij = (AD)_ij + (AD)_ji − r_i − r_j − (a_i + a_j − r_i − r_j) D_ij,  A ∝ exp(−βD).

The threshold test ⟨x_i, x_j⟩ ≥ 1 − δ is D_ij ≤ δ, without the cancellation of 1 − G_ij.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._form import AbstractStateForm


def distance_rate(
    D: Float[Array, "n n"], beta, normalization: str, *, signed: bool = True
) -> Float[Array, "n n"]:
    """Ḋ for D = 1 − G = (|x_i − x_j|²/2)_ij, Q = K = V = I (derivation in the module docstring).

    With A = softmax(−βD) (or e^{β − βD}/n), a_i = Σ_k A_ik and r_i = (A D)_ii:
    Ḋ_ij = (AD)_ij + (AD)_ji − r_i − r_j − (a_i + a_j − r_i − r_j) D_ij. Since r = diag(AD)
    exactly, Ḋ_ii = 0 in floating point: diag(D) = 0 (|x_i| = 1) is kept exactly.

    ``signed`` (static): whether β may be negative. True takes the exponentials with the row
    shift below, valid for either sign; False leaves it out and is only for β ≥ 0, where the
    shift is exactly 0 (the same values bitwise, without its pass over D and its reductions:
    the phase driver passes False when every β of the call is ≥ 0).

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._phase._distance import distance_rate
        >>> D = jnp.array([[0.0, 1.0], [1.0, 0.0]])  # two orthogonal tokens
        >>> bool(jnp.all(distance_rate(D, 2.0, "softmax", signed=False)
        ...               == distance_rate(D, 2.0, "softmax")))
        True
    """
    if signed:
        # Row shift m_i = max_j(−βD_ij): 0 for β ≥ 0 (D ≥ 0, D_ii = 0: the values are
        # unchanged), −β max_j D_ij for β < 0, where the largest weight is at the farthest
        # token. Then exp(−βD − m) ∈ (0, 1] with a 1 in every row: no overflow, row sums ≥ 1.
        m = jnp.maximum(-beta, 0) * jnp.max(D, axis=-1, keepdims=True)
        E, log_scale = jnp.exp(-beta * D - m), beta + m
    else:
        # β ≥ 0 and D ≥ 0: exp(−βD) ∈ (0, 1] with E_ii = 1 already.
        E, log_scale = jnp.exp(-beta * D), beta
    if normalization == "softmax":
        AD = (E @ D) / jnp.sum(E, axis=-1)[:, None]
        a = 1
    else:
        A = E * (jnp.exp(log_scale) / D.shape[0])
        AD = A @ D
        a = jnp.sum(A, axis=-1)
    r = jnp.diagonal(AD)
    u = a - r
    return AD + AD.T - (r[:, None] + r[None, :]) - (u[:, None] + u[None, :]) * D


class Distance(AbstractStateForm):
    """State D (n × n), D_ij = 1 − ⟨x_i, x_j⟩, for SA (``"softmax"``) or USA (``"n"``) with
    Q = K = V = I; clustered pairs are D_ij ≤ δ. Used where δ is too close to the rounding
    level for :class:`LogDistance` (below about 2e-4 in float32).

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._phase._distance import Distance
        >>> form = Distance((2, 2), "softmax", jnp.asarray(1e-3))
        >>> D = jnp.array([[0.0, 1.0], [1.0, 0.0]])  # two orthogonal tokens
        >>> # β = 0: ẋ_1 = x_2/2, ẋ_2 = x_1/2, so d⟨x_1, x_2⟩/dt = 1
        >>> form.rate(D, jnp.asarray(0.0), {}).tolist()
        [[0.0, -1.0], [-1.0, 0.0]]
    """

    shape: tuple[int, int] = eqx.field(static=True)
    normalization: str = eqx.field(static=True)
    delta: Float[Array, ""]
    signed: bool = eqx.field(static=True, default=True)
    """Whether some β may be negative (:func:`distance_rate`); False only for β ≥ 0."""

    def rate(self, y, beta, params):
        del params
        return distance_rate(y, beta, self.normalization, signed=self.signed)

    def clustered(self, y) -> Bool[Array, "*batch nn"]:
        # D_ij = 1 − ⟨x_i, x_j⟩ is stored directly: no cancellation near the threshold.
        return y <= self.delta
