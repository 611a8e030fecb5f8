"""The time-rescaled staircase flow and the collision model against independent computations:
a NumPy transcription of the authors' ``time_rescale_3`` (fixed normalised gradient steps), a
scipy ODE solve of the two-body problem, and the plateau levels Σ m_q²."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import attnflow as af


def time_rescale_3(theta, lr, beta, iterations):
    """The authors' scheme, typed from their script: θ ← θ + lr log β g/|g| with
    g_i = (1/n²) Σ_j −sin(θ_i − θ_j) e^{β(cos − 1)}, snapping tokens closer than 1e-3 once
    |g| < 1e-5; φ after each step. Stops where |g| = 0 (their script divides 0 by 0 there)."""
    energies = []
    for _ in range(iterations):
        diff = theta[:, None] - theta[None, :]
        g = np.sum(-np.sin(diff) * np.exp(beta * (np.cos(diff) - 1)), axis=1) / len(theta) ** 2
        norm = np.linalg.norm(g)
        if norm == 0:
            break
        theta = theta + lr * np.log(beta) * g / norm
        if norm < 1e-5:
            for j in range(len(theta)):
                for k in range(j + 1, len(theta)):
                    if abs(theta[j] - theta[k]) < 1e-3:
                        theta[k] = theta[j]
        diff = theta[:, None] - theta[None, :]
        energies.append(np.mean(np.exp(beta * (np.cos(diff) - 1))))
    return lr * np.arange(1, len(energies) + 1), np.array(energies)


def well_prepared(beta):
    """The authors' initial data: gaps 0.5·(0.5, 1.5, 2, 3)·log β/√β."""
    return 0.5 * np.array([0.0, 0.5, 2.0, 4.0, 7.0]) * np.log(beta) / np.sqrt(beta)


def test_energy_against_the_authors_fixed_step_scheme():
    # β = 12: their Euler steps (lr = 1e-4, error O(lr)) against the adaptive flow, at our nodes.
    theta0, beta = np.array([0.0, 0.4, 1.3, 2.4, 3.9]), 12.0
    run = af.models.rescaled_staircase(theta0, beta)
    s_ref, energy_ref = time_rescale_3(theta0.copy(), 1e-4, beta, 16000)
    inside = run.time < s_ref[-1]
    assert inside.sum() > 20
    np.testing.assert_allclose(
        run.energy[inside], np.interp(run.time[inside], s_ref, energy_ref), atol=3e-4
    )


@pytest.mark.parametrize("beta", [100.0, 1000.0])
def test_usa_mean_angle_is_conserved_along_the_staircase_and_across_merges(beta):
    # (USA): Σ_i θ̇_i = −Σ_ij sin(θ_i − θ_j) e^{β(cos − 1)} = 0 by antisymmetry, in s as in t, and
    # the merge centre is the mass-weighted mean angle: Σ_i θ_i is conserved through every merge.
    theta0 = np.array([0.0, 0.21, 0.5, 0.93, 1.31, 1.4, 1.9])
    run = af.models.rescaled_staircase(theta0, beta)
    assert run.finished and len(run.merges) == 6
    np.testing.assert_allclose(run.theta.mean(axis=1), theta0.mean(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("beta", [100.0, 1000.0])
def test_staircase_levels_merges_and_no_nan(beta):
    theta0 = well_prepared(beta)
    run = af.models.rescaled_staircase(theta0, beta)
    assert run.finished and run.counts[-1] == 1 and len(run.merges) == 4
    for key in ("time", "theta", "energy", "levels"):
        assert np.all(np.isfinite(getattr(run, key)))
    assert run.energy[-1] == 1.0
    # φ is non-decreasing in s (gradient ascent) and s increases.
    assert np.all(np.diff(run.energy) > -1e-12) and np.all(np.diff(run.time) >= 0)
    # Just before each merge φ sits at Σ m_q² up to the cross terms (< 1e-3 of a step at β ≥ 100,
    # 2 m_a m_b e^{−β(1 − cos u)} from the next gaps) and jumps by 2 m_a m_b over the merge.
    level = 1 / len(theta0)
    for event in run.merges:
        m_a, m_b = event.masses
        assert event.energy_after == pytest.approx(level + 2 * m_a * m_b, abs=1e-3)
        level += 2 * m_a * m_b
    assert level == pytest.approx(1.0)


@pytest.mark.parametrize("beta, rtol", [(100.0, 1e-2), (1000.0, 1e-4)])
def test_collision_model_predicts_the_merges(beta, rtol):
    theta0 = well_prepared(beta)
    run = af.models.rescaled_staircase(theta0, beta)
    model = af.models.collision_model(theta0, beta)
    assert [e.tokens for e in run.merges] == [e.tokens for e in model]
    np.testing.assert_allclose([e.time for e in run.merges], [e.s for e in model], rtol=rtol)
    assert [e.level for e in model][-1] == pytest.approx(1.0)


def test_random_tokens_at_beta_1000_float32_and_float64():
    theta0 = np.random.default_rng(4).uniform(0, 2 * np.pi, 8)
    for dtype in (np.float64, np.float32):
        run = af.models.rescaled_staircase(theta0.astype(dtype), 1000.0)
        assert run.finished and len(run.merges) == 7
        assert np.all(np.isfinite(run.energy)) and run.energy.dtype == dtype
        model = af.models.collision_model(theta0, 1000.0)
        assert [e.tokens for e in run.merges] == [e.tokens for e in model]


def test_softmax_direction_climbs_and_finishes():
    run = af.models.rescaled_staircase(well_prepared(100.0), 100.0, normalization="softmax")
    assert run.finished and np.all(np.diff(run.energy) > -1e-12)


def test_two_body_time_against_an_ode_solve():
    # u̇ = −m e^{β(cos u − 1)} sin u from u = 0.5 until u = 0.1/√β, scipy Radau.
    beta, mass, gap = 60.0, 0.4, 0.5
    end = 0.1 / math.sqrt(beta)

    def reached(t, u):
        return u[0] - end

    reached.terminal = True
    sol = solve_ivp(
        lambda t, u: -mass * np.exp(beta * (np.cos(u) - 1)) * np.sin(u),
        (0, 1e12),
        [gap],
        method="Radau",
        events=reached,
        rtol=1e-10,
        atol=1e-14,
    )
    expected = math.log(sol.t_events[0][0])
    assert af.theory.two_body_log_time(gap, mass, beta) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.zeros(1), 10.0), {}, "theta0: expected angles of shape"),
        ((np.array([0.0, np.nan]), 10.0), {}, "theta0: expected finite"),
        ((np.array([0.0, 1.0]), 1.0), {}, "beta: expected a finite scalar > 1"),
        ((np.array([0.0, 1.0]), 10.0), {"normalization": "x"}, "normalization"),
    ],
)
def test_bad_input_raises(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        af.models.rescaled_staircase(*args, **kwargs)


def _circle_rate(beta, k, softmax, eps=1e-4, m=256):
    """The mean-field (USA/SA) equation ∂_t ρ = −∂_θ(ρ v) on a grid of m angles, for
    ρ = (1 + ε cos kθ)/(2π), v(θ) = ∫ sin(φ − θ) e^{β cos(θ − φ)} ρ(φ) dφ [/ ∫ e^{β cos} ρ];
    the rate is the cos kθ coefficient of the central difference in ε, over ε/(2π)."""
    theta = 2 * np.pi * np.arange(m) / m
    diff = theta[None, :] - theta[:, None]  # φ − θ
    kernel = np.exp(beta * np.cos(diff))

    def rhs(e):
        rho = (1 + e * np.cos(k * theta)) / (2 * np.pi)
        v = (np.sin(diff) * kernel) @ rho * (2 * np.pi / m)
        if softmax:
            v = v / (kernel @ rho * (2 * np.pi / m))
        flux = np.fft.fft(rho * v)
        return -np.real(np.fft.ifft(1j * np.fft.fftfreq(m, 1 / m) * flux))

    dot = (rhs(eps) - rhs(-eps)) / (2 * eps)
    return np.mean(dot * np.cos(k * theta)) * 2 / (1 / (2 * np.pi))


@pytest.mark.parametrize("softmax", [False, True])
def test_circle_growth_rates_against_the_discretised_mean_field_equation(softmax):
    import attnflow.theory as th

    for beta in (1.0, 5.0, 12.0):
        rates = th.metastable_growth_rates(
            beta, normalization="softmax" if softmax else "n", max_degree=8
        )
        numeric = [_circle_rate(beta, k, softmax) for k in range(1, 9)]
        np.testing.assert_allclose(rates[1:], numeric, rtol=1e-8, atol=1e-10 * rates.max())


def _sphere_rate(beta, ell, eps=1e-3, h=1e-3, thetas=(0.35, 0.9, 2.3)):
    """d = 3, zonal ρ = ρ₀(1 + ε P_ℓ(cos θ)), ρ₀ = 1/(4π): v(x) = P_x ∫ e^{β⟨x,y⟩} y ρ(y) dσ(y)
    by Gauss–Legendre (cos θ') × trapezoid (azimuth) quadrature, ∂_t ρ = −(1/sin θ)
    ∂_θ(sin θ ρ v_θ) by central differences in θ and in ε; returns rate / (ρ₀ P_ℓ(cos θ))."""
    from numpy.polynomial import legendre

    t, wt = legendre.leggauss(80)
    phi = 2 * np.pi * np.arange(96) / 96
    s = np.sqrt(1 - t**2)
    y = np.stack(
        [s[:, None] * np.cos(phi)[None], s[:, None] * np.sin(phi)[None], t[:, None] + 0 * phi]
    ).reshape(3, -1)
    w = (wt[:, None] * np.full(96, 2 * np.pi / 96)[None]).reshape(-1)
    p_ell = legendre.Legendre.basis(ell)
    rho0 = 1 / (4 * np.pi)

    def flux(theta, e):
        x = np.array([np.sin(theta), 0.0, np.cos(theta)])
        e_theta = np.array([np.cos(theta), 0.0, -np.sin(theta)])
        rho_y = rho0 * (1 + e * p_ell(y[2]))
        v = (y * np.exp(beta * (x @ y)) * rho_y * w).sum(axis=1)
        return np.sin(theta) * rho0 * (1 + e * p_ell(np.cos(theta))) * (v @ e_theta)

    out = []
    for theta in thetas:

        def dot(e, theta=theta):
            return -(flux(theta + h, e) - flux(theta - h, e)) / (2 * h) / np.sin(theta)

        linear = (dot(eps) - dot(-eps)) / (2 * eps)
        out.append(linear / (rho0 * p_ell(np.cos(theta))))
    return np.array(out)


def test_sphere_growth_rates_against_the_discretised_mean_field_equation():
    import attnflow.theory as th

    for beta in (2.0, 6.0):
        rates = th.metastable_growth_rates(beta, 3, max_degree=4)
        for ell in (1, 2, 3, 4):
            np.testing.assert_allclose(_sphere_rate(beta, ell), rates[ell], rtol=1e-5)


def test_metastable_cluster_count():
    from scipy.special import iv

    import attnflow.theory as th

    # The paper's Fig. 4: β = 5 on the circle gives 3 clusters; brute-force argmax of k² I_k(β).
    assert th.metastable_cluster_count(5.0) == 3
    for beta in (0.5, 3.0, 20.0, 150.0):
        k = np.arange(1, 60)
        assert th.metastable_cluster_count(beta) == 1 + int(np.argmax(k**2 * iv(k, beta)))
        # d = 4: ℓ(ℓ + 2) I_{ℓ+1}(β).
        assert th.metastable_cluster_count(beta, 4) == 1 + int(
            np.argmax(k * (k + 2) * iv(k + 1, beta))
        )
    # Past overflow of I_k: computed in logs, near √(2β).
    big = th.metastable_cluster_count(1e5)
    assert abs(big - np.sqrt(2e5)) < 2
    with pytest.raises(ValueError, match="d: expected"):
        th.metastable_cluster_count(5.0, 1)
    with pytest.raises(ValueError, match="beta"):
        th.metastable_growth_rates(-1.0)


def test_fastest_growing_degree_is_the_brute_force_argmax_and_the_old_name_agrees():
    import warnings

    from scipy.special import iv

    import attnflow.theory as th

    k = np.arange(1, 60)
    for d in (2, 3, 5):
        for beta in (0.5, 3.0, 20.0, 150.0):
            # ℓ(ℓ+d−2) I_{ℓ+d/2−1}(β), by brute force with scipy's Bessel functions.
            expected = 1 + int(np.argmax(k * (k + d - 2) * iv(k + d / 2 - 1, beta)))
            assert th.fastest_growing_degree(beta, d) == expected
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the old name: no warning, same value
                assert th.metastable_cluster_count(beta, d) == expected
