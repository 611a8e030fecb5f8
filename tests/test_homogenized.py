"""The homogenised limit of deep random multi-head attention (attnflow/_homogenized.py).

References: the discrete random model (random_multihead_attention + layers) by Monte Carlo,
the closed-form two-token coefficients, a finite-difference linearisation, the symmetry of the
circle, and af.solve of the deterministic (SA) flow.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
from attnflow import theory

D = 6
I6 = jnp.eye(D)


def _pair(rho0, d=D):
    x = np.zeros((2, d))
    x[0, 0] = 1.0
    x[1, 0], x[1, 1] = rho0, np.sqrt(1 - rho0**2)
    return jnp.asarray(x)


@pytest.mark.parametrize("beta, rho0", [(1.0, -0.3), (0.0, 0.4)])
def test_one_layer_of_the_discrete_model_has_the_generator_of_the_limit(beta, rho0):
    # Antithetic pairs (V, −V): their mean increment is the drift τ b(ρ) + O(τ²) with no √τ noise,
    # half their difference squared is τ σ²(ρ) + O(τ²). Heads hold Q = K = I fixed.
    tau, R = 1e-3, 2000
    x0 = _pair(rho0)

    def one(key):
        f = af.random_multihead_attention(
            key, D, num_layers=1, num_heads=2, t1=tau, beta=beta, fixed={"Q": I6, "K": I6}
        )
        g = eqx.tree_at(lambda f: f.field.V, f, -f.field.V)
        xa, xb = af.layers(f, x0, 1, tau)[-1], af.layers(g, x0, 1, tau)[-1]
        ra, rb = xa[0] @ xa[1] - rho0, xb[0] @ xb[1] - rho0
        return (ra + rb) / 2 / tau, ((ra - rb) / 2) ** 2 / tau

    drift, sq = jax.jit(jax.vmap(one))(jr.split(jr.key(0), R))
    b, s2 = theory.homogenized_pair_coefficients(rho0, beta, D)
    # 4 standard errors plus the O(τ) bias (about 1e-3 here).
    assert abs(float(drift.mean()) - b) < 4 * float(drift.std()) / np.sqrt(R) + 2e-3
    assert abs(float(sq.mean()) - s2) < 4 * float(sq.std()) / np.sqrt(R) + 2e-3
    if beta == 0.0:  # the closed form (1 − ρ²)(d − 2 − ρ)/(2d) of the issue
        assert b == pytest.approx((1 - rho0**2) * (D - 2 - rho0) / (2 * D))


def test_discrete_model_matches_sde_in_mean_and_variance():
    # n = 3, d = 4, β = 2: E ρ_12(T) and Var ρ_12(T) at T = 1 for the discrete model (L = 40
    # layers, H = 3 heads) and for the SDE (Euler–Maruyama, dt = 0.05), R paths each.
    n, d, beta, T, L, R = 3, 4, 2.0, 1.0, 20, 1000
    I4 = jnp.eye(d)
    x0 = af.random_tokens(jr.key(3), n, d)

    def discrete(key):
        f = af.random_multihead_attention(
            key, d, num_layers=L, num_heads=3, t1=T, beta=beta, fixed={"Q": I4, "K": I4}
        )
        x = af.layers(f, x0, L, T / L)[-1]
        return x[0] @ x[1]

    def limit(key):
        x = af.solve_homogenized(x0, T, beta=beta, key=key, dt=T / L, brownian="fast").ys[-1]
        return x[0] @ x[1]

    a = jax.jit(jax.vmap(discrete))(jr.split(jr.key(1), R))
    b = jax.jit(jax.vmap(limit))(jr.split(jr.key(2), R))
    se_mean = np.sqrt((a.var() + b.var()) / R)
    assert abs(float(a.mean() - b.mean())) < 4 * se_mean + 0.01
    # Var of a sample variance ≈ (μ4 − σ⁴)/R.
    se_var = np.sqrt(
        (
            jnp.mean((a - a.mean()) ** 4)
            - a.var() ** 2
            + jnp.mean((b - b.mean()) ** 4)
            - b.var() ** 2
        )
        / R
    )
    assert abs(float(a.var() - b.var())) < 4 * se_var + 0.01
    # The noise is real: ρ spreads (a deterministic limit would give Var ρ(T) = 0).
    assert float(b.var()) > 0.02
    rho0 = float(x0[0] @ x0[1])
    assert abs(float(b.mean()) - rho0) > 4 * se_mean  # and it drifts


def test_deterministic_regime_is_the_attention_flow():
    # "ode" scaling, μ = 1: the random model tends to ẋ_i = P_{x_i} Σ_j a_ij x_j, i.e. (SA).
    n, d, beta, T = 4, 3, 1.0, 1.0
    x0 = af.random_tokens(jr.key(5), n, d)
    exact = af.solve(af.SelfAttention(beta), x0, T, rtol=1e-8, atol=1e-10).ys[-1]
    I3 = jnp.eye(d)
    errors = []
    for L, H in ((8, 2), (64, 32)):
        f = af.random_multihead_attention(
            jr.key(L), d, num_layers=L, num_heads=H, t1=T, beta=beta, scaling="ode",
            value_mean=1.0, fixed={"Q": I3, "K": I3},
        )  # fmt: skip
        errors.append(float(jnp.abs(af.layers(f, x0, L, T / L)[-1] - exact).max()))
    assert errors[1] < 0.02 and errors[1] < errors[0] / 3
    sol = af.solve_homogenized(x0, T, beta=beta, value_mean=1.0, regime="ode", dt=1e-2)
    assert float(jnp.abs(sol.ys[-1] - exact).max()) < 1e-2  # Euler, O(dt)


def test_antipodal_rate_and_threshold_closed_forms():
    # λ_− against a finite-difference linearisation of the two-token coefficients.
    for beta, d in ((0.0, 8), (0.7, 5), (2.0, 12)):
        h = 1e-5
        b, s2 = theory.homogenized_pair_coefficients(-1 + h, beta, d)
        A, S = b / h, s2 / h**2  # b ≈ A v and σ² ≈ S v² near v = 1 + ρ = 0
        assert theory.homogenized_antipodal_rate(beta, d) == pytest.approx(A - S / 2, abs=1e-3)
    for d in (4, 6, 9):
        bc = theory.homogenized_critical_beta(d)
        assert theory.homogenized_antipodal_rate(bc, d) == pytest.approx(0.0, abs=1e-12)
        assert theory.homogenized_antipodal_rate(bc - 0.05, d) > 0
        assert theory.homogenized_antipodal_rate(bc + 0.05, d) < 0
        assert theory.homogenized_collapse_probability(bc - 0.05, d) == 1.0
        assert theory.homogenized_collapse_probability(bc + 0.5, d) < 0.99
    # The circle: 2pq(d − 2) = 0, the scale density is even in ρ: P = 1/2 for every β.
    for beta in (0.0, 1.0, 4.0):
        assert theory.homogenized_collapse_probability(beta, 2) == pytest.approx(0.5, abs=1e-6)


def test_collapse_probability_against_the_sde_on_both_sides_of_the_threshold():
    # d = 6: β_c = ½ arccosh 4 ≈ 1.03. Below it the pair collapses a.s.; above it the antipodal
    # pair attracts and P(collapse) < 1. Simulation at T = 20 (both rates are ≥ 0.3).
    d, R = 6, 400
    betas = [0.5, 3.0]
    p = af.homogenized_phase_diagram(
        jr.key(11), n=2, d=d, betas=betas, ts=[20.0], realizations=R, dt=0.05
    )[:, 0]
    expected = [theory.homogenized_collapse_probability(b, d) for b in betas]
    assert expected[0] == 1.0 and 0.6 < expected[1] < 0.8
    for got, want in zip(np.asarray(p), expected, strict=True):
        assert abs(got - want) < 4 * np.sqrt(max(want * (1 - want), 0.01) / R) + 0.02


def test_validation():
    x0 = af.random_tokens(jr.key(0), 3, 3)
    with pytest.raises(ValueError, match="key"):
        af.solve_homogenized(x0, 1.0)
    with pytest.raises(ValueError, match="regime"):
        af.solve_homogenized(x0, 1.0, key=jr.key(0), regime="fast")
    with pytest.raises(ValueError, match="fixed"):
        af.random_multihead_attention(jr.key(0), 3, num_layers=2, num_heads=1, fixed={"W": I6})
    with pytest.raises(ValueError, match=r"fixed\['V'\]"):
        af.random_multihead_attention(jr.key(0), 3, num_layers=2, num_heads=1, fixed={"V": I6})
    with pytest.raises(ValueError, match="realizations"):
        af.homogenized_phase_diagram(jr.key(0), n=2, d=3, betas=[1.0], ts=[1.0], realizations=0)


def test_float32():
    x0 = af.random_tokens(jr.key(0), 3, 3).astype(jnp.float32)
    sol = af.solve_homogenized(x0, 0.5, beta=1.0, key=jr.key(1), dt=0.05, brownian="fast")
    assert sol.ys.dtype == jnp.float32
    assert float(jnp.abs(jnp.linalg.norm(sol.ys, axis=-1) - 1).max()) < 1e-5
