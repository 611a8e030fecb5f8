"""The pairing phase (Thm 6, eq. (6) of arXiv:2512.01868): K point clusters with masses, the
closest pair's merge measured on the full flow against the two-body integral (mpmath, typed
here) and against the time scales of the pairing phase (models/_pairing.py)."""

import math

import jax.numpy as jnp
import mpmath as mp
import pytest

import attnflow as af

ANGLES = jnp.array([0.0, 0.6, 2.2])
MASSES = jnp.array([0.5, 0.3, 0.2])
THETA0, A_I, A_J = 0.6, 0.5, 0.3


def circle(angles):
    return jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=-1)


def two_body_time(beta, normalization, merge_angle=1e-3):
    """∫ dθ/|θ'| from merge_angle to θ₀ for the pair alone (mpmath, 30 digits)."""
    with mp.workdps(30):
        b, ai, aj = mp.mpf(beta), mp.mpf(A_I), mp.mpf(A_J)

        def speed(u):
            e = mp.e ** (b * mp.cos(u))
            if normalization == "n":
                return (ai + aj) * e * mp.sin(u)
            return mp.sin(u) * e * (aj / (ai * mp.e**b + aj * e) + ai / (aj * mp.e**b + ai * e))

        th = mp.mpf(THETA0)
        nodes = [mp.mpf(merge_angle), th / 4, th / 2, th * (1 - 4 / b), th * (1 - 1 / b), th]
        return float(mp.quad(lambda u: 1 / speed(u), nodes))


@pytest.mark.parametrize("normalization, tau", [("n", 1.2627), ("softmax", 1.3602)])
def test_closest_pair_merges_as_the_two_body_flow(normalization, tau):
    beta = 40.0
    out = af.models.pairing_phase(circle(ANGLES), MASSES, beta, normalization=normalization)
    assert out.pair.tolist() == [0, 1]
    assert float(out.initial_angle) == pytest.approx(THETA0, rel=1e-14)
    # The third cluster is frozen and the merge is the two-body merge (its influence is
    # e^{−β(cos 0.6 − cos 1.6)} ≈ e^{−34} relatively).
    assert float(out.other_displacement) < 1e-12
    assert float(out.merge_time) == pytest.approx(two_body_time(beta, normalization), rel=1e-7)
    # τ = t/(T_pair/(β sin²θ₀)) → 1 as β → ∞; at β = 40 the measured values are 1.26 (USA) and
    # 1.36 (SA), as the 1/β expansion says (below).
    assert float(out.rescaled_merge_time) == pytest.approx(tau, abs=1e-3)
    # In the clock of the pair's initial rate (τ' = t/T_pair) the merge happens at
    # τ' = τ/(β sin²θ₀) ≈ 0.1, where the frozen-rate limit ODE dθ/dτ' = −sin θ (which never
    # merges) has moved the pair by less than 10 %.
    assert float(out.frozen_clock_merge_time) == pytest.approx(
        tau / (beta * math.sin(THETA0) ** 2), rel=1e-3
    )
    assert float(out.frozen_limit_angle) > 0.9 * THETA0


def test_rescaled_merge_time_tends_to_one_like_one_over_beta():
    # The two-body integral in the τ clock: τ = 1 + 2 cos θ₀/(β sin²θ₀) + O(1/β²) (USA; the
    # first-order term from expanding cos θ and 1/sin θ at θ₀, derived in models/_pairing.py's
    # setting). Measured: β(τ − 1) → 2cos θ₀/sin²θ₀ = 5.18.
    first_order = 2 * math.cos(THETA0) / math.sin(THETA0) ** 2
    errors = []
    for beta in (80, 320, 1280):
        with mp.workdps(30):
            th = mp.mpf(THETA0)
            # (α_i + α_j) e^{β cos θ₀} · β sin²θ₀ · ∫ dθ/|θ'|, without under/overflow.
            integrand = lambda u, b=beta, t=th: mp.e ** (b * (mp.cos(t) - mp.cos(u))) / mp.sin(u)  # noqa: E731
            nodes = [mp.mpf("1e-3"), th / 2, th * (1 - mp.mpf(4) / beta), th]
            tau = float(beta * mp.sin(th) ** 2 * mp.quad(integrand, nodes))
        errors.append(abs(beta * (tau - 1) - first_order))
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.05


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="masses"):
        af.models.pairing_phase(circle(ANGLES), jnp.array([0.5, 0.5, 0.0]), 10.0)
    with pytest.raises(ValueError, match="centers"):
        af.models.pairing_phase(circle(jnp.array([0.0, 0.0, 1.0])), MASSES, 10.0)
    with pytest.raises(ValueError, match="beta"):
        af.models.pairing_phase(circle(ANGLES), MASSES, 0.0)
