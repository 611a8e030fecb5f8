"""The staircase theorem's objects (arXiv:2410.06833v1, §6) against independent computations:
the closed-form pair lemma, a scipy solve of (USA) in physical time with the time change as a
quadrature, the package's InteractionEnergy, and hand-computed cases."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import attnflow as af
from attnflow import models, theory

BETAS = (50.0, 200.0, 1000.0)
# Well-prepared for these β (Definition "init_s1": each gap exceeds the distance to θ_1).
THETA0 = 0.4 * np.array([0.0, 1.0, 3.0, 7.0])


@pytest.fixture(scope="module")
def runs():
    return {beta: models.modified_usa(THETA0, beta) for beta in BETAS}


@pytest.mark.parametrize("beta", BETAS)
def test_two_particles_follow_the_pair_lemma_exactly(beta):
    # n = 2: u̇ = −(1/2) log β sin u with no remainder c(β), so the merge time is closed form.
    run = models.modified_usa(np.array([0.0, 0.4]), beta)
    (merge,) = run.merges
    expected = theory.pair_merge_time(0.4, beta, 0.5)
    assert merge.time == pytest.approx(expected, rel=1e-7)
    # The lemma's centre is 1/(2c) = 1 (within O(log log β / log β)), not the printed 2/c = 4.
    slack = (abs(math.log(math.tan(0.2))) + math.log(2) + 0.5 * math.log(math.log(beta))) / (
        0.5 * math.log(beta)
    )
    assert abs(merge.time - 1.0) <= slack + 1e-6
    assert abs(merge.time - 1.0) < abs(merge.time - 4.0)


def test_time_change_against_physical_usa():
    # (USA) of the printed energy in physical time τ (θ̇ = e^{−β}/n · circle_field, checked at
    # t = 0 against attnflow.landscape.circle_field), with the new clock
    # dt/dτ = 1/(log β e^{β(1 − cos u)}) as a quadrature, until the closest pair reaches
    # 1/√(β log β): scipy Radau.
    beta, n = 20.0, len(THETA0)
    radius = theory.collision_radius(beta)

    def usa(theta):
        diff = theta[None, :] - theta[:, None]  # θ_j − θ_i
        return np.sum(np.exp(beta * (np.cos(diff) - 1)) * np.sin(diff), axis=1) / n**2

    field = np.asarray(af.landscape.circle_field(THETA0, beta, normalization="n"))
    np.testing.assert_allclose(usa(THETA0), math.exp(-beta) / n * field, rtol=1e-12)

    def closest(theta):
        diff = np.abs(np.angle(np.exp(1j * (theta[:, None] - theta[None, :]))))
        return diff[np.triu_indices(n, 1)].min()

    def rhs(tau, y):
        theta = y[:n]
        rate = math.log(beta) * math.exp(beta * (1 - math.cos(closest(theta))))
        return np.concatenate([usa(theta), [1 / rate]])

    def hit(tau, y):
        return closest(y[:n]) - radius

    hit.terminal = True
    sol = solve_ivp(
        rhs,
        (0, 1e6),
        np.concatenate([THETA0, [0.0]]),
        method="Radau",
        events=hit,
        rtol=1e-11,
        atol=1e-13,
    )
    t_merge = sol.y_events[0][0][n]
    run = models.modified_usa(THETA0, beta)
    first = run.merges[0]
    assert first.time == pytest.approx(t_merge, rel=1e-6)
    assert first.tokens == [0, 1]
    before = run.theta[np.searchsorted(run.time, first.time) - 1]
    np.testing.assert_allclose(before[1:], sol.y_events[0][0][1:n], atol=1e-5)


@pytest.mark.parametrize("beta", BETAS)
def test_merge_times_match_the_plateau_prediction(runs, beta):
    assert theory.well_prepared_constant(THETA0, beta) > 1
    run, plateaus = runs[beta], theory.staircase_plateaus(THETA0, beta)
    assert run.finished
    assert [m.tokens for m in run.merges] == plateaus.tokens.tolist()
    np.testing.assert_allclose([m.time for m in run.merges], plateaus.times, rtol=2e-6)
    np.testing.assert_allclose(plateaus.limit_times, [4.0, 6.25, 7.25])


def test_plateau_levels_and_energy_normalisation(runs):
    levels = theory.staircase_plateaus(THETA0, 1000.0).levels
    np.testing.assert_allclose(levels, [4 / 16, 6 / 16, 10 / 16, 1.0])
    gaps = []
    for beta in BETAS:
        run = runs[beta]
        # Right after each merge the glued cluster is one point: φ = Σ m_q² up to the cross
        # terms of the clusters still apart (e^{−β(1 − cos u)}, u ≥ 0.6 here).
        after = [m.energy_after for m in run.merges]
        np.testing.assert_allclose(after, levels[1:], atol=5e-3 if beta == 50 else 1e-8)
        # φ = 2β E_β (GKPR's E_β) = 2β e^{−β} InteractionEnergy(β) with weights 1/n.
        i = len(run.time) // 3
        x = np.stack([np.cos(run.theta[i]), np.sin(run.theta[i])], axis=-1)
        phi = 2 * beta * float(af.InteractionEnergy(beta).scaled(x, None, beta))
        assert phi == pytest.approx(run.energy[i], rel=1e-12)
        # Halfway along the first simulated plateau φ approaches Σ m_q² = 1/4 as β grows.
        t = 0.5 * run.merges[0].time
        gaps.append(np.interp(t, run.time, run.energy) - levels[0])
    assert gaps[0] > gaps[1] > gaps[2] > 0 and gaps[2] < 0.02


def test_hand_computed_cases():
    assert theory.collision_radius(math.e**2) == pytest.approx(1 / math.sqrt(2 * math.e**2))
    theta = np.array([0.0, 0.4, 1.2])
    expected = math.log(math.log(100.0)) + 100 * (1 - math.cos(0.4))
    assert theory.staircase_log_time_change(theta, 100.0) == pytest.approx(expected)
    # Pairs inside the collision radius do not set the clock; with none farther, it stops.
    assert theory.staircase_log_time_change(np.array([0.0, 1e-3, 0.5]), 100.0) == pytest.approx(
        math.log(math.log(100.0)) + 100 * (1 - math.cos(0.5 - 1e-3))
    )
    assert theory.staircase_log_time_change(np.array([0.0, 1e-3]), 100.0) == -math.inf
    assert theory.well_prepared_constant(np.array([0.0, 1.0, 0.5]), 10.0) == -math.inf
    assert theory.well_prepared_constant(np.array([0.0, 1.0]), 10.0) == math.inf
    # u from 2 arctan(e^{-1}) to 2 arctan(e^{-3}) at rate c log β: (3 − 1)/(c log β).
    u0, u1 = 2 * math.atan(math.exp(-1)), 2 * math.atan(math.exp(-3))
    assert theory.pair_merge_time(u0, math.e, 0.25, threshold=u1) == pytest.approx(8.0)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: models.modified_usa(np.zeros(1), 10.0), "theta0: expected angles"),
        (lambda: models.modified_usa(np.array([0.0, np.nan]), 10.0), "theta0: expected finite"),
        (lambda: models.modified_usa(np.array([0.0, 1.0]), 1.0), "beta: expected"),
        (lambda: models.modified_usa(np.array([0.0, 1.0]), 10.0, t_max=0.0), "t_max"),
        (lambda: theory.pair_merge_time(4.0, 10.0, 1.0), "gap"),
        (lambda: theory.pair_merge_time(0.5, 10.0, -1.0), "c: expected"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
