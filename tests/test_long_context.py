"""Long-context scaling β = γ log n on equiangular tokens (§6.3, Thm 7 of arXiv:2512.01868;
arXiv:2510.05554): the finite-n closed forms against attnflow's own attention matrix, attention
output and pre-LN layers at small n (tokens from a Cholesky factor of (1−ρ)I + ρ11ᵀ), and the
limits n → ∞ by evaluating the finite-n forms at n = 10^250."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import attnflow as af
import attnflow.theory as th

HUGE = 10**250


def tokens(n, rho):
    gram = (1 - rho) * np.eye(n) + rho * np.ones((n, n))
    return jnp.asarray(np.linalg.cholesky(gram))


def off_diagonal(x):
    g = np.asarray(af.gram(af.normalize(x)))
    off = g[~np.eye(len(g), dtype=bool)]
    assert np.ptp(off) < 1e-13  # still equiangular
    return off.mean()


def test_beta_is_gamma_log_n_for_fields_and_theory():
    assert th.long_context_beta(1.5, 100) == 1.5 * math.log(100)
    assert isinstance(th.long_context_beta(1.5, 100), float)
    np.testing.assert_allclose(
        th.long_context_beta(jnp.array([0.0, 2.0]), 7), [0.0, 2 * math.log(7)], rtol=1e-15
    )
    field = af.SelfAttention.long_context(2.0, 50, normalization="n")
    assert field.beta == 2.0 * math.log(50) and field.normalization == "n"
    with pytest.raises(ValueError, match="gamma"):
        th.long_context_beta(-1.0, 10)
    with pytest.raises(ValueError, match="n"):
        th.long_context_beta(1.0, 2.5)


CASES = [(3, -0.2, 0.5), (5, 0.4, 2.0), (7, 0.4, 1 / 0.6), (6, 0.7, 4.0)]


@pytest.mark.parametrize("n, rho, gamma", CASES)
def test_attention_weights_are_attnflows(n, rho, gamma):
    beta = th.long_context_beta(gamma, n)
    a = np.asarray(af.SelfAttention(beta).attention_matrix(tokens(n, rho)))
    weights = th.equiangular_attention_weights(rho, beta=beta, n=n)
    np.testing.assert_allclose(np.diag(a), float(weights.diagonal), rtol=1e-13)
    np.testing.assert_allclose(a[~np.eye(n, dtype=bool)], float(weights.off_diagonal), rtol=1e-13)


@pytest.mark.parametrize("n, rho, gamma", CASES)
def test_one_layer_is_attnflows_pre_ln_layer(n, rho, gamma):
    beta = th.long_context_beta(gamma, n)
    field = af.SelfAttention(beta)
    x = tokens(n, rho)
    # The model of Thm 7: the attention output of normalised tokens, normalised.
    alone = off_diagonal(field.attention_output(x))
    assert float(th.pre_ln_equiangular_map(rho, beta=beta, n=n)) == pytest.approx(alone, abs=1e-13)
    # attnflow's PreLN layer z ← z + h·g(z/|z|), read as tokens z/|z|.
    for h in (0.1, 1.0):
        z1 = af.PreLN().layers(af.AttentionSublayer(field), x, 1, h)[1]
        got = float(th.pre_ln_equiangular_map(rho, beta=beta, n=n, step=h))
        assert got == pytest.approx(off_diagonal(z1), abs=1e-13)


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.8])
def test_three_limits_at_huge_n(rho):
    critical = 1 / (1 - rho)
    for gamma, alone in (
        (0.5 * critical, 1.0),
        (critical, 4 * rho / (1 + 3 * rho)),
        (2 * critical, rho),
    ):
        beta = th.long_context_beta(gamma, HUGE)
        assert float(th.pre_ln_equiangular_map(rho, beta=beta, n=HUGE)) == pytest.approx(
            alone, abs=1e-12
        )
        assert float(th.long_context_limit(rho, gamma=gamma)) == pytest.approx(alone, abs=1e-15)
        for h in (0.5, 1.0, 3.0):
            finite = float(th.pre_ln_equiangular_map(rho, beta=beta, n=HUGE, step=h))
            assert finite == pytest.approx(
                float(th.long_context_limit(rho, gamma=gamma, step=h)), abs=1e-12
            )
    # Residual limits for h → ∞ are the limits without residual.
    np.testing.assert_allclose(
        th.long_context_limit(rho, gamma=jnp.array([0.5, 1.0, 2.0]) * critical, step=1e9),
        th.long_context_limit(rho, gamma=jnp.array([0.5, 1.0, 2.0]) * critical),
        atol=1e-8,
    )


def test_attention_regimes_at_huge_n():
    # A_ij ~ 1/n below the threshold (½·1/n at it) and ~ n^{−γ(1−ρ)} above; A_ii → 0, ½, 1.
    n = 10**150  # A_ij ~ n^{-3/2} must stay above the smallest float
    rho, log_n = 0.5, math.log(n)  # threshold γ = 2
    for gamma, exponent, limit, diagonal in (
        (1.0, 1.0, 1.0, 0.0),
        (2.0, 1.0, 0.5, 0.5),
        (3.0, 1.5, 1.0, 1.0),
    ):
        w = th.equiangular_attention_weights(rho, beta=th.long_context_beta(gamma, n), n=n)
        scaled = math.exp(math.log(float(w.off_diagonal)) + exponent * log_n)
        assert scaled == pytest.approx(limit, rel=1e-10), gamma
        assert float(w.diagonal) == pytest.approx(diagonal, abs=1e-70), gamma


def test_convergence_in_n_is_slow_above_the_threshold():
    # κ = 1.1: the finite-n value differs from the limit ρ by ~n^{−0.1}: still 0.03 at n = 10^4
    # (so tests at small n check the finite-n formula, as above, not the limit).
    rho, gamma = 0.5, 2.2
    gaps = [
        float(th.pre_ln_equiangular_map(rho, beta=th.long_context_beta(gamma, n), n=n)) - rho
        for n in (10**4, 10**8, 10**40)
    ]
    assert gaps[0] > 0.03 and gaps[1] > 0.003 and gaps[2] < 1e-3
    assert gaps[0] > gaps[1] > gaps[2] > 0


def test_repeated_layers_against_attnflow():
    n, rho0, gamma, layers = 5, 0.3, 1.2, 6
    beta = th.long_context_beta(gamma, n)
    field = af.SelfAttention(beta)
    x0 = tokens(n, rho0)
    # Pre-LN with residual: the stream's tokens and radii.
    zs = af.layers(field, x0, layers, 0.5, scheme="pre-LN")
    out = th.pre_ln_equiangular_layers(rho0, layers, beta=beta, n=n, step=0.5)
    np.testing.assert_allclose(out.inner_products, [off_diagonal(z) for z in zs], atol=1e-13)
    np.testing.assert_allclose(out.radii, np.linalg.norm(np.asarray(zs)[:, 0], axis=-1), rtol=1e-13)
    # Attention output alone, renormalised each layer.
    xs = af.iterate_layers(lambda t, x: af.normalize(field.attention_output(x)), x0, layers, 1.0)
    alone = th.pre_ln_equiangular_layers(rho0, layers, beta=beta, n=n)
    np.testing.assert_allclose(alone.inner_products, [off_diagonal(x) for x in xs], atol=1e-13)
    steps = np.diff(np.asarray(alone.inner_products))
    assert np.all(steps[:3] > 0) and np.all(steps >= 0)  # every layer contracts, up to ρ = 1


def test_repeated_layers_freeze_below_and_collapse_above_the_critical_inner_product():
    beta = th.long_context_beta(2.0, HUGE)  # ρ_c = 1 − 1/γ = 0.5
    frozen = th.pre_ln_equiangular_layers(0.3, 20, beta=beta, n=HUGE).inner_products
    np.testing.assert_allclose(frozen, 0.3, atol=1e-12)
    at = th.pre_ln_equiangular_layers(0.5, 3, beta=beta, n=HUGE).inner_products
    np.testing.assert_allclose(at, [0.5, 0.8, 1.0, 1.0], atol=1e-12)
    above = th.pre_ln_equiangular_layers(0.6, 2, beta=beta, n=HUGE).inner_products
    np.testing.assert_allclose(above, [0.6, 1.0, 1.0], atol=1e-12)
    # At finite n every configuration collapses: n = 64, γ = 2, ρ₀ = 0.3 creeps up to ρ_c and
    # then collapses within a few layers.
    small = np.asarray(
        th.pre_ln_equiangular_layers(
            0.3, 60, beta=th.long_context_beta(2.0, 64), n=64
        ).inner_products
    )
    assert np.all(np.diff(small) >= 0) and small[-1] > 1 - 1e-6
    crossing = int(np.argmax(small > 0.5))
    assert small[crossing + 3] > 0.999
