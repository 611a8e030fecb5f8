"""The package's DP5(4) stepper and the phase engine's step-size control against scipy's RK45
(same tableau, error norm and step size rule): accepted and rejected steps, step by step, and the
phase engine's early stop against a scipy solve of a system one pair short of clustered."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import RK45, solve_ivp

import attnflow as af
from attnflow._integrators._dopri5 import dopri5_step, error_norm, step_factor
from attnflow._phase._driver import FIRST_STEP
from attnflow._phase._log_distance import LOG_ZERO, log_floor


def van_der_pol(y, xp, mu=4.0):
    """ẏ for two independent Van der Pol oscillators (stiff enough to reject steps)."""
    u, v = y[..., 0::2], y[..., 1::2]
    return xp.stack([v, mu * (1 - u * u) * v - u], axis=-1).reshape(y.shape)


def scipy_steps(fun, y0, t1, rtol, atol, first_step, stop=None):
    """scipy RK45 step by step: accepted times and states, and the rejected steps (from its
    evaluation count: 1 for F(y0), 6 per step tried). ``stop(y)`` ends after a step (early
    stop)."""
    solver = RK45(lambda t, y: fun(y), 0.0, y0, t1, rtol=rtol, atol=atol, first_step=first_step)
    ts, ys = [], []
    while solver.status == "running":
        solver.step()
        ts.append(solver.t)
        ys.append(solver.y.copy())
        if stop is not None and stop(solver.y):
            break
    assert solver.status != "failed"
    tried = (solver.nfev - 1) // 6
    return np.array(ts), np.array(ys), tried - len(ts)


def package_steps(rate, y0, t1, rtol, atol, first_step):
    """The same solve with the package's stepper, error norm and step factor."""

    @jax.jit
    def attempt(y, f, h, after_rejection):
        y_new, f_new, err = dopri5_step(rate, y, f, h)
        norm = error_norm(err, y, y_new, rtol, atol)
        return y_new, f_new, norm, step_factor(norm, after_rejection=after_rejection)

    t, y, h = 0.0, jnp.asarray(y0), first_step
    f = rate(y)
    ts, ys, rejected, after_rejection = [], [], 0, False
    while t < t1:
        last = h >= t1 - t
        h = t1 - t if last else h
        y_new, f_new, norm, factor = attempt(y, f, h, after_rejection)
        if norm <= 1:
            t = t1 if last else t + h
            y, f = y_new, f_new
            ts.append(t)
            ys.append(np.asarray(y))
        else:
            rejected += 1
        after_rejection = bool(norm > 1)
        h = h * float(factor)
    return np.array(ts), np.array(ys), rejected


def test_adaptive_solve_matches_scipy_rk45_step_by_step():
    y0 = np.array([2.0, 0.0, 0.5, 1.0])
    kw = dict(t1=8.0, rtol=1e-5, atol=1e-8, first_step=0.5)  # a first step to reject
    ts, ys, rejected = package_steps(lambda y: van_der_pol(y, jnp), y0, **kw)
    ref_ts, ref_ys, ref_rejected = scipy_steps(lambda y: van_der_pol(y, np), y0, **kw)
    assert ref_rejected >= 5  # the step-size rule after rejections is exercised
    assert len(ts) == len(ref_ts) and rejected == ref_rejected
    np.testing.assert_allclose(ts, ref_ts, rtol=1e-12)
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-10, atol=1e-12)


def test_step_factor_is_scipys_rule():
    norms = np.array([0.0, 1e-9, 0.3, 0.99, 1.5, 1e3, np.inf])
    with np.errstate(divide="ignore"):
        growth = 0.9 * norms**-0.2
    ref = np.where(norms == 0, 10.0, np.minimum(10.0, growth))
    ref = np.where(norms < 1, ref, np.maximum(0.2, growth))
    np.testing.assert_allclose(step_factor(jnp.asarray(norms)), ref, rtol=1e-15)
    after = np.where(norms < 1, np.minimum(ref, 1.0), ref)
    np.testing.assert_allclose(step_factor(jnp.asarray(norms), after_rejection=True), after)


# The phase engine's systems: Q = K = V = I, d ≥ 3, run in log-distances L = log D.
N, DELTA, RTOL, ATOL = 6, 1e-3, 1e-3, 1e-6


def log_distance_rate(L, beta, floor):
    """L̇ = Ḋ/max(D, floor), Ḋ = −(⟨ẋ_i, x_j⟩ + ⟨x_i, ẋ_j⟩) written from the (SA) flow of the
    tokens in distances (NumPy transcription of the module docstring of _distance)."""
    D = np.exp(L.reshape(N, N))
    E = np.exp(-beta * D)
    AD = (E @ D) / E.sum(axis=1)[:, None]
    r = np.diag(AD)
    u = 1 - r
    dD = AD + AD.T - r[:, None] - r[None, :] - (u[:, None] + u[None, :]) * D
    return (dD / np.maximum(D, floor)).ravel()


def log_distances(x):
    off = ~np.eye(N, dtype=bool)
    D = np.where(off, np.maximum(1 - x @ x.T, 0), 0)
    return np.where(off, np.log(np.maximum(D, np.finfo(float).tiny)), LOG_ZERO).ravel()


def full_count(L):
    return np.sum(L.reshape(N, N)[~np.eye(N, dtype=bool)] <= np.log(DELTA)) == N * (N - 1)


def engine_steps(x0, betas, ts):
    result = af.phase_diagram_from_tokens_result(
        jnp.asarray(x0),
        betas=betas,
        ts=ts,
        rtol=RTOL,
        atol=ATOL,
        chunk_size=4,
        beta_block=2,
    )
    return result, np.asarray(result.accepted), np.asarray(result.rejected)


def reference_steps(x0, beta, t1):
    floor = log_floor(DELTA, np.float64)

    def fun(L):
        with np.errstate(over="ignore", invalid="ignore"):  # trial steps far too long
            return log_distance_rate(L, beta, floor)

    L0 = log_distances(x0)
    first = FIRST_STEP
    if first is None:  # the engine's rule: 0.1 RMS(y/s)/RMS(F(y)/s) in [1e-6, 1]
        scale = ATOL + RTOL * np.abs(L0)
        rms = lambda z: np.sqrt(np.mean(z * z))
        first = float(np.clip(0.1 * rms(L0 / scale) / max(rms(fun(L0) / scale), 1e-10), 1e-6, 1))
    return scipy_steps(fun, L0, t1, RTOL, ATOL, first, stop=full_count)


def test_phase_engine_step_counts_match_scipy_rk45():
    """Every system's accepted and rejected steps equal scipy's RK45 on the same ODE, the same
    tolerances and first step (up to the early stop, applied to both)."""
    x0 = np.asarray(af.random_tokens(jax.random.key(3), N, 8, (4,)))
    betas, ts = [0.5, 2.0, 6.0], np.linspace(0.0, 20.0, 5)
    _, accepted, rejected = engine_steps(x0, betas, ts)
    for b, beta in enumerate(betas):
        for r in range(4):
            ref_ts, _, ref_rejected = reference_steps(x0[r], beta, ts[-1])
            assert (accepted[b, r], rejected[b, r]) == (len(ref_ts), ref_rejected), (b, r)
    assert rejected.sum() >= 1 and accepted.min() >= 5


def one_pair_short():
    """Six tokens on a great circle: the two ends at 1 − cos = 2.5 δ, the other four near the
    middle, within δ of every token: every pair but one (both orders) is clustered."""
    phi = np.arccos(1 - 2.5 * DELTA)
    angles = phi * np.array([0.0, 1.0, 0.44, 0.48, 0.52, 0.56])
    basis = np.linalg.qr(np.random.default_rng(0).normal(size=(8, 2)))[0].T
    return np.cos(angles)[:, None] * basis[0] + np.sin(angles)[:, None] * basis[1]


@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_early_stop_one_pair_short(beta):
    """All pairs but one clustered over several save times: the engine must count n(n−1) − 2
    at each (a stop one pair early counts n(n−1)), and its steps equal scipy's RK45 with the
    stop at full clustering."""
    x = one_pair_short()
    L0 = log_distances(x).reshape(N, N)
    off = ~np.eye(N, dtype=bool)
    assert np.sum(L0[off] > np.log(DELTA)) == 2  # one pair (both orders) outside δ
    # A tight solve: the time the last pair enters the threshold.
    floor = log_floor(DELTA, np.float64)
    sol = solve_ivp(
        lambda t, L: log_distance_rate(L, beta, floor),
        (0, 10),
        L0.ravel(),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        dense_output=True,
        events=lambda t, L: L.reshape(N, N)[0, 1] - np.log(DELTA),
    )
    t_in = sol.t_events[0][0]
    # Save times every t_in/10 (none at t_in itself), and t1 = 30 as in Fig. 3.
    ts = np.append(np.linspace(0.0, 2 * t_in, 20), 30.0)
    short = ts < t_in
    assert short.sum() >= 5  # several save times one pair short
    result, accepted, rejected = engine_steps(x[None], [beta], ts)
    counts = np.asarray(result.probability)[0] * N * (N - 1)
    expected = np.where(short, N * (N - 1) - 2, N * (N - 1))
    np.testing.assert_array_equal(np.round(counts), expected)
    ref_ts, ref_ys, ref_rejected = reference_steps(x, beta, ts[-1])
    assert ref_ts[-1] < ts[-1] and full_count(ref_ys[-1])  # the reference stopped early too
    assert (accepted[0, 0], rejected[0, 0]) == (len(ref_ts), ref_rejected)
