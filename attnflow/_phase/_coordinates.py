"""The coordinate form: the tokens themselves, in R^d or in an orthonormal basis of their span.

With V = I (any Q, K), ẋ_i ∈ span{x_j}, so the flow never leaves span{x_j(0)}: coordinates in
an orthonormal basis U of that span (dimension min(n, d)), with the bilinear form compressed
to Uᵀ(QᵀK)U, are exact (:func:`reduce_to_span`). General V runs in R^d.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from .._sphere import unit_rows
from ._form import AbstractStateForm


class Coordinates(AbstractStateForm):
    """State Y (n × m): token coordinates; the rate is evaluated at the unit rows ŷ_i,

        ẏ_i = P^⊥_{ŷ_i}(Σ_j a_ij V ŷ_j),  a_ij ∝ exp(β ŷ_iᵀ B ŷ_j),

    with softmax normalisation (SA, ``"softmax"``) or a_ij = exp(β ŷ_iᵀ B ŷ_j)/n (USA,
    ``"n"``); B = QᵀK and V are shared by all systems (None is the identity) unless a system's
    ``params`` holds its own ``"B"`` or ``"V"``. Clustered pairs: ⟨ŷ_i, ŷ_j⟩ ≥ 1 − δ.

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._phase._coordinates import Coordinates
        >>> form = Coordinates((2, 2), "softmax", jnp.asarray(1e-3))
        >>> Y = jnp.eye(2)  # two orthogonal tokens; β = 0: ẏ_1 = P^⊥_{y_1}(y_1 + y_2)/2
        >>> form.rate(Y, jnp.asarray(0.0), {}).tolist()
        [[0.0, 0.5], [0.5, 0.0]]
    """

    shape: tuple[int, int] = eqx.field(static=True)
    normalization: str = eqx.field(static=True)
    delta: Float[Array, ""]
    B: Float[Array, "m m"] | None = None
    V: Float[Array, "m m"] | None = None

    def rate(self, y, beta, params):
        B, V = params.get("B", self.B), params.get("V", self.V)
        # Not through attnflow._fields._kernel.attention: the engine ran slower with it on the
        # d = 2 Fig. 3 panel (the measurement is on the benchmark page).
        Y = unit_rows(y)
        logits = beta * ((Y if B is None else Y @ B) @ Y.T)
        row_max = jnp.max(logits, axis=-1, keepdims=True)
        E = jnp.exp(logits - row_max)
        if self.normalization == "softmax":
            A = E / jnp.sum(E, axis=-1, keepdims=True)
        else:
            A = E * (jnp.exp(row_max) / Y.shape[0])
        out = A @ Y
        if V is not None:
            out = out @ V.T
        return out - jnp.sum(out * Y, axis=-1, keepdims=True) * Y

    def clustered(self, y) -> Bool[Array, "*batch nn"]:
        n = self.shape[0]
        Y = unit_rows(y.reshape(y.shape[:-1] + self.shape))
        gram = Y @ jnp.swapaxes(Y, -1, -2)
        close = (gram >= 1 - self.delta) | jnp.broadcast_to(jnp.eye(n, dtype=bool), gram.shape)
        return close.reshape(y.shape[:-1] + (n * n,))


def reduce_to_span(x: Float[Array, "n d"], B: Float[Array, "d d"] | None):
    """Coordinates of x (n, d) in an orthonormal basis U of span{x_j}, and Uᵀ B U."""
    U, R = jnp.linalg.qr(x.T)  # x.T = U R with U: (d, min(n, d)) orthonormal columns
    return R.T, (None if B is None else U.T @ B @ U)
