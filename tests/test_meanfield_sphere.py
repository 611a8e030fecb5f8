"""SphereGrid (densities on S² in spherical harmonics) against independent computations: SciPy's
spherical harmonics and Bessel functions, Gauss–Legendre quadrature of the Funk–Hecke integral,
finite differences, closed-form fields, attnflow's particle field on weighted nodes, the
metastability growth rates of attnflow.theory, and the energy by double quadrature."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sp

import attnflow as af
import attnflow.meanfield as mf
import attnflow.theory as th
from attnflow.meanfield._sphere import funk_hecke_multipliers


def _real_harmonic(ell, m, points):
    """attnflow's σ-orthonormal real harmonic Y_ℓm at unit vectors, from SciPy's complex
    ones (orthonormal for the surface measure, Condon–Shortley phase)."""
    theta = np.arccos(np.clip(points[:, 2], -1, 1))
    phi = np.arctan2(points[:, 1], points[:, 0])
    if hasattr(sp, "sph_harm_y"):  # SciPy ≥ 1.15
        y = sp.sph_harm_y(ell, abs(m), theta, phi)
    else:
        y = sp.sph_harm(abs(m), ell, phi, theta)
    y = y * np.sqrt(4 * np.pi)
    if m == 0:
        return y.real
    sign = (-1) ** m
    return np.sqrt(2) * sign * (y.real if m > 0 else y.imag)


def _index(ell, m):
    return ell * (ell + 1) + m


def _unit(rng, n):
    x = rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _smooth_density(grid, rng):
    """ρ = exp(κ⟨a, x⟩) + 0.5 exp(κ'⟨b, x⟩), normalised, projected on the grid."""
    a, b = _unit(rng, 2)
    x = np.asarray(grid.nodes())
    values = np.exp(1.5 * x @ a) + 0.5 * np.exp(0.8 * x @ b)
    c = grid.from_values(jnp.asarray(values))
    return c / c[0]


# --- the Funk–Hecke multipliers ---------------------------------------------------------------


@pytest.mark.parametrize("beta", [0.3, 4.0, 25.0, -3.0])
def test_multipliers_match_the_funk_hecke_integral(beta):
    # e^{−|β|} λ_ℓ = ½∫ e^{βt − |β|} P_ℓ(t) dt by 400-point Gauss–Legendre, μ_ℓ = λ_ℓ/β (the
    # quadrature's own rounding is ~1e-14 absolute: the sum cancels for small λ_ℓ).
    degree = 14
    t, w = np.polynomial.legendre.leggauss(400)
    kernel = np.exp(beta * t - abs(beta)) * w / 2
    expected = np.array([kernel @ sp.eval_legendre(ell, t) for ell in range(degree + 1)])
    lam, mu = funk_hecke_multipliers(beta, degree)
    atol = 1e-12 * expected[0]
    np.testing.assert_allclose(np.asarray(lam), expected, rtol=1e-12, atol=atol)
    np.testing.assert_allclose(
        np.asarray(mu)[1:], expected[1:] / beta, rtol=1e-12, atol=atol / abs(beta)
    )
    # and SciPy's modified spherical Bessel functions (far in the tail, down to 1e-290)
    lam_far, _ = funk_hecke_multipliers(beta, 60)
    ref = (
        sp.spherical_in(np.arange(61), abs(beta))
        * np.exp(-abs(beta))
        * np.sign(beta) ** np.arange(61)
    )
    np.testing.assert_allclose(np.asarray(lam_far), ref, rtol=1e-12)


def test_multipliers_at_beta_zero_and_large_beta():
    lam, mu = funk_hecke_multipliers(0.0, 5)
    # β = 0: W∗ρ = mass, X = P_x ∫y ρ: Φ = ⟨x, ∫yρ⟩ has μ_1 = ½∫t² dt = 1/3.
    np.testing.assert_allclose(np.asarray(lam), [1, 0, 0, 0, 0, 0], atol=1e-300)
    np.testing.assert_allclose(np.asarray(mu), [0, 1 / 3, 0, 0, 0, 0], atol=1e-300)
    # β = 1000 (e^β overflows float64): scaled values stay finite, → 1/(2β) at small ℓ.
    lam, mu = funk_hecke_multipliers(1000.0, 8)
    assert np.all(np.isfinite(np.asarray(lam)))
    # SciPy's i_ℓ(1000) overflows; e^{−β} i_ℓ(β) = Σ_k (−1)^k (ℓ+k)!/(k!(ℓ−k)!(2β)^k) / (2β)
    # up to e^{−2β} (the closed form of the half-integer Bessel functions).
    beta = 1000.0
    closed = [
        sum(
            (-1) ** k
            * sp.factorial(ell + k)
            / (sp.factorial(k) * sp.factorial(ell - k))
            / (2 * beta) ** k
            for k in range(ell + 1)
        )
        / (2 * beta)
        for ell in range(9)
    ]
    np.testing.assert_allclose(np.asarray(lam), closed, rtol=1e-13)
    # differentiable in β: d/dβ of e^{−β}i_1(β) by central differences
    g = jax.grad(lambda b: funk_hecke_multipliers(b, 3)[0][1])(2.0)
    f = lambda b: sp.spherical_in(1, b) * np.exp(-b)
    np.testing.assert_allclose(float(g), (f(2 + 1e-6) - f(2 - 1e-6)) / 2e-6, rtol=1e-8)


# --- transforms --------------------------------------------------------------------------------


def test_basis_and_round_trip_match_scipy():
    grid = mf.SphereGrid(6)
    x = np.asarray(grid.nodes())
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1, atol=1e-15)
    np.testing.assert_allclose(float(grid.quadrature_weights().sum()), 1, atol=1e-14)
    rng = np.random.default_rng(0)
    c = rng.standard_normal(grid.size)
    values = sum(
        c[_index(ell, m)] * _real_harmonic(ell, m, x)
        for ell in range(7)
        for m in range(-ell, ell + 1)
    )
    np.testing.assert_allclose(np.asarray(grid.to_values(jnp.asarray(c))), values, atol=1e-12)
    np.testing.assert_allclose(np.asarray(grid.from_values(jnp.asarray(values))), c, atol=1e-12)
    np.testing.assert_array_equal(
        np.asarray(grid.degrees()), [ell for ell in range(7) for _ in range(2 * ell + 1)]
    )


def test_spectral_convergence_of_a_smooth_density():
    # e^{κ⟨a,x⟩} = Σ_ℓ i_ℓ(κ) Σ_m Y_ℓm(a) Y_ℓm(x) (addition theorem): the band-N projection
    # has coefficients i_ℓ(κ) Y_ℓm(a), and its error at random points falls like i_{N+1}(κ).
    rng = np.random.default_rng(1)
    a = _unit(rng, 1)
    kappa = 3.0
    points = _unit(rng, 200)
    exact = np.exp(kappa * points @ a[0])
    errors = []
    for degree in (4, 8, 12):
        grid = mf.SphereGrid(degree)
        c = jax.jit(grid.from_values)(jnp.exp(kappa * grid.nodes() @ jnp.asarray(a[0])))
        known = np.array(
            [
                sp.spherical_in(ell, kappa) * _real_harmonic(ell, m, a)[0]
                for ell in range(degree + 1)
                for m in range(-ell, ell + 1)
            ]
        )
        if degree == 12:  # aliasing from degrees > 3N − ℓ is ~ i_25(3) ≈ 1e-22
            np.testing.assert_allclose(np.asarray(c), known, atol=1e-13)
        values = jax.jit(grid.evaluate)(c, jnp.asarray(points))
        errors.append(np.abs(np.asarray(values) - exact).max())
    errors = np.array(errors)
    assert errors[-1] < 1e-6, errors
    assert np.all(errors[1:] < 2e-3 * errors[:-1]), errors  # geometric: < 2e-3 per 4 degrees


def test_gradient_matches_finite_differences_and_a_closed_form():
    grid = mf.SphereGrid(7)
    rng = np.random.default_rng(2)
    c = jnp.asarray(rng.standard_normal(grid.size))
    x = grid.nodes()
    g = grid.gradient(c)
    np.testing.assert_allclose(np.asarray(jnp.sum(g * x, axis=1)), 0, atol=1e-12)  # tangent
    t = jnp.asarray(rng.standard_normal(x.shape))
    t = t - jnp.sum(t * x, axis=1, keepdims=True) * x
    t = t / jnp.linalg.norm(t, axis=1, keepdims=True)
    h = 1e-5

    def along(s):
        p = x + s * t
        return grid.evaluate(c, p / jnp.linalg.norm(p, axis=1, keepdims=True))

    fd = (along(h) - along(-h)) / (2 * h)
    np.testing.assert_allclose(np.asarray(jnp.sum(g * t, axis=1)), np.asarray(fd), atol=1e-7)
    # f = x_1 x_3 (degree 2: √15 x_1 x_3 = Y_21): ∇f = P_x (x_3, 0, x_1)
    c2 = jnp.zeros(grid.size).at[_index(2, 1)].set(1 / np.sqrt(15))
    ambient = jnp.stack([x[:, 2], jnp.zeros_like(x[:, 0]), x[:, 0]], axis=1)
    closed = ambient - jnp.sum(ambient * x, axis=1, keepdims=True) * x
    np.testing.assert_allclose(np.asarray(grid.gradient(c2)), np.asarray(closed), atol=1e-13)


def test_divergence_of_known_fields_and_mass_conservation():
    grid = mf.SphereGrid(8)
    rng = np.random.default_rng(3)
    x = grid.nodes()
    c = jnp.asarray(rng.standard_normal(grid.size))
    # div ∇f = Δf = −ℓ(ℓ+1) f_ℓm
    np.testing.assert_allclose(
        np.asarray(grid.divergence(grid.gradient(c))), np.asarray(grid.laplacian() * c), atol=1e-11
    )
    # a rotation field x × b is divergence-free; P_x b = ∇⟨b, x⟩ has div = −2⟨b, x⟩
    b = jnp.asarray(rng.standard_normal(3))
    np.testing.assert_allclose(np.asarray(grid.divergence(jnp.cross(x, b))), 0, atol=1e-13)
    projected = b[None, :] - (x @ b)[:, None] * x
    div = grid.divergence(projected)
    expected = grid.from_values(-2 * (x @ b))
    np.testing.assert_allclose(np.asarray(div), np.asarray(expected), atol=1e-13)
    # mass: the degree-0 coefficient of the divergence of any field is 0 to rounding
    flux = jnp.asarray(rng.standard_normal(x.shape))
    assert abs(float(grid.divergence(flux)[0])) < 1e-14


# --- the attention velocity -----------------------------------------------------------------------


@pytest.mark.parametrize("normalization", ["n", "softmax"])
def test_velocity_matches_the_particle_field_on_weighted_nodes(normalization):
    # 𝒳[μ] for μ = Σ_q w_q ρ(x_q) δ_{x_q} is the quadrature of the integral defining X[ρ]
    # (attnflow's SelfAttention with weights in args): equal to quadrature accuracy.
    grid = mf.SphereGrid(8)
    rng = np.random.default_rng(4)
    c = _smooth_density(grid, rng)
    beta = 2.5
    x = grid.nodes()
    weights = grid.quadrature_weights() * grid.to_values(c)
    particles = af.SelfAttention(beta, normalization=normalization)(0.0, x, weights)
    velocity = jax.jit(grid.velocity, static_argnums=2)(c, beta, normalization)
    scale = float(jnp.abs(velocity).max())
    np.testing.assert_allclose(np.asarray(velocity), np.asarray(particles), atol=1e-11 * scale)


@pytest.mark.parametrize("normalization", ["n", "softmax"])
def test_linear_growth_rates_are_the_theory(normalization):
    # ∂_t c = F(c) = −div(ρ X[ρ]) linearised at ρ ≡ 1: each Y_ℓm is an eigenvector with
    # eigenvalue λ_ℓ of attnflow.theory.metastable_growth_rates(β, d = 3) (arXiv:2410.23228 §4).
    grid = mf.SphereGrid(6)
    beta = 6.0

    def rhs(c):
        flux = grid.to_values(c)[:, None] * grid.velocity(c, beta, normalization)
        return -grid.divergence(flux)

    uniform = jnp.zeros(grid.size).at[0].set(1.0)
    jacobian = jax.jit(jax.jacfwd(rhs))(uniform)
    rates = th.metastable_growth_rates(beta, 3, normalization=normalization, max_degree=6)
    expected = np.diag(rates[np.asarray(grid.degrees())])
    np.testing.assert_allclose(np.asarray(jacobian), expected, atol=1e-10 * rates.max())


def test_energy_increases_at_the_gradient_flow_rate():
    # USA is the gradient ascent of E_β[ρ] = (1/2β)∫∫e^{β⟨x,y⟩}ρρ dσdσ: dE/dt = ∫ρ|X|² dσ.
    # E by double quadrature on the nodes (no Funk–Hecke), dE/dt along ċ = −div(ρX) by jvp.
    grid = mf.SphereGrid(12)
    rng = np.random.default_rng(5)
    c = _smooth_density(grid, rng)
    beta = 2.0
    x = grid.nodes()
    w = grid.quadrature_weights()
    kernel = jnp.exp(beta * x @ x.T)

    def energy(c):
        rho_w = w * grid.to_values(c)
        return rho_w @ kernel @ rho_w / (2 * beta)

    @jax.jit
    def rate_and_dissipation(c):
        rho = grid.to_values(c)
        velocity = grid.velocity(c, beta, "n")
        c_dot = -grid.divergence(rho[:, None] * velocity)
        _, rate = jax.jvp(energy, (c,), (c_dot,))
        return rate, jnp.sum(w * rho * jnp.sum(velocity**2, axis=1))

    rate, dissipation = rate_and_dissipation(c)
    assert float(dissipation) > 0
    np.testing.assert_allclose(float(rate), float(dissipation), rtol=1e-10)


def test_solve_density_growth_rates_and_gradient_in_beta():
    # The shared driver on S²: from ρ₀ = 1 + ε(Y_21 + Y_31), the early-time growth of each
    # coefficient fits e^{λ_ℓ t} with λ_ℓ of attnflow.theory (nonlinear terms are O(ε)); and
    # jax.grad of c_21(T) w.r.t. β through the solve equals central differences of two solves.
    grid = mf.SphereGrid(4)
    eps, t1 = 1e-4, 0.2
    c0 = jnp.zeros(grid.size).at[0].set(1.0)
    c0 = c0.at[_index(2, 1)].set(eps).at[_index(3, 1)].set(eps)

    def solve(beta, c0=c0):
        return mf.solve_density(
            grid, c0, t1, beta=beta, normalization="n", ts=[0.0, t1], rtol=1e-10, atol=1e-14
        )

    def c21(beta, c0=c0):
        sol = solve(beta, c0)
        return sol.coefficients[1, _index(2, 1)], (sol.coefficients, sol.mass, sol.resolved)

    # One compiled program (the solve and its gradient) serves every call below.
    value_and_grad = jax.value_and_grad(c21, has_aux=True)
    h = 1e-4
    finite = []
    for beta in (4.0 - h, 4.0 + h):
        (value, (coefficients, mass, resolved)), _ = value_and_grad(beta)
        assert bool(resolved)
        np.testing.assert_allclose(np.asarray(mass), 1.0, atol=1e-14)
        rates = th.metastable_growth_rates(beta, 3, max_degree=3)
        for ell in (2, 3):
            fitted = np.log(float(coefficients[1, _index(ell, 1)]) / eps) / t1
            np.testing.assert_allclose(fitted, rates[ell], rtol=1e-5)
        finite.append(float(value))
    _, grad = value_and_grad(4.0)
    np.testing.assert_allclose(float(grad), (finite[1] - finite[0]) / (2 * h), rtol=1e-6)
    # A state that stops being resolved, under jax.grad outside jit (the same compiled solve):
    # the resolution error (eqx.error_if), not a ConcretizationTypeError from reading a tracer.
    sharp = c0.at[_index(2, 1)].set(0.15).at[_index(3, 1)].set(0.15)
    with pytest.raises(eqx.EquinoxRuntimeError, match="no longer resolved.*sol.modes_needed"):
        jax.block_until_ready(value_and_grad(4.0, sharp))  # errors surface on the result


def test_float32_follows_float64():
    grid = mf.SphereGrid(6)
    c = _smooth_density(grid, np.random.default_rng(6))
    flux64 = jax.jit(lambda c: grid.divergence(grid.velocity(c, 3.0, "softmax")))(c)
    c32 = c.astype(jnp.float32)
    flux32 = jax.jit(lambda c: grid.divergence(grid.velocity(c, 3.0, "softmax")))(c32)
    assert grid.to_values(c32).dtype == flux32.dtype == jnp.float32
    scale = float(jnp.abs(flux64).max())
    np.testing.assert_allclose(np.asarray(flux32), np.asarray(flux64), atol=1e-5 * scale)


def test_bad_inputs_get_clear_errors():
    with pytest.raises(ValueError, match="degree"):
        mf.SphereGrid(1)
    with pytest.raises(ValueError, match="latitudes"):
        mf.SphereGrid(8, latitudes=5)
    grid = mf.SphereGrid(4)
    with pytest.raises(ValueError, match=r"coefficients: expected .*of shape \(25,\)"):
        grid.to_values(jnp.zeros(16))
    with pytest.raises(ValueError, match="normalization"):
        grid.velocity(jnp.zeros(25), 1.0, "bad")
    with pytest.raises(ValueError, match="beta"):
        grid.velocity(jnp.zeros(25), float("nan"), "n")
