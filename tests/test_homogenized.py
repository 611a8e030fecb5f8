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
