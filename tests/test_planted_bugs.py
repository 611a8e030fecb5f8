"""The bugs of issue #43 that the suite let through, each caught by a comparison with an
independent computation (SciPy Bessel functions, closed forms, NumPy transcriptions, a
hand-integrated ODE). Each test was checked by planting its bug by hand and seeing it fail."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import scipy.special as sp

import attnflow as af
import attnflow.meanfield as mf
from attnflow import theory

jax.config.update("jax_enable_x64", True)


# --- meanfield/_circle.py ---------------------------------------------------------------------

# One grid and two save times: the SA solves below share one compiled program.
_GRID = mf.CircleGrid(16)


def test_usa_growth_rates_at_negative_beta_are_k2_ik_over_beta():
    """Linearised USA about ρ ≡ 1: mode k grows at k² I_k(β)/β (Funk–Hecke), β < 0 included;
    the planted e^{β} for e^{|β|} rescales every rate by e^{−2|β|}."""
    beta, eps, t1 = -2.0, 1e-9, 0.2
    grid = _GRID
    theta = grid.angles()
    rho0 = grid.from_values(1 + eps * sum(jnp.cos(k * theta) for k in (1, 2, 3)))
    sol = mf.solve_density(
        grid, rho0, t1, beta=beta, normalization="n", ts=[0.0, t1], rtol=1e-11, atol=1e-20
    )
    for k in (1, 2, 3):
        rate = np.log(float(sol.coefficients[1, k]) / float(sol.coefficients[0, k])) / t1
        expected = k * k * sp.iv(k, beta) / beta
        assert rate == pytest.approx(expected, rel=1e-6, abs=1e-9), k


def test_mass_is_conserved_from_an_asymmetric_density_along_an_sa_solve():
    """An asymmetric density has a flux with a non-zero mean: a divergence that keeps a degree-0
    term changes the mass at O(1). SA: under USA the mean flux ∫ρ X_θ dσ vanishes for every
    density (the kernel is odd), so USA cannot see the bug."""
    grid = _GRID
    theta = grid.angles()
    values = 1 + 0.2 * jnp.cos(theta) + 0.15 * jnp.sin(2 * theta) + 0.1 * jnp.cos(3 * theta - 0.4)
    sol = mf.solve_density(
        grid,
        grid.from_values(values),
        0.3,
        beta=1.0,
        ts=[0.0, 0.3],
        rtol=1e-11,
        atol=1e-20,
    )
    assert float(jnp.abs(sol.coefficients[:, 0] - 1.0).max()) < 1e-13
    assert float(jnp.abs(sol.coefficients[-1] - sol.coefficients[0]).max()) > 1e-3  # it moved


# --- meanfield/_solve.py -----------------------------------------------------------------------


def _poisson_tail(q: float, L: int) -> float:
    """The spectral tail ‖P_(k > 3L/4) ρ‖/‖ρ‖ of the Poisson kernel ρ = 1 + 2Σ q^k cos kθ
    truncated to |k| ≤ L (‖cos kθ‖² = 1/2 for σ)."""
    k = np.arange(1, L + 1)
    power = 2.0 * q ** (2 * k)
    return float(np.sqrt(power[4 * k > 3 * L].sum() / (1.0 + power.sum())))


def test_modes_needed_matches_the_modes_a_finer_grid_needs():
    """The estimate in the unresolved-density error against the smallest L' at which the
    (known) spectrum's tail falls to the tolerance; the planted 4× too slow decay rate puts it
    at L ≈ 110 for the true 52."""
    q, L, tol = 0.7, 32, 1e-6
    truth = next(n for n in range(L, 1000) if _poisson_tail(q, n) <= tol)
    grid = mf.CircleGrid(L)
    theta = grid.angles()
    rho = (1 - q * q) / (1 - 2 * q * jnp.cos(theta) + q * q)
    with pytest.raises(ValueError, match="needs more modes") as info:
        mf.solve_density(grid, grid.from_values(rho), 0.1, beta=1.0)
    estimate = int(re.search(r"about (\d+)", str(info.value)).group(1))
    assert abs(estimate - truth) <= max(3, 0.1 * truth), (estimate, truth)


def test_value_scale_is_a_time_rescaling():
    """V = λI: the solution at time t with λ is the solution at time λt with λ = 1."""
    grid = _GRID
    theta = grid.angles()
    rho0 = grid.from_values(1 + 0.2 * jnp.cos(theta) + 0.1 * jnp.sin(2 * theta))
    kwargs = dict(beta=1.0, rtol=1e-11, atol=1e-20)
    scaled = mf.solve_density(grid, rho0, 0.12, value_scale=2.5, ts=[0.0, 0.12], **kwargs)
    plain = mf.solve_density(grid, rho0, 0.3, ts=[0.0, 0.3], **kwargs)
    np.testing.assert_allclose(scaled.coefficients[-1], plain.coefficients[-1], atol=1e-8)
    assert float(jnp.abs(plain.coefficients[-1] - rho0).max()) > 1e-2


# --- meanfield/_particles.py -------------------------------------------------------------------


def test_kernel_estimate_keeps_the_total_mass_of_unnormalised_weights():
    """On S¹ the von Mises–Fisher estimate has Fourier coefficients Σ w_i (cos kθ_i, sin kθ_i)
    × 2 I_k(1/h²)/I_0(1/h²) (Funk–Hecke), mass Σ w_i = 3 here."""
    theta = np.array([0.3, 1.9, 4.0, 5.5])
    w = np.array([0.5, 1.0, 1.2, 0.3])
    x = jnp.asarray(np.stack([np.cos(theta), np.sin(theta)], axis=1))
    h, K = 0.5, 16
    c = mf.density_from_particles(mf.CircleGrid(K), x, bandwidth=h, weights=jnp.asarray(w))
    k = np.arange(1, K + 1)
    damping = sp.ive(k, 1 / h**2) / sp.ive(0, 1 / h**2)
    a = 2 * damping * (w @ np.cos(np.outer(theta, k)))
    b = 2 * damping * (w @ np.sin(np.outer(theta, k)))
    np.testing.assert_allclose(np.asarray(c), np.concatenate([[w.sum()], a, b]), atol=1e-10)


# --- theory/_long_context.py -------------------------------------------------------------------


def test_long_context_limit_matches_the_critical_value_within_the_band():
    """κ = γ(1 − ρ) = 1 ± 1e-13 is the critical case (4ρ/(1 + 3ρ)), κ = 1 ± 1e-9 is not."""
    rho = 0.5
    for offset in (1e-13, -1e-13):
        gamma = (1 + offset) / (1 - rho)
        assert float(theory.long_context_limit(rho, gamma=gamma)) == pytest.approx(
            4 * rho / (1 + 3 * rho)
        )
        h = 0.5
        at = rho * (1 + h) ** 2 / ((1 + h / 2) ** 2 + h * rho * (1 + h / 2) + h * h * rho / 4)
        assert float(theory.long_context_limit(rho, gamma=gamma, step=h)) == pytest.approx(at)
    assert float(theory.long_context_limit(rho, gamma=(1 - 1e-9) / (1 - rho))) == 1.0
    assert float(theory.long_context_limit(rho, gamma=(1 + 1e-9) / (1 - rho))) == pytest.approx(rho)


# --- _diagnostics.py ---------------------------------------------------------------------------


def test_w2_to_a_given_centre_normalises_the_weights():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = np.array([0.2, 0.9, 0.4, 1.1, 0.4])  # sums to 3
    centre = np.array([0.0, 0.6, 0.8])
    expected = np.sqrt((w / w.sum()) @ np.sum((x - centre) ** 2, axis=1))
    got = af.wasserstein_to_dirac(jnp.asarray(x), jnp.asarray(w), center=jnp.asarray(centre))
    assert float(got) == pytest.approx(expected, rel=1e-12)
    # and to the nearest point mass: 2 − 2|m| with the normalised mean
    m = (w / w.sum()) @ x
    nearest = af.wasserstein_to_dirac(jnp.asarray(x), jnp.asarray(w))
    assert float(nearest) ** 2 == pytest.approx(2 - 2 * np.linalg.norm(m), rel=1e-12)


# --- theory/_stationary.py ---------------------------------------------------------------------


def _kappa_of_r_beta0(r: float) -> float:
    """κ(r) on the β = 0 branch (d = 2): the root of I₁(x)/I₀(x) = r, divided by r."""
    x = scipy.optimize.brentq(lambda x: sp.ive(1, x) / sp.ive(0, x) - r, 1e-12, 1e6, xtol=1e-14)
    return x / r


def test_stationary_branch_and_saddle_node_against_a_root_found_branch():
    """At β = 0 the branch is κ(r) = A₂⁻¹(r)/r, increasing from κ_c = 2: the transition is
    continuous, so the saddle-node κ is κ_c itself (the planted minimum over the sampled branch
    alone lies above it), and the sampled branch is the root-found one."""
    b = theory.stationary_branches(jnp.array([1.0, 3.0]), beta=0.0, d=2)
    assert float(b.kappa_critical) == pytest.approx(2.0, rel=1e-12)
    assert float(b.kappa_saddle_node) == pytest.approx(2.0, rel=1e-12)
    assert not bool(b.subcritical)
    for r, kappa in zip(b.curve_order_parameter[::6], b.curve_kappa[::6], strict=True):
        assert float(kappa) == pytest.approx(_kappa_of_r_beta0(float(r)), rel=1e-8)
    # r*(κ = 3) is the root of I₁(3r)/I₀(3r) = r
    root = scipy.optimize.brentq(lambda r: sp.ive(1, 3 * r) / sp.ive(0, 3 * r) - r, 1e-3, 1.0)
    assert float(b.order_parameter[1]) == pytest.approx(root, abs=1e-9)
    assert float(b.order_parameter[0]) == 0.0


def test_stationary_order_parameter_past_the_resolved_range_is_nan():
    """r*(κ) at β > 0 for κ so large that r > R_MAX = 0.995 (about 1 − 1/(2κ)): NaN, not the
    last resolved number."""
    r = theory.stationary_order_parameter(jnp.array([3.0, 400.0]), beta=0.5, d=2)
    assert 0.5 < float(r[0]) < 0.995
    assert np.isnan(float(r[1]))


# --- models/_pairing.py -----------------------------------------------------------------------


def _two_body_merge_time(theta0, merge_angle, beta, total_mass):
    """USA for two clusters: θ' = −(α₁ + α₂) e^{β cos θ} sin θ exactly; the time from θ₀ to
    ``merge_angle`` by quadrature."""
    value, _ = scipy.integrate.quad(
        lambda t: 1.0 / (total_mass * np.exp(beta * np.cos(t)) * np.sin(t)),
        merge_angle,
        theta0,
        epsabs=0,
        epsrel=1e-12,
        limit=200,
    )
    return value


def test_pairing_merge_time_and_frozen_angle_against_a_hand_integrated_two_body_ode():
    """Masses (1.2, 0.8) sum to 2 and are normalised (α₁ + α₂ = 1); the frozen-rate limit
    angle solves dθ/dτ' = −sin θ (hand-integrated) up to the frozen clock τ' = t/T_pair."""
    beta, theta0, merge_angle = 6.0, 0.9, 1e-3
    y0 = jnp.array([[1.0, 0.0], [np.cos(theta0), np.sin(theta0)]])
    out = af.models.pairing_phase(y0, jnp.array([1.2, 0.8]), beta, merge_angle=merge_angle)
    expected = _two_body_merge_time(theta0, merge_angle, beta, 1.0)
    assert float(out.merge_time) == pytest.approx(expected, rel=1e-6)
    clock = float(out.frozen_clock_merge_time)
    assert clock == pytest.approx(expected / (np.exp(-beta * np.cos(theta0)) / 1.0), rel=1e-6)
    frozen = scipy.integrate.solve_ivp(
        lambda t, y: -np.sin(y), (0.0, clock), [theta0], rtol=1e-12, atol=1e-14
    ).y[0, -1]
    assert float(out.frozen_limit_angle) == pytest.approx(frozen, rel=1e-8)


# --- _layers/_schemes.py ----------------------------------------------------------------------


def test_mix_ln_keeps_the_radius_of_a_start_off_the_sphere():
    """Before t*, one Mix-LN layer is z ← |z| N(x + h A(x)), x = z/|z|, A the softmax attention
    output Σ_j softmax_j(β⟨x_i, x_j⟩) x_j (NumPy transcription)."""
    rng = np.random.default_rng(1)
    z0 = rng.normal(size=(4, 3)) * np.array([[2.0], [0.5], [1.5], [3.0]])
    beta, h = 1.3, 0.2
    x = z0 / np.linalg.norm(z0, axis=1, keepdims=True)
    logits = beta * x @ x.T
    a = np.exp(logits - logits.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    y = x + h * (a @ x)
    expected = (
        np.linalg.norm(z0, axis=1, keepdims=True) * y / np.linalg.norm(y, axis=1, keepdims=True)
    )
    sublayer = af.AttentionSublayer(af.SelfAttention(beta))
    zs = af.MixLN(1.0).layers(sublayer, jnp.asarray(z0), 1, h)
    np.testing.assert_allclose(np.asarray(zs[1]), expected, rtol=1e-12)
