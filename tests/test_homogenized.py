"""The homogenised limit of deep random multi-head attention (attnflow/_homogenized.py).

References: the discrete random model (random_multihead_attention + layers) by Monte Carlo,
the closed-form two-token coefficients, a finite-difference linearisation, the symmetry of the
circle, and af.solve of the deterministic (SA) flow.
"""

import os
import pathlib
import runpy

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
# For the Monte Carlo runs bound by run time rather than compile time: XLA's default optimisation
# (conftest.py lowers it for the rest of the suite) runs them two to four times faster.
RUN_TIME_BOUND = {"xla_backend_optimization_level": 2}


def _pair(rho0, d=D):
    x = np.zeros((2, d))
    x[0, 0] = 1.0
    x[1, 0], x[1, 1] = rho0, np.sqrt(1 - rho0**2)
    return jnp.asarray(x)


@pytest.mark.parametrize("beta, rho0", [(1.0, -0.3)])  # β = 0: in the notebook test
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
    b, s2 = theory.homogenized_pair_coefficients(rho0, beta=beta, d=D)
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


def test_antipodal_rate_and_threshold_closed_forms():
    # λ_− against a finite-difference linearisation of the two-token coefficients.
    for beta, d in ((0.0, 8), (0.7, 5), (2.0, 12)):
        h = 1e-5
        b, s2 = theory.homogenized_pair_coefficients(-1 + h, beta=beta, d=d)
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
    with pytest.raises(ValueError, match="d: expected"):
        theory.homogenized_antipodal_rate(1.0, 1)
    with pytest.raises(ValueError, match="value_mean"):
        theory.homogenized_collapse_probability(1.0, 4, value_mean=-1.0)
    with pytest.raises(ValueError, match="realizations"):
        af.homogenized_phase_diagram(jr.key(0), n=2, d=3, betas=[1.0], ts=[1.0], realizations=0)


def test_float32():
    x0 = af.random_tokens(jr.key(0), 3, 3).astype(jnp.float32)
    sol = af.solve_homogenized(x0, 0.5, beta=1.0, key=jr.key(1), dt=0.05, brownian="fast")
    assert sol.ys.dtype == jnp.float32
    assert float(jnp.abs(jnp.linalg.norm(sol.ys, axis=-1) - 1).max()) < 1e-5


@pytest.mark.slow
def test_notebook_runs_quick(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parents[1] / "notebooks" / "homogenized.py"
    ns = runpy.run_path(os.fspath(path), run_name="__main__")
    assert ns["drift_error"] < 4  # one layer: drift of ρ within 4 standard errors of 0.375
    errors = ns["ode_errors"]  # deterministic regime: error shrinks as τ/H → 0
    assert errors[-1] < 0.02 and errors[-1] < errors[0] / 4
    # Collapse probability at T = 20 against the closed form, both sides of β_c(6) ≈ 1.03.
    assert np.all(np.abs(ns["p_sim"] - ns["p_closed"]) < 4 * ns["p_se"] + 0.02)
    assert ns["p_closed"][0] == 1.0 and ns["p_closed"][-1] < 0.8


def _numpy_softmax_average(x, beta):
    """m_i = Σ_j softmax_j(β⟨x_i, x_j⟩) x_j (Q = K = I), in NumPy."""
    logits = beta * x @ x.T
    a = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (a / a.sum(axis=1, keepdims=True)) @ x


def numpy_euler_maruyama(x0, beta, mu, dt, increments, ito_factor=1.0):
    """Euler–Maruyama of the docstring's SDE (H), written from the formula: the state y off the
    sphere, coefficients at y/|y|, P_y = I − y yᵀ/|y|²; returns the normalised states."""
    d = x0.shape[1]
    y, out = np.array(x0), [np.array(x0)]
    for dB in increments:
        x = y / np.linalg.norm(y, axis=1, keepdims=True)
        m = _numpy_softmax_average(x, beta)
        P = np.eye(d)[None] - np.einsum("ia,ib->iab", y, y) / np.sum(y * y, axis=1)[:, None, None]
        Px = np.eye(d)[None] - np.einsum("ia,ib->iab", x, x)
        drift = mu * np.einsum("iab,ib->ia", Px, m)
        drift -= ito_factor * (d - 1) / (2 * d) * np.sum(m * m, axis=1, keepdims=True) * y
        noise = np.einsum("iab,ib->ia", P, m @ np.asarray(dB).T) / np.sqrt(d)
        y = y + drift * dt + noise
        out.append(y / np.linalg.norm(y, axis=1, keepdims=True))
    return np.stack(out)


def test_solve_homogenized_path_by_path_against_numpy_euler_maruyama():
    # The same Brownian increments (the VirtualBrownianTree of the documented construction) drive
    # both: every saved state agrees to rounding. An Itô correction off by a factor of 2 moves
    # |y| towards 1/√2, scales the noise on the directions by √2 and breaks the agreement.
    import diffrax

    n, d, beta, mu, dt, steps = 3, 4, 1.5, 0.7, 0.05, 20
    x0 = af.random_tokens(jr.key(4), n, d)
    key = jr.key(5)
    grid = dt * np.arange(steps + 1)
    sol = af.solve_homogenized(x0, grid[-1], beta=beta, key=key, value_mean=mu, dt=dt, ts=grid)
    tree = diffrax.VirtualBrownianTree(
        0.0, jnp.asarray(grid[-1]), tol=dt / 4, shape=jax.ShapeDtypeStruct((d, d), jnp.float64),
        key=key,
    )  # fmt: skip
    increments = [tree.evaluate(a, b) for a, b in zip(grid[:-1], grid[1:], strict=True)]
    reference = numpy_euler_maruyama(np.asarray(x0), beta, mu, dt, increments)
    np.testing.assert_allclose(np.asarray(sol.ys), reference, atol=1e-9)
    wrong = numpy_euler_maruyama(np.asarray(x0), beta, mu, dt, increments, ito_factor=2.0)
    assert np.abs(wrong - reference).max() > 1e-3  # the comparison sees that bug


def test_random_qk_moments_against_fresh_monte_carlo():
    # M_i = E m^θ_i and C_ij = E⟨m^θ_i, m^θ_j⟩ from the quadrature nodes against NumPy draws of
    # Q, K = G/k^{1/4} written from the law of random_multihead_attention.
    import attnflow.models as am

    n, d, k, beta = 4, 3, 5, 1.7
    x = np.asarray(af.random_tokens(jr.key(0), n, d))
    Q, K = am.random_qk_nodes(jr.key(1), d, nodes=20000, k=k)
    M, C = am.random_qk_moments(jnp.asarray(x), beta, Q, K)
    rng = np.random.default_rng(0)
    R = 40000
    q = rng.standard_normal((R, k, d)) / k**0.25
    kk = rng.standard_normal((R, k, d)) / k**0.25
    logits = beta * np.einsum("rki,rkj->rij", q @ x.T, kk @ x.T)
    a = np.exp(logits - logits.max(-1, keepdims=True))
    m = (a / a.sum(-1, keepdims=True)) @ x
    Cs = np.einsum("rid,rjd->rij", m, m)
    se_M, se_C = m.std(0) / np.sqrt(R), Cs.std(0) / np.sqrt(R)
    assert np.all(np.abs(np.asarray(M) - m.mean(0)) < 5 * np.sqrt(2) * se_M + 1e-12)
    assert np.all(np.abs(np.asarray(C) - Cs.mean(0)) < 5 * np.sqrt(2) * se_C + 1e-12)
    # Random Q, K average the attention: C_ii < |m_i|² of one fixed draw on average, and the
    # means differ from the Q = K = I attention average by far more than the error.
    fixed = _numpy_softmax_average(x, beta)
    assert np.abs(np.asarray(M) - fixed).max() > 0.05


def _rho_moments(samples):
    mean, var = samples.mean(axis=0), samples.var(axis=0)
    R = samples.shape[0]
    fourth = np.mean((samples - mean) ** 4, axis=0)
    return mean, var, np.sqrt(var / R), np.sqrt((fourth - var**2) / R)


def test_random_qk_limit_against_the_discrete_model_at_growing_depth_and_heads():
    # The paper's model (Q, K, V all resampled per layer and head, diffusive scaling) against
    # the SDE (HR): E and Var of the three inner products at T = 1, R paths each, at
    # (L, H) = (4, 1) and (32, 4): each within 4 standard errors, while the Q = K = I
    # limit (H) is many standard errors off (the comparison can tell the two limits apart).
    import attnflow.models as am

    n, d, beta, T, R = 3, 4, 2.0, 1.0, 1000
    x0 = af.random_tokens(jr.key(3), n, d)
    pairs = (np.array([0, 0, 1]), np.array([1, 2, 2]))

    def rho(x):
        G = x @ x.T
        return G[pairs]

    def discrete(L, H):
        def one(key):
            f = af.random_multihead_attention(key, d, num_layers=L, num_heads=H, t1=T, beta=beta)
            return rho(af.layers(f, x0, L, T / L)[-1])

        return np.asarray(
            jax.jit(jax.vmap(one), compiler_options=RUN_TIME_BOUND)(jr.split(jr.key(1), R))
        )

    def limit(key):
        sol = am.solve_homogenized_random_qk(
            x0, T, beta=beta, key=key, dt=T / 32, brownian="fast", nodes=256
        )
        return rho(sol.ys[-1])

    sde = np.asarray(
        jax.jit(jax.vmap(limit), compiler_options=RUN_TIME_BOUND)(jr.split(jr.key(2), R))
    )
    m_sde, v_sde, se_m_sde, se_v_sde = _rho_moments(sde)
    errors = []
    for L, H in ((4, 1), (32, 4)):
        m, v, se_m, se_v = _rho_moments(discrete(L, H))
        z_mean = np.abs(m - m_sde) / np.hypot(se_m, se_m_sde)
        z_var = np.abs(v - v_sde) / np.hypot(se_v, se_v_sde)
        errors.append(max(z_mean.max(), z_var.max()))
    assert max(errors) < 4
    assert float(v_sde.min()) > 0.02  # the noise is real
    fixed = np.asarray(
        jax.jit(jax.vmap(lambda k: rho(af.solve_homogenized(
            x0, T, beta=beta, key=k, dt=T / 32, brownian="fast").ys[-1])),
            compiler_options=RUN_TIME_BOUND)(jr.split(jr.key(2), R))
    )  # fmt: skip
    m_f, v_f, se_f, _ = _rho_moments(fixed)
    z_fixed = np.max(np.abs(m_f - m_sde) / np.hypot(se_f, se_m_sde))
    print("z-scores of (L, H) = (4, 1), (32, 4); of the fixed-QK limit:", errors, z_fixed)
    assert z_fixed > 6


def test_attention_concentration_against_monte_carlo():
    rng = np.random.default_rng(0)
    for beta, n in ((0.0, 8), (1.0, 128), (2.0, 64), (3.0, 16)):
        z = beta * rng.standard_normal((20000, n))
        a = np.exp(z - z.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        s = np.sum(a * a, axis=1)
        kappa = theory.attention_concentration(beta, n)
        assert abs(kappa - s.mean()) < 4 * s.std() / np.sqrt(len(s)) + 1e-7


def test_orthogonal_tradeoff_against_the_quadrature_of_the_random_qk_limit():
    # The growth g and the rate λ of the linearised mean overlap, against the drift of ρ_ij
    # under (HR) computed from random_qk_moments (quadrature over Q, K, head dimension k = 256)
    # at tokens with Gram matrix (1 − ρ)I + ρ11ᵀ, by a finite difference in ρ. Tolerance: the
    # O(β²/n) terms the linearisation drops.
    import attnflow.models as am

    n, beta, k = 32, 1.0, 256
    d = n + 1
    Q, K = am.random_qk_nodes(jr.key(0), d, nodes=300, k=k)
    off = ~np.eye(n, dtype=bool)

    def drift(rho):
        x = np.zeros((n, d))
        x[:, 1:] = np.sqrt(1 - rho) * np.eye(n)
        x[:, 0] = np.sqrt(rho)
        _, C = am.random_qk_moments(jnp.asarray(x), beta, Q, K)
        C = np.asarray(C)
        c = np.diag(C)
        value = (C * (d - 2 + rho**2) - (d - 1) * (c[:, None] + c[None, :]) * rho / 2) / d
        return value[off].mean()

    r = theory.homogenized_orthogonal_tradeoff(beta, n, d)
    h = 0.02
    assert drift(0.0) == pytest.approx(r.growth, rel=0.05)
    assert (drift(h) - drift(0.0)) / h == pytest.approx(r.rate, rel=0.08)
    # Mitigated (λ < 0) exactly when κ exceeds (d − 2)(n − 1)/((d − 1)n).
    for beta_, n_, d_ in ((3.0, 16, 3), (3.0, 16, 4), (0.5, 16, 3)):
        t = theory.homogenized_orthogonal_tradeoff(beta_, n_, d_)
        threshold = (d_ - 2) * (n_ - 1) / ((d_ - 1) * n_)
        assert (t.rate < 0) == (t.concentration > threshold)
        assert np.isfinite(t.plateau) == (t.rate < 0)
