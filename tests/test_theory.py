"""attnflow.theory (Thm 6.7, Thm 6.8, (6.12), Lemma 6.4) against independent computations:
scipy quadrature and ODE solves of (6.9)/(6.10) written here, particle simulations, linear
programming Monte Carlo for Wendel's theorem."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq, linprog

import attnflow.theory as th

BETAS = np.array([0.0, 1e-6, 0.3, 2.0, 9.0, 30.0, 60.0])


def rhs_69(g, n, beta, normalization):
    """(6.9) (SA) and (6.10) (USA), typed from MATH.md §4."""
    if normalization == "softmax":
        return (
            2
            * np.exp(beta * g)
            * (1 - g)
            * ((n - 1) * g + 1)
            / (np.exp(beta) + (n - 1) * np.exp(beta * g))
        )
    return 2 / n * np.exp(beta * g) * (1 - g) * ((n - 1) * g + 1)


def rhs_69_t(t, g, n, beta, normalization):
    return rhs_69(g, n, beta, normalization)


def quad_time(beta, n, delta, normalization):
    value, _ = quad(
        lambda g: 1 / rhs_69(g, n, beta, normalization),
        0,
        1 - delta,
        epsabs=0,
        epsrel=1e-13,
        limit=200,
    )
    return value


@pytest.mark.parametrize("normalization", ["softmax", "n"])
@pytest.mark.parametrize("n, delta", [(2, 1e-3), (5, 0.1), (32, 1e-3), (32, 0.7)])
def test_clustering_time_matches_quadrature(normalization, n, delta):
    ours = np.asarray(th.clustering_time(BETAS, n, delta, normalization))
    ref = np.array([quad_time(b, n, delta, normalization) for b in BETAS])
    np.testing.assert_allclose(ours, ref, rtol=1e-10)


def test_clustering_time_paper_values_and_asymptotics():
    # MATH.md §9: exact n = 32 curve has t*(6) = 16.0 and β*(30) = 6.91.
    assert abs(float(th.clustering_time(6.0, 32)) - 16.0) < 0.05
    assert abs(float(th.clustering_beta(30.0, 32)) - 6.91) < 0.005
    # Large β (β ≫ n): t*_SA ~ e^β / (2β); MATH.md quotes the ratio 1.0003 at n = 2, β = 80.
    ratio = float(th.clustering_time(80.0, 2)) / (math.exp(80.0) / 160.0)
    assert abs(ratio - 1.0003) < 5e-5
    # β = 0: ½ ln(m/δ), m = n − (n−1)δ, for both models.
    for norm in ("softmax", "n"):
        expected = 0.5 * math.log((32 - 31e-3) / 1e-3)
        assert math.isclose(float(th.clustering_time(0.0, 32, 1e-3, norm)), expected, rel_tol=1e-14)


def test_clustering_time_monotone_and_float32():
    betas = jnp.linspace(0.0, 40.0, 7)
    sa = np.asarray(th.clustering_time(betas, 16))
    usa = np.asarray(th.clustering_time(betas, 16, normalization="n"))
    assert np.all(np.diff(sa) > 0) and np.all(np.diff(usa) < 0)
    sa32 = th.clustering_time(betas.astype(jnp.float32), 16)
    assert sa32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(sa32), sa, rtol=2e-5)
    # USA's scaled form never overflows; SA's t* overflows only with e^β.
    assert np.isfinite(float(th.clustering_time(2000.0, 8, normalization="n")))


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_orthogonal_inner_product_matches_ode(normalization):
    ts = np.linspace(0.0, 30.0, 31)
    for n, beta in ((4, 0.0), (4, 2.0), (32, 6.0), (8, 12.0)):
        sol = solve_ivp(
            rhs_69_t,
            (0, 30),
            [0.0],
            args=(n, beta, normalization),
            t_eval=ts,
            rtol=1e-13,
            atol=1e-14,
            method="DOP853",
        )
        ours = np.asarray(
            th.orthogonal_inner_product(ts, beta=beta, n=n, normalization=normalization)
        )
        np.testing.assert_allclose(ours, sol.y[0], atol=1e-10)


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_orthogonal_inner_product_matches_particles(normalization):
    """Thm 6.8 itself: orthogonal tokens keep equal pairwise angles, following (6.9)/(6.10)."""
    n, d, beta = 4, 5, 1.5
    rng = np.random.default_rng(0)
    x0 = np.linalg.qr(rng.standard_normal((d, d)))[0][:n]  # n orthonormal rows, rotated
    ts = np.linspace(0.0, 6.0, 13)
    sol = solve_ivp(
        lambda t, y: particle_rhs(y, n, d, beta, normalization),
        (0, 6),
        x0.ravel(),
        t_eval=ts,
        rtol=1e-12,
        atol=1e-13,
        method="DOP853",
    )
    xs = sol.y.T.reshape(-1, n, d)
    xs /= np.linalg.norm(xs, axis=2, keepdims=True)
    off = np.einsum("tid,tjd->tij", xs, xs)[:, ~np.eye(n, dtype=bool)]
    gamma = np.asarray(th.orthogonal_inner_product(ts, beta=beta, n=n, normalization=normalization))
    np.testing.assert_allclose(off, np.broadcast_to(gamma[:, None], off.shape), atol=1e-9)


def test_beta0_closed_form():
    ts = np.linspace(0.0, 5.0, 11)
    np.testing.assert_allclose(
        np.asarray(th.orthogonal_inner_product_beta0(ts, n=2)), np.tanh(ts), atol=1e-15
    )
    # The bisection branch near β = 0 joins the closed form continuously.
    near = np.asarray(th.orthogonal_inner_product(ts, beta=1e-9, n=7))
    np.testing.assert_allclose(
        near, np.asarray(th.orthogonal_inner_product_beta0(ts, n=7)), atol=1e-8
    )
    assert float(th.orthogonal_inner_product_beta0(1e4, n=3)) == 1.0


def test_gamma_hits_threshold_at_clustering_time():
    for norm in ("softmax", "n"):
        t_star = float(th.clustering_time(3.0, 10, 0.01, norm))
        assert (
            abs(
                float(th.orthogonal_inner_product(t_star, beta=3.0, n=10, normalization=norm))
                - 0.99
            )
            < 1e-12
        )


def test_clustering_beta_inverts_quadrature():
    for t in (6.0, 16.0, 30.0):
        ref = brentq(lambda b, t=t: quad_time(b, 32, 1e-3, "softmax") - t, 0.0, 20.0, xtol=1e-13)
        assert abs(float(th.clustering_beta(t, 32)) - ref) < 1e-9
    out = np.asarray(th.clustering_beta(jnp.array([1.0, 5.0]), 32))
    assert np.isnan(out[0]) and np.isnan(out[1])  # t < t*(0) = 5.18: nothing clusters
    usa = np.asarray(th.clustering_beta(jnp.array([1.0, 6.0]), 32, normalization="n"))
    ref = brentq(lambda b: quad_time(b, 32, 1e-3, "n") - 1.0, 1e-6, 50.0, xtol=1e-13)
    assert abs(usa[0] - ref) < 1e-9 and usa[1] == 0.0


def in_open_hemisphere(x):
    """LP: maximise s subject to ⟨x_i, w⟩ ≥ s, |w_k| ≤ 1; hemisphere iff s > 0."""
    n, d = x.shape
    c = np.zeros(d + 1)
    c[-1] = -1.0
    a_ub = np.hstack([-x, np.ones((n, 1))])
    res = linprog(
        c, A_ub=a_ub, b_ub=np.zeros(n), bounds=[(-1, 1)] * d + [(None, 1)], method="highs"
    )
    return -res.fun > 1e-9


@pytest.mark.parametrize("n, d", [(6, 3), (7, 4)])
def test_wendel_monte_carlo(n, d):
    rng = np.random.default_rng(n * 10 + d)
    samples = 600
    hits = 0
    for _ in range(samples):
        x = rng.standard_normal((n, d))
        hits += in_open_hemisphere(x / np.linalg.norm(x, axis=1, keepdims=True))
    p = th.wendel(n, d)
    se = math.sqrt(p * (1 - p) / samples)
    assert abs(hits / samples - p) < 4 * se


def test_wendel_exact_values():
    assert th.wendel(4, 2) == 0.5  # n / 2^{n-1} on the circle
    assert th.wendel(10, 2) == 10 / 2**9
    assert th.wendel(3, 3) == 1.0 and th.wendel(1, 2) == 1.0


def attention_weights(x, beta, normalization):
    logits = beta * x @ x.T
    if normalization == "softmax":
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return np.exp(logits) / x.shape[0]


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_cone_collapse_weight_bound_is_valid_and_tight(normalization):
    """Lemma 6.4's ingredient a_ij ≥ e^{-2β}/n (SA), e^{-β}/n (USA): the rate is 1/4 of it."""
    n, beta = 6, 2.5
    rate = float(th.cone_collapse_rate(beta, n, normalization))
    bound = 4 * rate
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = rng.standard_normal((n, 3))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        assert attention_weights(x, beta, normalization).min() >= bound * (1 - 1e-12)
    # n − 1 tokens at e_1 and one at −e_1 nearly attain it (up to n/(n−1) for SA).
    x = np.zeros((n, 3))
    x[:, 0] = 1.0
    x[-1, 0] = -1.0
    worst = attention_weights(x, beta, normalization)[0, -1]
    assert bound <= worst <= bound * n / (n - 1) * 1.01


def particle_rhs(y, n, d, beta, normalization):
    """(SA)/(USA) for one system in NumPy, evaluated at the normalised tokens."""
    z = y.reshape(n, d)
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    v = attention_weights(z, beta, normalization) @ z
    return (v - np.sum(v * z, axis=1, keepdims=True) * z).ravel()


def test_cone_collapse_bound_holds_along_a_trajectory():
    n, d, beta = 5, 3, 1.0
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, d))
    x[:, 0] = np.abs(x[:, 0]) + 0.05  # an open hemisphere around e_1
    x /= np.linalg.norm(x, axis=1, keepdims=True)

    ts = np.linspace(0, 60, 601)
    sol = solve_ivp(
        lambda t, y: particle_rhs(y, n, d, beta, "softmax"),
        (0, 60),
        x.ravel(),
        t_eval=ts,
        rtol=1e-11,
        atol=1e-12,
    )
    traj = sol.y.T.reshape(-1, n, d)
    traj /= np.linalg.norm(traj, axis=2, keepdims=True)
    x_star = traj[-1].mean(axis=0)
    x_star /= np.linalg.norm(x_star)
    alpha = np.min(traj @ x_star, axis=1)
    t0 = ts[np.argmax(alpha >= 0.5)]
    after = ts >= t0
    bound = np.asarray(th.cone_collapse_bound(ts[after], beta=beta, n=n, t0=t0))
    assert np.all(1 - alpha[after] <= bound + 1e-12)
    assert float(th.cone_collapse_rate(beta, n, "n")) == pytest.approx(
        float(th.cone_collapse_rate(beta, n)) * math.exp(beta), rel=1e-14
    )


def test_bad_inputs():
    with pytest.raises(ValueError, match="n: expected an integer"):
        th.clustering_time(1.0, 1)
    with pytest.raises(ValueError, match="delta: expected a threshold"):
        th.clustering_time(1.0, 4, 0.0)
    with pytest.raises(ValueError, match="beta: expected finite values >= 0"):
        th.clustering_time(-1.0, 4)
    with pytest.raises(ValueError, match="normalization: expected 'softmax'"):
        th.orthogonal_inner_product(1.0, beta=1.0, n=4, normalization="sum")
    with pytest.raises(ValueError, match="t: expected finite values >= 0"):
        th.orthogonal_inner_product(-1.0, beta=1.0, n=4)
    with pytest.raises(ValueError, match="d: expected an integer dimension >= 2"):
        th.wendel(3, 1)
    with pytest.raises(ValueError, match="beta: expected finite values >= 0"):
        th.cone_collapse_rate(float("nan"), 3)
