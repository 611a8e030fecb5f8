r"""The perceptron (feed-forward) block on R^d with piecewise-constant weights, and its exact flow.

Ruiz-Balet–Zuazua and Geshkovski et al. (normalising flows by perceptron controls; ../seeds/001)
steer the continuity equation ∂_t ρ + div(ρ v) = 0 with v(x) = Σ_k w_k (a_kᵀx + b_k)_+ and
controls θ = (w, a, b) constant between switching times. Not an attention field: it does not use
the attention kernel and does not live on the sphere.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._check import accepts_array_likes, as_array, check_tokens, is_traced
from ._base import AbstractPureField

__all__ = ["Perceptron"]


def _expm1_over(z):
    """(e^z − 1)/z, smooth through z = 0 (1 + z/2 + z²/6 there)."""
    small = jnp.abs(z) < 1e-4
    zs = jnp.where(small, 1.0, z)
    return jnp.where(small, 1 + z / 2 + z**2 / 6, jnp.expm1(zs) / zs)


class Perceptron(AbstractPureField):
    r"""The perceptron field on R^d, v(t, x) = Σ_k w_k(t) (a_k(t)ᵀx + b_k(t))_+, with weights
    constant on each piece [s_{ℓ−1}, s_ℓ) of the switching times s_0 < … < s_{L−2}.

    For one neuron (width 1) a piece has the exact flow map (``flow_map``): with s = aᵀx + b and
    c = aᵀw, ṡ = c s_+, so on the active side s > 0

        s(t) = s_0 e^{ct},   x(t) = x_0 + w s_0 (e^{ct} − 1)/c,   det ∂x(t)/∂x_0 = e^{ct},

    (det(I + ((e^{ct} − 1)/c) w aᵀ) = 1 + (e^{ct} − 1) aᵀw/c), and the inactive side s ≤ 0 is
    fixed. The sign of s never changes within a piece, so the map is exact; a piecewise-constant
    control composes one such map per piece, and the pushed density obeys
    log ρ_t(x(t)) = log ρ_0(x_0) − Σ_pieces c_ℓ τ_ℓ 1[s_ℓ > 0].

    Shapes. One piece: ``w``, ``a``: (d,) (one neuron) or (m, d) (rows w_k, a_k); ``b``: () or
    (m,). Piecewise (``switch_times`` of shape (L − 1,)): a leading axis L, i.e. (L, d), (L, d),
    (L,) for one neuron per piece or (L, m, d), (L, m, d), (L, m).

    Signature ``field(t, x, args) -> (n, d)`` (diffrax's) on one system x: (n, d) of points;
    use ``diffrax.diffeqsolve`` with ``PIDController(jump_ts=field.jump_times)``.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> f = af.Perceptron(jnp.array([1.0, 0.0]), jnp.array([1.0, 0.0]), 0.0)
        >>> x = jnp.array([[1.0, 2.0], [-1.0, 2.0]])
        >>> y, logdet = f.flow_map(x, 1.0)   # s = x_1 grows as e^t; x_1 < 0 stays
        >>> bool(jnp.allclose(y, jnp.array([[jnp.e, 2.0], [-1.0, 2.0]]))), logdet.tolist()
        (True, [1.0, 0.0])
    """

    w: Float[Array, "L m d"]
    a: Float[Array, "L m d"]
    b: Float[Array, "L m"]
    switch_times: Float[Array, " switches"]

    def __init__(self, w, a, b, switch_times=None):
        w, a, b = jnp.asarray(w), jnp.asarray(a), jnp.asarray(b)
        if switch_times is None:
            switch_times = jnp.zeros((0,), dtype=jnp.result_type(w.dtype, float))
            offset = 0
        else:
            switch_times = jnp.asarray(switch_times)
            if not jnp.issubdtype(switch_times.dtype, jnp.floating):
                switch_times = switch_times.astype(float)
            if switch_times.ndim != 1:
                raise ValueError(
                    f"switch_times: expected a 1-d array of increasing times, got shape "
                    f"{switch_times.shape}"
                )
            offset = 1
        if w.ndim not in (1 + offset, 2 + offset) or a.shape != w.shape:
            expected = "(d,) or (m, d)" if not offset else "(L, d) or (L, m, d)"
            raise ValueError(
                f"w, a: expected equal shapes {expected}, got w {w.shape} and a {a.shape}"
            )
        if w.ndim == 1 + offset:  # one neuron per piece
            w, a, b = w[..., None, :], a[..., None, :], b[..., None]
        if not offset:
            w, a, b = w[None], a[None], b[None]
        if b.shape != w.shape[:2]:
            raise ValueError(
                f"b: expected shape {w.shape[:2] if offset else w.shape[1:2]} (one bias per "
                f"neuron{' and piece' if offset else ''}), got {jnp.shape(b)}"
            )
        num_pieces = w.shape[0]
        if switch_times.shape[0] != num_pieces - 1:
            raise ValueError(
                f"switch_times: expected L - 1 = {num_pieces - 1} times for the L = {num_pieces} "
                f"pieces of w, a, b, got {switch_times.shape[0]}"
            )
        for name, value in (("w", w), ("a", a), ("b", b), ("switch_times", switch_times)):
            if not jnp.issubdtype(value.dtype, jnp.floating):
                raise ValueError(f"{name}: expected a floating-point array, got {value.dtype}")
            if not is_traced(value) and not np.all(np.isfinite(np.asarray(value))):
                raise ValueError(f"{name}: contains NaN or inf")
        if not is_traced(switch_times) and np.any(np.diff(np.asarray(switch_times)) <= 0):
            raise ValueError(
                f"switch_times: expected strictly increasing times, got {np.asarray(switch_times)}"
            )
        self.w, self.a, self.b, self.switch_times = w, a, b, switch_times

    @property
    def num_pieces(self) -> int:
        """L, the number of constant pieces."""
        return self.w.shape[0]

    @property
    def width(self) -> int:
        """m, the number of neurons per piece."""
        return self.w.shape[1]

    @property
    def jump_times(self) -> Float[Array, " switches"]:
        """The switching times (diffrax ``jump_ts``)."""
        return self.switch_times

    def piece_index(self, t) -> Int[Array, ""]:
        """ℓ with s_{ℓ−1} ≤ t < s_ℓ (right-continuous: at t = s_ℓ the new piece applies)."""
        t = jnp.asarray(t)
        return jnp.searchsorted(self.switch_times, t.astype(self.switch_times.dtype), side="right")

    def _check_points(self, x):
        x = as_array(x, "x")
        if jnp.ndim(x) != 2 or jnp.shape(x)[1] != self.w.shape[2]:
            raise ValueError(
                f"x: expected points of shape (n, {self.w.shape[2]}), got shape {jnp.shape(x)}"
            )
        if not is_traced(x):
            check_tokens(x, "x", unit=False)  # points of R^d: real and finite

    @accepts_array_likes("x")
    def __call__(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        self._check_points(x)
        k = self.piece_index(t)
        w, a, b = (jnp.asarray(p[k], x.dtype) for p in (self.w, self.a, self.b))
        return jax.nn.relu(x @ a.T + b[None, :]) @ w

    def potential(self, x: Float[Array, "n d"], t=0.0) -> Float[Array, " n"]:
        """Φ(x) = Σ_k (c_k/2)(a_kᵀx + b_k)_+² when the piece at t has w_k = c_k a_k (then the
        field is ∇Φ). Raises ``ValueError`` if some w_k is not parallel to a_k."""
        self._check_points(x)
        k = self.piece_index(t)
        w, a, b = (jnp.asarray(p[k], x.dtype) for p in (self.w, self.a, self.b))
        norm2 = jnp.sum(a * a, axis=-1)
        c = jnp.sum(w * a, axis=-1) / jnp.where(norm2 > 0, norm2, 1.0)
        if not is_traced(w):
            residual = np.abs(np.asarray(w - c[:, None] * a)).max()
            if residual > 1e-6 * max(1.0, float(np.abs(np.asarray(w)).max())):
                raise ValueError(
                    f"w: the field is a gradient only when every w_k = c_k a_k; max |w_k − c_k "
                    f"a_k| = {residual:.3g}"
                )
        return jnp.sum(c[None, :] / 2 * jax.nn.relu(x @ a.T + b[None, :]) ** 2, axis=-1)

    def flow_map(self, x: Float[Array, "n d"], t1, t0=0.0):
        """The exact flow from t0 to t1 ≥ t0 of a one-neuron-per-piece perceptron, and the
        log-determinant of its Jacobian.

        Returns:
            ``(y (n, d), logdet (n,))``: y = x(t1) from x(t0) = x, and
            log det ∂y/∂x = Σ_ℓ c_ℓ τ_ℓ 1[a_ℓᵀx_ℓ + b_ℓ > 0] (τ_ℓ the time spent in piece ℓ).
            Differentiable in x, the weights, t0 and t1.
        """
        self._check_points(x)
        if self.width != 1:
            raise ValueError(
                f"w: the closed-form flow map needs one neuron per piece (width 1), got width "
                f"{self.width}; integrate the field with diffrax instead"
            )
        dtype = x.dtype
        t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
        if not is_traced(t0) and not is_traced(t1) and float(t1) < float(t0):
            raise ValueError(f"t1: expected t1 >= t0 = {float(t0)}, got {float(t1)}")
        inf = jnp.asarray([jnp.inf], dtype)
        s = self.switch_times.astype(dtype)
        starts = jnp.maximum(jnp.concatenate([-inf, s]), t0)
        ends = jnp.minimum(jnp.concatenate([s, inf]), t1)
        durations = jnp.maximum(ends - starts, 0.0)

        def piece(carry, inputs):
            y, logdet = carry
            w, a, b, tau = inputs
            w, a, b = w[0].astype(dtype), a[0].astype(dtype), b[0].astype(dtype)
            c = jnp.dot(a, w)
            s0 = y @ a + b
            active = s0 > 0
            growth = tau * _expm1_over(c * tau)
            y = y + jnp.where(active, s0 * growth, 0.0)[:, None] * w[None, :]
            logdet = logdet + jnp.where(active, c * tau, 0.0)
            return (y, logdet), None

        init = (x, jnp.zeros(x.shape[0], dtype))
        (y, logdet), _ = jax.lax.scan(piece, init, (self.w, self.a, self.b, durations))
        return y, logdet
