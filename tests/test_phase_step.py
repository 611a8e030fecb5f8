"""The phase engine's Dormand–Prince 5(4) step against scipy's RK45 (same tableau), its local
error order, and the cubic Hermite output."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from scipy.integrate import RK45

from attnflow._integrators._dopri5 import dopri5_step, hermite_coefficients, hermite_value


def lotka_volterra(y, xp):
    """An autonomous nonlinear ODE on two independent copies (written for NumPy and JAX)."""
    u, v = y[..., 0::2], y[..., 1::2]
    du, dv = u * (1.5 - v), v * (u - 3.0)
    return xp.stack([du, dv], axis=-1).reshape(y.shape)


def scipy_step(y0, h):
    """One RK45 step of size h taken by scipy: y_new, f(y_new) and h Σ e_s k_s from its stages."""
    solver = RK45(lambda t, y: lotka_volterra(y, np), 0.0, y0, h, first_step=h, rtol=1e3, atol=1e3)
    solver.step()
    assert solver.status == "finished" and solver.t == h  # accepted, exactly one step of h
    return solver.y, solver.f, h * (solver.K.T @ RK45.E)


def test_step_matches_scipy_rk45():
    y0 = np.array([1.0, 0.5, 2.0, 1.2])
    rate = lambda y: lotka_volterra(y, jnp)
    for h in (0.01, 0.1, 0.4):
        y_new, f_new, err = dopri5_step(rate, jnp.asarray(y0), rate(jnp.asarray(y0)), h)
        ref_y, ref_f, ref_err = scipy_step(y0, h)
        np.testing.assert_allclose(y_new, ref_y, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(f_new, ref_f, rtol=1e-13, atol=1e-14)
        # err is a cancellation of O(h|f|) terms: compare to rounding of those.
        np.testing.assert_allclose(err, ref_err, rtol=0, atol=1e-15 * h * np.abs(ref_f).max())
        assert np.abs(ref_err).max() > 1e3 * 1e-15 * h * np.abs(ref_f).max()  # not all rounding


def test_batched_step_sizes_are_per_system():
    """Rows with their own step sizes (h broadcast as (batch, 1)), as in the slot queue."""
    y0 = np.array([[1.0, 0.5, 2.0, 1.2], [0.7, 1.1, 1.3, 0.4], [2.0, 2.0, 0.5, 0.5]])
    hs = np.array([0.05, 0.2, 0.3])
    rate = lambda y: lotka_volterra(y, jnp)
    y_new, f_new, err = dopri5_step(rate, jnp.asarray(y0), rate(jnp.asarray(y0)), hs[:, None])
    for row, h in enumerate(hs):
        ref_y, ref_f, ref_err = scipy_step(y0[row], h)
        np.testing.assert_allclose(y_new[row], ref_y, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(err[row], ref_err, rtol=0, atol=1e-14 * h)


def test_local_error_orders():
    """ẏ = M y (exact solution expm(hM) y): the step's local error is O(h⁶) (5th order) and
    the embedded estimate O(h⁵) (the 4th-order solution's error); fitted log-log slopes."""
    M = np.array([[-0.5, 2.0, 0.0], [-2.0, -0.5, 1.0], [0.0, -1.0, -0.2]])
    y0 = np.array([1.0, -0.5, 0.3])
    hs = np.geomspace(0.02, 0.2, 6)
    rate = lambda y: jnp.asarray(M) @ y
    errors, estimates = [], []
    for h in hs:
        y_new, _, err = dopri5_step(rate, jnp.asarray(y0), rate(jnp.asarray(y0)), h)
        errors.append(np.linalg.norm(np.asarray(y_new) - scipy.linalg.expm(h * M) @ y0))
        estimates.append(np.linalg.norm(err))
    slope_error = np.polyfit(np.log(hs), np.log(errors), 1)[0]
    slope_estimate = np.polyfit(np.log(hs), np.log(estimates), 1)[0]
    assert 5.6 < slope_error < 6.4 and 4.6 < slope_estimate < 5.4


def test_hermite_interpolant_matches_values_and_slopes():
    y, y_new = jnp.array([1.0, -2.0]), jnp.array([1.5, -1.0])
    f, f_new, h = jnp.array([0.3, 2.0]), jnp.array([-1.0, 0.5]), 0.25
    coeffs = hermite_coefficients(y, f, y_new, f_new, h)
    value = lambda theta: hermite_value(y, coeffs, theta)
    np.testing.assert_allclose(value(0.0), y, rtol=0, atol=1e-15)
    np.testing.assert_allclose(value(1.0), y_new, rtol=0, atol=1e-15)
    # d/dt = (d/dθ)/h at the ends: the slopes f and f_new.
    np.testing.assert_allclose(jax.jacfwd(value)(0.0) / h, f, rtol=1e-14)
    np.testing.assert_allclose(jax.jacfwd(value)(1.0) / h, f_new, rtol=1e-14)
    # A cubic is reproduced exactly: y(s) = s³ − s on [0, h].
    p = lambda s: s**3 - s
    dp = lambda s: 3 * s**2 - 1
    cubic = hermite_coefficients(p(0.0), dp(0.0), p(h), dp(h), h)
    for theta in (0.3, 0.7):
        assert abs(hermite_value(p(0.0), cubic, theta) - p(theta * h)) < 1e-15
