r"""The package's one adaptive Dormand–Prince 5(4) stepper: the tableau, error control and step
size rule of scipy's ``RK45``, and a cubic Hermite dense output.

For an autonomous ODE ẏ = F(y) (Dormand & Prince 1980, J. Comput. Appl. Math. 6:19–26), stages
k_1 = F(y), k_s = F(y + h Σ_{r<s} a_sr k_r) (s = 2 … 6),

    y_new = y + h Σ_s b_s k_s,   err = h Σ_s e_s k_s  (s = 1 … 7, k_7 = F(y_new)),

where err is the difference between the 5th-order solution and the embedded 4th-order one (the
first-same-as-last stage k_7 is the next step's k_1). A step is accepted when

    ‖err‖ = RMS_i( err_i / (atol + rtol max(|y_i|, |y_new,i|)) ) ≤ 1,

and the next trial step is h · clip(0.9 ‖err‖^(−1/5), 0.2, 10) (10 when ‖err‖ = 0; at most 1
on a step that follows a rejection, and on a rejected one) — scipy's ``RK45`` rule. Between the
ends of a step the solution is the cubic Hermite interpolant of (y, F(y)) and (y_new, F(y_new)).

Used by the phase engine (:mod:`attnflow._phase`, many systems side by side, one step size per
system) and the staircase flow (:func:`attnflow.models.rescaled_staircase`).
"""

from collections.abc import Callable

import jax.numpy as jnp
from jaxtyping import Array, Float

# Stage matrix, weights and error weights of scipy's RK45. The fields integrated here are
# autonomous, so the nodes c_s are not needed.
A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
)
B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
E = (-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40)

# scipy's RK45 step size rule: safety factor and the bounds on one step's change.
SAFETY = 0.9
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0

# Field evaluations per step (accepted or rejected): stages 2 … 6 and F(y_new).
EVALUATIONS_PER_STEP = 6


def dopri5_step(
    rate: Callable[[Array], Array], y: Float[Array, "*batch"], f: Float[Array, "*batch"], h
) -> tuple[Array, Array, Array]:
    """One Dormand–Prince 5(4) step of ẏ = rate(y) from y with f = rate(y).

    ``h`` is the step, broadcastable against y (one step size per system of a batch). Returns
    (y_new, rate(y_new), err) with err the embedded error estimate h Σ e_s k_s; six
    evaluations of ``rate``.

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._integrators._dopri5 import dopri5_step
        >>> y = jnp.array([1.0])
        >>> y_new, f_new, err = dopri5_step(lambda y: -y, y, -y, 0.1)
        >>> bool(abs(y_new[0] - jnp.exp(-0.1)) < 1e-8), bool(abs(err[0]) < 1e-8)
        (True, True)
    """
    ks = [f]
    for a_row in A[1:]:
        stage = y + h * sum(a * k for a, k in zip(a_row, ks, strict=True) if a != 0)
        ks.append(rate(stage))
    y_new = y + h * sum(b * k for b, k in zip(B, ks, strict=True) if b != 0)
    f_new = rate(y_new)
    ks.append(f_new)
    err = h * sum(e * k for e, k in zip(E, ks, strict=True) if e != 0)
    return y_new, f_new, err


def rms(x: Float[Array, "*batch N"]) -> Float[Array, "*batch"]:
    """Root mean square over the last axis, (Σ_i x_i² / N)^(1/2).

    The sum is a product with a vector of ones: XLA's CPU backend runs a long reduction as a
    tree of windows, several times slower than the product.
    """
    return jnp.sqrt(((x * x) @ jnp.ones(x.shape[-1], x.dtype)) / x.shape[-1])


def error_norm(err, y, y_new, rtol, atol) -> Array:
    """‖err‖ = RMS(err / (atol + rtol max(|y|, |y_new|))) over the last axis (scipy's RK45 norm).

    A trial step far too long can overflow: a non-finite norm is returned as +inf, so the step
    is rejected with the strongest reduction.

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._integrators._dopri5 import error_norm
        >>> err = jnp.array([4e-3, 0.0])  # scale 1e-3 + 1e-3 · 1: RMS of (2, 0) is √2
        >>> round(float(error_norm(err, jnp.ones(2), jnp.ones(2), 1e-3, 1e-3)), 6)
        1.414214
    """
    scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
    norm = rms(err / scale)
    return jnp.where(jnp.isfinite(norm), norm, jnp.inf)


def step_factor(norm, *, after_rejection=False, max_factor: float = MAX_FACTOR) -> Array:
    """The next trial step over this one: clip(0.9 ‖err‖^(−1/5), 0.2, max_factor), ``max_factor``
    when ‖err‖ = 0, and at most 1 when the step is rejected (‖err‖ > 1) or accepted right
    after a rejection (``after_rejection``; scipy's RK45 rule, which keeps a step size just
    found acceptable from being raised again at once).

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._integrators._dopri5 import step_factor
        >>> [round(float(v), 4) for v in step_factor(jnp.array([0.0, 1e-6, 2.0]))]
        [10.0, 10.0, 0.7835]
    """
    growth = jnp.where(norm == 0, max_factor, SAFETY * norm ** (-0.2))
    cap = jnp.where((norm <= 1) & ~jnp.asarray(after_rejection), max_factor, 1.0)
    return jnp.clip(growth, MIN_FACTOR, cap)


def hermite_coefficients(y, f, y_new, f_new, h) -> list[Array]:
    """Coefficients (c_0, c_1, c_2) of the cubic Hermite interpolant of a step of size h,

        y(t + θh) = y + θ(c_0 + θ(c_1 + θ c_2)),  θ ∈ [0, 1],

    which matches y and h·f at θ = 0 and y_new and h·f_new at θ = 1: c_0 = h f,
    c_1 = 3Δ − h(2f + f_new), c_2 = h(f + f_new) − 2Δ with Δ = y_new − y.
    """
    delta_y = y_new - y
    return [h * f, 3 * delta_y - h * (2 * f + f_new), h * (f + f_new) - 2 * delta_y]


def hermite_value(y, coeffs, theta):
    """y + θ(c_0 + θ(c_1 + θ c_2)) (Horner) for ``coeffs`` from :func:`hermite_coefficients`."""
    poly = coeffs[-1]
    for c in coeffs[-2::-1]:
        poly = c + theta * poly
    return y + theta * poly
