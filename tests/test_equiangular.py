"""The equiangular reduction (§6.1 of arXiv:2512.01868) against independent computations: a
direct :func:`attnflow.solve` of the particle system on tokens built from a Cholesky factor of
(1−ρ₀)I + ρ₀11ᵀ, and mpmath quadrature (40 digits) of the ODE typed here."""

import math

import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

import attnflow as af
import attnflow.theory as th


def rhs(r, beta, n, normalization):
    """ρ' of the reduction, typed from the survey's §6.1 / docs/maths.md §4 (mpmath)."""
    r = mp.mpf(r)
    if normalization == "n":
        return mp.mpf(2) / n * mp.e ** (beta * r) * (1 - r) * (1 + (n - 1) * r)
    return 2 * (1 - r) * (1 + (n - 1) * r) / (mp.e ** (beta * (1 - r)) + n - 1)


def quad_time(beta, n, a, delta, normalization):
    with mp.workdps(40):
        a, b = mp.mpf(a), 1 - mp.mpf(delta)
        # Nodes where the integrand changes scale: near a (the e^{β(1−ρ)} peak) and near b.
        points = [a, a + (b - a) / 1000, a + (b - a) / 20, (a + b) / 2, b]
        return float(mp.quad(lambda r: 1 / rhs(r, beta, n, normalization), points))


def equiangular_tokens(n, rho0):
    """Rows of the Cholesky factor of the Gram matrix (1−ρ₀)I + ρ₀11ᵀ: unit vectors in R^n."""
    gram = (1 - rho0) * np.eye(n) + rho0 * np.ones((n, n))
    return jnp.asarray(np.linalg.cholesky(gram))


CASES = [
    # n, beta, rho0, normalization
    (3, 1.0, -0.3, "softmax"),
    (4, 2.0, 0.3, "n"),
    (4, 0.0, 0.6, "softmax"),
]


@pytest.mark.parametrize("n, beta, rho0, normalization", CASES)
def test_inner_product_matches_a_direct_solve(n, beta, rho0, normalization):
    # The particle system itself, integrated at tight tolerances: the reduction is exact, so the
    # two agree to the solver's error (1e-12 tolerances leave ~1e-11), checked at 1e-9.
    ts = jnp.array([0.0, 0.1, 0.5, 1.0, 2.0, 4.0])
    field = af.SelfAttention(beta, normalization=normalization)
    sol = af.solve(field, equiangular_tokens(n, rho0), 4.0, ts=ts, rtol=1e-12, atol=1e-12)
    gram = jnp.einsum("tid,tjd->tij", sol.ys, sol.ys)
    off = ~np.eye(n, dtype=bool)
    simulated = np.asarray(gram)[:, off]
    assert np.ptp(simulated, axis=1).max() < 1e-10  # stays equiangular
    theory = np.asarray(
        th.equiangular_inner_product(ts, rho0, beta=beta, n=n, normalization=normalization)
    )
    np.testing.assert_allclose(simulated.mean(axis=1), theory, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    "beta, n, rho0, delta, normalization",
    [
        (80.0, 2, 0.5, 1e-3, "softmax"),  # the case: T ≈ 2e15
        (80.0, 2, 0.05, 1e-3, "softmax"),
        (3.0, 5, -0.2, 1e-4, "softmax"),
        (3.0, 5, -0.2, 1e-4, "n"),
        (0.5, 3, 0.3, 0.5, "n"),
        (1e-3, 4, 0.1, 1e-2, "softmax"),
        (20.0, 32, 0.05, 1e-3, "n"),
        (40.0, 8, 0.9, 1e-6, "softmax"),
    ],
)
def test_time_is_the_integral_to_full_precision(beta, n, rho0, delta, normalization):
    got = float(th.equiangular_time(rho0, beta=beta, n=n, delta=delta, normalization=normalization))
    assert math.isfinite(got)
    assert got == pytest.approx(quad_time(beta, n, rho0, delta, normalization), rel=1e-12)


def test_large_beta_time_where_the_time_shift_cancels():
    # From ρ₀ = 0.5 the time shift (difference of two times from ρ = 0) loses everything to
    # rounding: the two clustering times are equal in float64.
    shift = float(th.clustering_time(80.0, 2, 1e-3)) - float(th.clustering_time(80.0, 2, 0.5))
    assert shift == 0.0
    rescaled = float(th.equiangular_time(0.5, beta=80.0, n=2)) * math.exp(-80.0 * 0.5)
    assert rescaled == pytest.approx(quad_time(80.0, 2, 0.5, 1e-3, "softmax") * math.exp(-40.0))
    assert rescaled == pytest.approx(0.008481, abs=1e-6)
    # Leading order e^{β(1−ρ₀)}/(2β(1−ρ₀²)) (1 + O(1/β)): 1/120 = 0.00833.
    assert rescaled * 2 * 80 * 0.75 == pytest.approx(1.0, abs=0.03)


def test_time_inverts_the_inner_product():
    for normalization in ("softmax", "n"):
        t = th.equiangular_time(
            0.2, beta=jnp.array([0.0, 0.5, 3.0]), n=6, delta=1e-4, normalization=normalization
        )
        rho = th.equiangular_inner_product(
            t, 0.2, beta=jnp.array([0.0, 0.5, 3.0]), n=6, normalization=normalization
        )
        np.testing.assert_allclose(rho, 1 - 1e-4, rtol=0, atol=1e-13)
    # Already past the threshold: 0.
    assert float(th.equiangular_time(0.999, beta=1.0, n=3, delta=1e-2)) == 0.0


def test_orthogonal_start_is_the_orthogonal_curve():
    ts = jnp.array([0.3, 2.0, 9.0])
    for normalization in ("softmax", "n"):
        np.testing.assert_allclose(
            th.equiangular_inner_product(ts, 0.0, beta=2.0, n=8, normalization=normalization),
            th.orthogonal_inner_product(ts, beta=2.0, n=8, normalization=normalization),
            rtol=0,
            atol=1e-14,
        )


@pytest.mark.parametrize(
    "beta, n, rho0, normalization",
    [
        (0.0, 8, 0.0, "softmax"),
        (2.0, 5, 0.3, "softmax"),
        (2.0, 5, 0.3, "n"),
        (1e-4, 3, -0.3, "n"),
        (10.0, 4, 0.2, "softmax"),
        (60.0, 2, 0.1, "n"),
    ],
)
def test_asymptotic_constant_is_the_regularised_integral(beta, n, rho0, normalization):
    # log C = λ ∫_a^1 [1/ρ' − 1/(λ(1−ρ))] dρ + log(1 − a), by mpmath.
    got = th.equiangular_asymptotics(rho0, beta=beta, n=n, normalization=normalization)
    lam = 2 * math.exp(beta) if normalization == "n" else 2.0
    assert float(got.rate) == pytest.approx(lam, rel=1e-15)
    with mp.workdps(40):
        a = mp.mpf(rho0)
        f = lambda r: 1 / rhs(r, beta, n, normalization) - 1 / (lam * (1 - r))  # noqa: E731
        ref = lam * mp.quad(f, [a, a + (1 - a) / 1000, (a + 1) / 2, 1]) + mp.log(1 - a)
    assert float(got.log_constant) == pytest.approx(float(ref), rel=1e-11, abs=1e-12)


def test_rate_and_constant_against_the_particles():
    # (1 − ρ(t)) e^{λt} → C along a direct solve of the particles (USA, n = 4, β = 1, ρ₀ = 0.2;
    # SA's rate 2 and constant are checked through the quadrature above).
    n, beta, rho0, normalization = 4, 1.0, 0.2, "n"
    asym = th.equiangular_asymptotics(rho0, beta=beta, n=n, normalization=normalization)
    rate, c = float(asym.rate), math.exp(float(asym.log_constant))
    t_late = 14.0 / rate
    ts = jnp.array([t_late, t_late + 0.5 / rate])
    field = af.SelfAttention(beta, normalization=normalization)
    sol = af.solve(field, equiangular_tokens(n, rho0), ts[-1], ts=ts, rtol=1e-12, atol=1e-14)
    # 1 − ρ from the distance (no cancellation): |x_1 − x_2|² = 2(1 − ρ).
    gap = 0.5 * np.sum(np.asarray(sol.ys[:, 0] - sol.ys[:, 1]) ** 2, axis=-1)
    slope = -math.log(gap[1] / gap[0]) / float(ts[1] - ts[0])
    assert slope == pytest.approx(rate, rel=1e-3)
    assert gap[1] * math.exp(rate * float(ts[1])) == pytest.approx(c, rel=1e-3)


def test_rho0_outside_the_open_interval_is_refused():
    with pytest.raises(ValueError, match="rho0"):
        th.equiangular_inner_product(1.0, -0.5, beta=1.0, n=3)  # the simplex: −1/(n−1)
    with pytest.raises(ValueError, match="rho0"):
        th.equiangular_time(1.0, beta=1.0, n=3)
    with pytest.raises(ValueError, match="delta"):
        th.equiangular_time(0.2, beta=1.0, n=3, delta=0.0)
