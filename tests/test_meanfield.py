"""attnflow.meanfield on the circle, against independent computations: scipy's Bessel functions
and root finding, brute-force quadrature of the velocity, the linearised growth rates of
attnflow.theory, particle solves with attnflow.solve, finite differences and closed forms."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.special as sp
from scipy.optimize import brentq

import attnflow as af
import attnflow.meanfield as mf
import attnflow.theory as th


def _vm_coefficients(K, kappa):
    """ρ ∝ e^{κ cos θ} (w.r.t. dθ/2π): a_k = 2 I_k(κ)/I_0(κ)."""
    k = np.arange(1, K + 1)
    return jnp.asarray(np.concatenate([[1.0], 2 * sp.ive(k, kappa) / sp.ive(0, kappa), 0 * k]))


def test_transforms_and_kernel_against_direct_sums():
    grid = mf.CircleGrid(8)
    rng = np.random.default_rng(0)
    c = jnp.asarray(np.concatenate([[1.0], 0.1 * rng.normal(size=16)]))
    theta = np.asarray(grid.angles())
    k = np.arange(1, 9)
    direct = 1.0 + np.cos(np.outer(theta, k)) @ c[1:9] + np.sin(np.outer(theta, k)) @ c[9:]
    np.testing.assert_allclose(grid.to_values(c), direct, atol=1e-14)
    np.testing.assert_allclose(grid.from_values(grid.to_values(c)), c, atol=1e-15)
    points = af.random_tokens(jr.key(0), 7, 2)
    angle = np.arctan2(points[:, 1], points[:, 0])
    at_points = 1.0 + np.cos(np.outer(angle, k)) @ c[1:9] + np.sin(np.outer(angle, k)) @ c[9:]
    np.testing.assert_allclose(grid.evaluate(c, points), at_points, atol=1e-13)
    # The base class's generic evaluation (reproducing kernel by quadrature) is exact too.
    np.testing.assert_allclose(mf.evaluate_by_quadrature(grid, c, points), at_points, atol=1e-13)
    for beta in (0.0, 1e-3, 3.0, -2.0, 300.0):
        h, g = grid.kernel_multipliers(beta)
        sign = np.sign(beta) ** np.arange(9) if beta < 0 else 1.0
        ive = sp.ive(np.arange(9), abs(beta)) * sign
        np.testing.assert_allclose(h, ive, atol=1e-14 * ive[0])
        if beta != 0:
            np.testing.assert_allclose(g, np.arange(9) * ive / beta, atol=1e-14 * ive[0])
    assert float(grid.kernel_multipliers(0.0)[1][1]) == pytest.approx(0.5)  # lim k I_k(β)/β


@pytest.mark.parametrize("normalization", ["n", "softmax"])
def test_velocity_against_brute_force_quadrature(normalization):
    beta, K = 3.0, 12
    grid = mf.CircleGrid(K)
    c = _vm_coefficients(K, 1.5).at[K + 2].set(0.2)
    phi = 2 * np.pi * np.arange(4096) / 4096
    rho = np.asarray(grid.evaluate(c, np.stack([np.cos(phi), np.sin(phi)], 1)))
    theta = np.asarray(grid.angles())
    diff = phi[None, :] - theta[:, None]
    kernel = np.exp(beta * np.cos(diff))
    drift = np.mean(kernel * np.sin(diff) * rho, axis=1)
    if normalization == "softmax":
        drift = drift / np.mean(kernel * rho, axis=1)
    x_theta = np.sum(
        grid.velocity(c, beta, normalization) * np.stack([-np.sin(theta), np.cos(theta)], 1),
        axis=1,
    )
    np.testing.assert_allclose(x_theta, drift, rtol=1e-12, atol=1e-12)


# Most solves below share one grid and three save times, so that they share compiled programs.
K16 = mf.CircleGrid(16)


def test_growth_rates_of_every_mode_match_theory():
    K, beta, eps, t1 = 16, 5.0, 1e-8, 0.2
    phases = np.random.default_rng(1).uniform(0, 2 * np.pi, K)
    theta = np.asarray(K16.angles())
    values = 1 + eps * np.sum(np.cos(np.outer(theta, np.arange(1, K + 1)) + phases), axis=1)
    c0 = K16.from_values(jnp.asarray(values))
    for normalization in ("n", "softmax"):
        sol = mf.solve_density(
            K16,
            c0,
            t1,
            beta=beta,
            normalization=normalization,
            ts=[0.0, t1 / 2, t1],
            rtol=1e-11,
            atol=1e-16,
        )
        amplitude = np.hypot(sol.coefficients[:, 1 : K + 1], sol.coefficients[:, K + 1 :])
        fitted = np.log(amplitude[2] / amplitude[0]) / t1
        theory = th.metastable_growth_rates(beta, normalization=normalization, max_degree=K)[1:]
        np.testing.assert_allclose(fitted, theory, atol=1e-4 * theory.max())
        np.testing.assert_allclose(sol.mass, 1.0, atol=1e-15)  # mass: to rounding


def test_noisy_kuramoto_order_parameter_and_imex_steps():
    c0 = K16.from_values(1 + 0.2 * jnp.cos(K16.angles()))
    for kappa in (1.5, 2.5, 4.0):
        sol = mf.solve_density(K16, c0, 300.0, beta=0.0, kappa=kappa, rtol=1e-8, atol=1e-10)
        c = sol.coefficients[-1]
        r = float(np.hypot(c[1], c[17]) / 2)

        def self_consistency(r, kappa=kappa):
            return sp.ive(1, kappa * r) / sp.ive(0, kappa * r) - r

        expected = brentq(self_consistency, 1e-3, 1.0) if kappa > 2 else 0.0
        assert r == pytest.approx(expected, abs=1e-8), kappa
        np.testing.assert_allclose(sol.mass, 1.0, atol=1e-14)
    assert expected == pytest.approx(0.83, abs=0.01)
    # The diffusion is stiff (rate 16²/κ): IMEX steps do not scale with it, explicit ones do.
    imex = mf.solve_density(K16, c0, 10.0, beta=1.0, kappa=1.0, rtol=1e-8, atol=1e-10)
    explicit = mf.solve_density(
        K16, c0, 10.0, beta=1.0, kappa=1.0, solver=diffrax.Tsit5(), rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(imex.coefficients, explicit.coefficients, atol=1e-7)
    assert 5 * int(imex.stats["num_steps"]) < int(explicit.stats["num_steps"])


def test_steady_stop_reaches_the_noisy_kuramoto_state():
    """steady_tol: the solve ends once ‖∂_tρ‖ ≤ tol‖ρ‖, its final r is the self-consistent
    r = I₁(κr)/I₀(κr) (brentq, independent), the saves after the stop hold the final state, and
    it takes fewer steps than the full horizon; a solve still moving at t1 is not steady."""
    c0 = K16.from_values(1 + 0.2 * jnp.cos(K16.angles()))
    kappa, ts = 2.5, jnp.linspace(0.0, 150.0, 7)
    expected = brentq(lambda r: sp.ive(1, kappa * r) / sp.ive(0, kappa * r) - r, 1e-3, 1.0)
    full = mf.solve_density(K16, c0, 150.0, beta=0.0, kappa=kappa, ts=ts, rtol=1e-7, atol=1e-10)
    stop = mf.solve_density(
        K16, c0, 150.0, beta=0.0, kappa=kappa, ts=ts, rtol=1e-7, atol=1e-10, steady_tol=1e-7
    )
    assert bool(stop.steady) and bool(stop.resolved) and not bool(full.steady)
    assert 0 < float(stop.t_stop) < 150.0 and float(full.t_stop) == 150.0
    after = np.asarray(ts) > float(stop.t_stop)
    assert after.sum() >= 2
    np.testing.assert_array_equal(stop.ts, ts)
    held = np.repeat(stop.coefficients[-1:], after.sum(), 0)
    np.testing.assert_array_equal(stop.coefficients[after], held)
    r = float(np.hypot(stop.coefficients[-1, 1], stop.coefficients[-1, 17]) / 2)
    assert r == pytest.approx(expected, abs=1e-6)
    np.testing.assert_allclose(stop.coefficients, full.coefficients, atol=1e-6)
    assert int(stop.stats["num_steps"]) < int(full.stats["num_steps"]), float(stop.t_stop)
    moving = mf.solve_density(  # the same compiled program: only t1 and the times differ
        K16, c0, 0.5, beta=0.0, kappa=kappa, ts=ts / 300, rtol=1e-7, atol=1e-10, steady_tol=1e-7
    )
    assert not bool(moving.steady) and float(moving.t_stop) == 0.5
    with pytest.raises(ValueError, match="steady_tol"):
        mf.solve_density(K16, c0, 1.0, beta=0.0, kappa=kappa, steady_tol=-1.0)


def test_spectral_convergence_in_the_number_of_modes():
    def solve(K):
        grid = K16 if K == 16 else mf.CircleGrid(K)
        c0 = _vm_coefficients(K, 2.0).at[K + 3].set(0.1)
        sol = mf.solve_density(
            grid, c0, 0.5, beta=2.0, rtol=1e-12, atol=1e-14, ts=[0.0, 0.25, 0.5], resolution_tol=1.0
        )
        c = np.asarray(sol.coefficients[-1])
        return np.concatenate([c[1:5], c[K + 1 : K + 5]])

    reference = solve(24)
    errors = [np.max(np.abs(solve(K) - reference)) for K in (8, 16)]
    assert 1e-8 < errors[0] < 1e-3 and errors[1] < 1e-5 * errors[0], errors


def test_resolution_error_says_how_many_modes():
    c0 = K16.from_values(1 + 0.1 * jnp.cos(3 * K16.angles()))
    ts = [0.0, 0.5, 1.0]
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"needs about L = \d+ \(the grid has L"):
        mf.solve_density(K16, c0, 1.0, beta=5.0, normalization="n", ts=ts)
    sol = mf.solve_density(K16, c0, 1.0, beta=5.0, normalization="n", throw=False, ts=ts)
    assert not bool(sol.resolved) and 0 < float(sol.t_stop) < 0.5
    assert int(sol.modes_needed) > 16
    assert float(sol.spectral_tail[0]) < 1e-6 and not np.isfinite(sol.spectral_tail[1])
    # Without the check the same solve runs on with a density that rings below zero.
    unchecked = mf.solve_density(
        K16, c0, 1.0, beta=5.0, normalization="n", ts=ts, resolution_tol=1e10, throw=False
    )
    assert float(unchecked.spectral_tail[1]) > 1e-3


def _loss(beta, c0):
    sol = mf.solve_density(K16, c0, 0.7, beta=beta, rtol=1e-12, atol=1e-14)
    c = sol.coefficients[-1]
    return c[1] ** 2 + c[2] + 0.5 * c[17]


# One compiled program (the solve and its gradient) for the gradient and the finite differences.
_value_and_grad = jax.jit(jax.value_and_grad(_loss, argnums=(0, 1)))


def test_gradients_match_finite_differences():
    K = 16
    c0 = _vm_coefficients(K, 1.0)
    direction = jnp.zeros(2 * K + 1).at[2].set(0.3).at[K + 1].set(0.2)
    beta = 2.0

    def loss(beta, c0):
        return _value_and_grad(beta, c0)[0]

    _, (d_beta, d_c0) = _value_and_grad(beta, c0)
    h = 1e-5
    fd_beta = (loss(beta + h, c0) - loss(beta - h, c0)) / (2 * h)
    fd_c0 = (loss(beta, c0 + h * direction) - loss(beta, c0 - h * direction)) / (2 * h)
    assert float(d_beta) == pytest.approx(float(fd_beta), rel=1e-7)
    assert float(d_c0 @ direction) == pytest.approx(float(fd_c0), rel=1e-7)
    # An unresolved state under jax.jit(jax.grad): the resolution error (eqx.error_if), not a
    # ConcretizationTypeError from reading traced numbers (eager jax.grad: the S² solver test).
    # Inside jax.jit, JAX wraps equinox's error in its own runtime error: the message stays.
    sharp = K16.from_values(1 + 0.3 * jnp.cos(3 * K16.angles()))
    with pytest.raises(Exception, match="no longer resolved by the grid") as info:
        jax.block_until_ready(_value_and_grad(8.0, sharp))  # errors surface on the result
    assert "sol.modes_needed" in str(info.value)
    assert not isinstance(info.value, jax.errors.ConcretizationTypeError)
    # (The eager message, with the numbers: test_resolution_error_says_how_many_modes.)


def test_solve_compiles_once_per_grid_and_shapes():
    # A new β, λ, initial density, horizon or tolerance (resolution_tol too) reuses the compiled
    # solve: one trace of the jitted core over these calls (a grid size no other test uses).
    from attnflow.meanfield import _solve

    grid = mf.CircleGrid(5)
    theta = grid.angles()
    before = _solve._CORE_TRACES
    first = mf.solve_density(
        grid, grid.from_values(1 + 0.2 * jnp.cos(theta)), 0.3, beta=1.0, resolution_tol=0.1
    )
    second = mf.solve_density(
        mf.CircleGrid(5),
        np.asarray(grid.from_values(1 + 0.1 * jnp.sin(2 * theta))),
        0.5,
        beta=jnp.asarray(2.5),
        value_scale=0.5,
        rtol=1e-8,
        resolution_tol=0.2,
    )
    assert _solve._CORE_TRACES - before == 1
    assert bool(first.resolved) and bool(second.resolved)


def test_energy_closed_form_and_usa_ascent_identity():
    beta, a = 2.0, 0.6
    c = jnp.zeros(33).at[0].set(1.0).at[1].set(a)
    # E = (1/2β)(I_0 + I_1 a²/2) for ρ = 1 + a cos θ.
    expected = (sp.i0(beta) + sp.i1(beta) * a**2 / 2) / (2 * beta)
    assert float(mf.density_energy(K16, c, beta)) == pytest.approx(expected, rel=1e-14)
    # Weighted particles on the nodes: the same energy as attnflow.InteractionEnergy.
    w = K16.quadrature_weights() * K16.to_values(c)
    particle = af.InteractionEnergy(beta)(K16.nodes(), weights=w)
    assert float(particle) == pytest.approx(expected, rel=1e-12)
    # USA is the gradient ascent of E (attnflow's sign): dE/dt = +∫ρ|X|² dσ.
    c0 = _vm_coefficients(16, 1.0).at[18].set(0.3)
    t, dt, beta = 0.15, 1e-3, 1.0
    sol = mf.solve_density(
        K16,
        c0,
        t + dt,
        beta=beta,
        normalization="n",
        ts=[t - dt, t, t + dt],
        rtol=1e-13,
        atol=1e-15,
    )
    energy = [float(mf.density_energy(K16, c, beta)) for c in sol.coefficients]
    rate = (energy[2] - energy[0]) / (2 * dt)
    c = sol.coefficients[1]
    speed2 = jnp.sum(K16.velocity(c, beta, "n") ** 2, axis=1)
    identity = float(jnp.sum(K16.quadrature_weights() * K16.to_values(c) * speed2))
    assert identity > 0 and rate == pytest.approx(identity, rel=1e-5)


def test_particles_converge_to_the_pde_at_rate_one_half():
    beta, t1, kappa, K = 1.0, 1.0, 1.0, 16
    sol = mf.solve_density(
        K16, _vm_coefficients(K, kappa), t1, beta=beta, ts=[0.0, 0.5, t1], resolution_tol=1e-4
    )
    c = sol.coefficients[-1]
    pde = np.array([c[1], c[K + 1], c[2], c[K + 2]]) / 2  # E cos θ, sin θ, cos 2θ, sin 2θ
    field = af.SelfAttention(beta)
    # One compiled solve for every n: n_max particles, the first n weighted 1/n, the rest 0
    # (weights are masses: the field of the first n particles alone).
    ns, seeds, n_max = np.array([32, 128, 512]), 6, 512

    def moments(key, n):
        x0 = af.measures.von_mises_fisher(key, jnp.array([1.0, 0.0]), kappa, n_max)
        w = jnp.where(jnp.arange(n_max, dtype=float) < n, 1.0 / n, 0.0)
        x = af.solve(field, x0, t1, args=w, rtol=1e-5, atol=1e-7).ys[-1]
        angle = jnp.arctan2(x[:, 1], x[:, 0])
        return jnp.stack(
            [w @ jnp.cos(angle), w @ jnp.sin(angle), w @ jnp.cos(2 * angle), w @ jnp.sin(2 * angle)]
        )

    keys = jr.split(jr.key(0), (len(ns), seeds))
    sizes = jnp.broadcast_to(jnp.asarray(ns, float)[:, None], (len(ns), seeds))
    m = np.asarray(jax.vmap(jax.vmap(moments))(keys, sizes))
    errors = np.sqrt(np.mean((m - pde) ** 2, axis=(1, 2)))
    slope = np.polyfit(np.log(ns), np.log(errors), 1)[0]
    assert -0.75 < slope < -0.25, (slope, errors)


def test_particle_bridges():
    K, grid = 16, K16
    c = _vm_coefficients(K, 2.0).at[K + 2].set(0.03)
    # Samples: their Fourier moments are the coefficients / 2 (Monte Carlo, n = 20000).
    n = 8000
    x = mf.sample_density(jr.key(0), grid, c, n)
    angle = np.arctan2(x[:, 1], x[:, 0])
    for k in (1, 2, 3):
        assert np.mean(np.cos(k * angle)) == pytest.approx(float(c[k]) / 2, abs=4 / np.sqrt(n))
        assert np.mean(np.sin(k * angle)) == pytest.approx(float(c[K + k]) / 2, abs=4 / np.sqrt(n))
    # Kernel estimate: the empirical Fourier coefficients times I_k(1/h²)/I_0(1/h²).
    h = 0.4
    estimate = mf.density_from_particles(grid, x[:500], bandwidth=h)
    k = np.arange(1, K + 1)
    damping = sp.ive(k, 1 / h**2) / sp.ive(0, 1 / h**2)
    a = 2 * np.mean(np.cos(np.outer(angle[:500], k)), axis=0) * damping
    b = 2 * np.mean(np.sin(np.outer(angle[:500], k)), axis=0) * damping
    np.testing.assert_allclose(estimate, np.concatenate([[1.0], a, b]), atol=1e-10)
    with pytest.raises(ValueError, match="bandwidth"):
        mf.density_from_particles(grid, x[:100], bandwidth=0.05)
    # Sliced W_2: small for samples of the density, larger for another density.
    fine = mf.CircleGrid(K, points=1024)
    close = mf.density_sliced_wasserstein(jr.key(1), fine, c, x, num_projections=64)
    other = mf.density_sliced_wasserstein(
        jr.key(1), fine, _vm_coefficients(K, 0.5), x, num_projections=64
    )
    assert float(close) < 0.02 < float(other)


def test_bad_inputs_get_clear_errors():
    with pytest.raises(ValueError, match="modes: expected an integer >= 4"):
        mf.CircleGrid(2)
    with pytest.raises(ValueError, match="points: expected at least 3K"):
        mf.CircleGrid(8, points=20)
    grid = mf.CircleGrid(8)
    good = jnp.zeros(17).at[0].set(1.0)
    with pytest.raises(ValueError, match="density0: expected a non-negative density"):
        mf.solve_density(grid, good.at[1].set(1.5), 1.0, beta=1.0)
    with pytest.raises(ValueError, match="density0: expected finite"):
        mf.solve_density(grid, good.at[3].set(jnp.nan), 1.0, beta=1.0)
    with pytest.raises(ValueError, match=r"density0: expected coefficients of shape \(17,\)"):
        mf.solve_density(grid, jnp.ones(9), 1.0, beta=1.0)
    with pytest.raises(ValueError, match="density0: the density is not resolved.*more modes"):
        mf.solve_density(grid, good.at[8].set(0.1), 1.0, beta=1.0)
    with pytest.raises(ValueError, match="beta: expected a finite value"):
        mf.solve_density(grid, good, 1.0, beta=jnp.nan)
    with pytest.raises(ValueError, match="beta: the kernel .* is not resolved by kernel_points"):
        mf.solve_density(grid, good, 1.0, beta=1e5)
    with pytest.raises(ValueError, match="kappa: expected a finite noise"):
        mf.solve_density(grid, good, 1.0, beta=1.0, kappa=-1.0)
    with pytest.raises(ValueError, match="normalization"):
        mf.solve_density(grid, good, 1.0, beta=1.0, normalization="sum")
    with pytest.raises(ValueError, match="grid: expected an attnflow.meanfield grid"):
        mf.solve_density("circle", good, 1.0, beta=1.0)
    with pytest.raises(ValueError, match="grid: expected an attnflow.meanfield grid"):
        mf.spectral_tail("circle", good)
    x = af.random_tokens(jr.key(0), 8, 3)
    with pytest.raises(ValueError, match=r"x: expected particles in R\^2"):
        mf.density_sliced_wasserstein(jr.key(1), grid, good, x)
    with pytest.raises(ValueError, match="weights: expected finite non-negative weights"):
        mf.density_sliced_wasserstein(
            jr.key(1), grid, good, af.random_tokens(jr.key(0), 8, 2), weights=-jnp.ones(8)
        )
