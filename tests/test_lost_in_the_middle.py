"""Lost in the middle (Duerinckx–Geshkovski–Rossi): the closed-form profile S_t(s), its threshold
t_crit and ψ, against independent computations: the power series of ψ in mpmath, finite
differences of S_t at s = 1, the exact finite-N linear response (scipy matrix exponential, O(1/N)
slope), NumPy RK4 of the θ-equation, and a particle Monte Carlo."""

import math

import jax.numpy as jnp
import jax.random as jr
import mpmath as mp
import numpy as np
import pytest
from scipy.linalg import expm
from scipy.special import iv

import attnflow as af
import attnflow.theory as th
from attnflow.figures import lost_in_the_middle as litm


def psi_series(c, y, terms=4000):
    """Σ_k c^{k+1} y^k / (k!(k+1)!) term by term in 50-digit arithmetic."""
    with mp.workdps(50):
        c, y = mp.mpf(c), mp.mpf(y)
        term, total = c, c
        for k in range(terms):
            term *= c * y / ((k + 1) * (k + 2))
            total += term
            if term < total * mp.mpf(10) ** -40:
                break
        return float(total)


@pytest.mark.parametrize(
    "c, y",
    [(0.0, 3.0), (2.0, 0.0), (1e-8, 1e-8), (0.3, 0.02), (1.0, 1.0), (40.0, 5.0), (3e3, 80.0)],
)
def test_psi_against_its_power_series(c, y):
    # The last case has 2√(cy) ≈ 980: I_1 overflows float64 there, ψ itself does not.
    np.testing.assert_allclose(float(th.psi(c, y)), psi_series(c, y), rtol=1e-12)


def test_psi_float32_large_argument():
    value = th.psi(np.float32(30.0), np.float32(20.0))
    assert value.dtype == jnp.float32
    np.testing.assert_allclose(float(value), psi_series(30.0, 20.0), rtol=1e-5)


def test_threshold_matches_the_issue_numbers():
    assert th.lost_in_the_middle_threshold(1.0, 1.0) == pytest.approx(2.4575, abs=5e-5)
    assert th.lost_in_the_middle_threshold(2.0, 1.0) == pytest.approx(0.6007, abs=5e-5)
    assert th.lost_in_the_middle_threshold(1.5, 0.0) == 0.0


@pytest.mark.parametrize("beta, lam", [(1.0, 1.0), (2.0, 1.0), (0.5, 3.0), (3.0, 0.25)])
def test_threshold_is_where_the_slope_at_one_changes_sign(beta, lam):
    t_crit = th.lost_in_the_middle_threshold(beta, lam)
    h = 1e-5

    def slope(t):  # one-sided second-order finite difference at s = 1
        s = jnp.array([1.0, 1.0 - h, 1.0 - 2 * h])
        f = np.asarray(th.lost_in_the_middle_profile(s, t, beta, lam))
        return (3 * f[0] - 4 * f[1] + f[2]) / (2 * h)

    assert slope(0.99 * t_crit) > 0 > slope(1.01 * t_crit)
    # Below t_crit: a unique interior minimum on a fine grid; above it, the profile decreases
    # into s = 1 (no recency).
    s = np.linspace(0.01, 1.0, 2001)
    below = np.asarray(th.lost_in_the_middle_profile(s, 0.5 * t_crit, beta, lam))
    minima = np.flatnonzero((below[1:-1] < below[:-2]) & (below[1:-1] < below[2:]))
    assert len(minima) == 1 and 0 < s[minima[0] + 1] < 1
    above = np.asarray(th.lost_in_the_middle_profile(s, 1.5 * t_crit, beta, lam))
    assert above[-1] < above[-2]


def finite_n_linear_response(N, t, s, beta, lam, M=8.0, n_max=20):
    """N·Σ_n ω_n [exp(n² I_n(β) t W)]_{N,sN}, W_jk = e^{−λ(j−k)/N}/Σ_{k'<j}(…) for k < j: the
    linearised correlation system written from the issue's model."""
    j, k = np.meshgrid(np.arange(N), np.arange(N), indexing="ij")
    W = np.where(k < j, np.exp(-lam * (j - k) / N), 0.0)
    W[1:] /= W[1:].sum(axis=1, keepdims=True)
    index = np.rint(np.asarray(s) * N).astype(int) - 1
    n = np.arange(1, n_max + 1)
    omega, a = np.exp(-((np.pi * n / M) ** 2) / 2), n**2 * iv(n, beta)
    return sum(
        omega[m] * N * expm(a[m] * t * W)[N - 1, index] for m in range(6 if beta < 2 else n_max)
    )


def test_closed_form_is_the_limit_of_the_finite_n_linear_response():
    # Modes n > 6 carry ω_n a_n < 1e-6 at β = 1: dropped in the reference to keep it fast.
    s, t, beta, lam = np.array([0.25, 0.5, 0.75]), 1.5, 1.0, 2.0
    exact = np.asarray(th.lost_in_the_middle_profile(s, t, beta, lam))
    Ns = np.array([40, 80, 160])
    errors = [np.max(np.abs(finite_n_linear_response(N, t, s, beta, lam) - exact)) for N in Ns]
    slope = np.polyfit(np.log(Ns), np.log(errors), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.05)
    assert errors[-1] < 0.01 * exact.min()


def rk4_numpy(theta, beta, lam, dt, steps):
    """Classical RK4 of θ̇_j = Σ_{k<j} w_jk (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}), loops."""
    N = len(theta)

    def force(th_):
        out = np.zeros(N)
        for j in range(1, N):
            w = np.exp(-lam * (j - np.arange(j)) / N)
            diff = th_[j] - th_[:j]
            out[j] = np.dot(w / w.sum(), -beta * np.sin(diff) * np.exp(beta * np.cos(diff)))
        return out

    for _ in range(steps):
        k1 = force(theta)
        k2 = force(theta + dt / 2 * k1)
        k3 = force(theta + dt / 2 * k2)
        k4 = force(theta + dt * k3)
        theta = theta + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return theta


def test_angle_engine_against_numpy_rk4():
    theta0 = np.random.default_rng(0).uniform(0, 2 * np.pi, 12)
    ours = litm.simulate_angles(jnp.asarray(theta0), [0.0, 1.0], 2.0, 1.5, 0.05)
    np.testing.assert_allclose(ours[0], theta0, atol=0)
    np.testing.assert_allclose(ours[1], rk4_numpy(theta0, 2.0, 1.5, 0.05, 20), atol=1e-12)


def test_causal_alibi_field_matches_the_theta_equation():
    # The field on (n, 2) with attnflow.solve against NumPy RK4 of the θ-equation.
    theta0 = np.random.default_rng(1).uniform(0, 2 * np.pi, 10)
    x0 = jnp.stack([jnp.cos(theta0), jnp.sin(theta0)], axis=-1)
    sol = af.solve(af.CausalALiBiAttention(1.5, 2.0), x0, 1.0, rtol=1e-11, atol=1e-12)
    reference = rk4_numpy(theta0, 1.5, 2.0, 1e-3, 1000)
    expected = np.stack([np.cos(reference), np.sin(reference)], axis=-1)
    np.testing.assert_allclose(sol.ys[-1], expected, atol=1e-7)


def test_monte_carlo_follows_linear_response_at_small_t():
    # Particles (coupling estimator, 2 σ) against the finite-N linear response and the closed
    # form, at t = 0.5 where linear response holds (the notebook shows where it stops holding).
    N, ts, sources = 16, [0.5], [0.25, 0.5, 0.75]
    mean, err = litm.monte_carlo_profile(
        jr.key(0), N, ts, sources, 1.0, 1.0, realizations=384, dt=0.1
    )
    linear = litm.linear_response_profile(N, ts, sources, 1.0, 1.0)
    assert np.all(err < 0.1 * np.abs(linear))
    assert np.all(np.abs(mean - linear) < 3 * err + 0.02)
    closed = np.asarray(th.lost_in_the_middle_profile(np.array(sources), 0.5, 1.0, 1.0))
    assert np.all(np.abs(mean[0] - closed) < 3 * err[0] + 0.1 * closed)


def test_particles_converge_in_n_to_the_closed_form():
    # The closed form is the N → ∞ limit: at t = 2, s = 1/4 (β = λ = 1) the particles sit below
    # it and the gap shrinks with N (fitted log-log slope; measured about −0.4 up to N = 128,
    # docstring of lost_in_the_middle_profile). A finite-N error in the model (weights, the
    # strict mask, the coupling estimator) changes the limit and fails this.
    Ns, t, s = np.array([8, 16, 32]), 2.0, 0.25
    mean, err = litm.particle_convergence(jr.key(7), Ns, [t], [s], 1.0, 1.0, realizations=256)
    closed = float(th.lost_in_the_middle_profile(s, t, 1.0, 1.0))
    gap, err = closed - mean[:, 0, 0], err[:, 0, 0]
    assert gap[0] > 3 * err[0] and np.all(gap > 0)
    assert gap[0] - gap[-1] > 3 * np.hypot(err[0], err[-1])
    slope = np.polyfit(np.log(Ns), np.log(gap), 1)[0]
    assert -1.5 < slope < -0.2


def test_particle_convergence_rejects_unresolved_sources():
    with pytest.raises(ValueError, match="sources"):
        litm.particle_convergence(jr.key(0), [8], [1.0], [0.3], 1.0, 1.0, realizations=2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"s": 0.0}, "s: expected source positions"),
        ({"s": 1.5}, "s: expected source positions"),
        ({"t": -1.0}, "t: expected finite times"),
        ({"beta": 0.0}, "beta: expected a finite number > 0"),
        ({"lam": -1.0}, "lam: expected a finite value >= 0"),
        ({"n_max": 0}, "n_max: expected an integer"),
        ({"M": -2.0}, "M: expected a finite number > 0"),
    ],
)
def test_bad_input_raises(kwargs, match):
    args = {"s": 0.5, "t": 1.0, "beta": 1.0, "lam": 1.0} | kwargs
    with pytest.raises(ValueError, match=match):
        th.lost_in_the_middle_profile(**args)


def test_float32_profile_and_lambda_zero():
    s = np.linspace(0.1, 1.0, 4, dtype=np.float32)
    f32 = th.lost_in_the_middle_profile(s, np.float32(1.0), 1.0, 0.0)
    assert f32.dtype == jnp.float32
    # λ = 0: Y = log(1/s) and prefactor 1, summed here from the series directly.
    n = np.arange(1, 21)
    omega, a = np.exp(-((np.pi * n / 8) ** 2) / 2), n**2 * iv(n, 1.0)
    expected = [
        sum(w * psi_series(c, math.log(1 / float(x))) for w, c in zip(omega, a, strict=True))
        for x in s
    ]
    np.testing.assert_allclose(f32, expected, rtol=1e-5)


def test_figure_cli_quick(tmp_path):
    import json

    from attnflow.cli import main

    assert main(["figure", "lost-in-the-middle", "--quick", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "lost_in_the_middle.json").read_text())
    assert record["params"]["t_crit"] == pytest.approx(2.4575, abs=5e-5)
    with np.load(tmp_path / "lost_in_the_middle.npz") as data:
        assert all(np.all(np.isfinite(data[k])) for k in data.files)
        # The λ = 1 threshold curve passes through the issue's value at β = 2.
        curve = data["thresholds"][list(data["threshold_lams"]).index(1.0)]
        assert np.interp(2.0, data["threshold_betas"], curve) == pytest.approx(0.6007, abs=2e-3)
        # A double well: two interior local minima.
        well = data["double_well"]
        assert np.sum((well[1:-1] < well[:-2]) & (well[1:-1] < well[2:])) == 2


def test_notebook_runs_quick(monkeypatch):
    import pathlib
    import runpy

    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parent.parent / "notebooks" / "lost_in_the_middle.py"
    ns = runpy.run_path(str(path), run_name="__main__")
    # The authors' threshold, and the notebook's particles at t = 0.5 against this file's own
    # finite-N linear response (scipy expm of the system written from the model).
    assert ns["t_crit"] == pytest.approx(2.4575, abs=5e-5)
    reference = finite_n_linear_response(ns["N"], ns["ts"][0], ns["sources"], 1.0, 1.0)
    assert np.all(np.abs(ns["mean"][0] - reference) < 3 * ns["err"][0] + 0.02)
    # The closed form against the λ-series written here, at the notebook's t = 1 and sources.
    n = np.arange(1, 21)
    omega, a = np.exp(-((np.pi * n / 8) ** 2) / 2), n**2 * iv(n, 1.0)
    y = np.log((np.e - 1) / (np.exp(ns["sources"]) - 1))
    pref = np.exp(ns["sources"]) / (np.e - 1)
    series = [
        sum(w * p * psi_series(c * 1.0, yy) for w, c in zip(omega, a, strict=True))
        for p, yy in zip(pref, y, strict=True)
    ]
    np.testing.assert_allclose(ns["exact"], series, rtol=1e-10)
