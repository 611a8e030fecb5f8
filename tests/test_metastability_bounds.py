"""The metastability theorem's bounds (arXiv:2410.06833v1, §2) against independent computations:
α by sampling the caps, the hypotheses on hand-built data, the within-cap inequality with NumPy
fields, and simulations of (SA) and (USA) with ``attnflow.solve`` (cap containment up to the T₂
bound, within-cap collapse from the T₁ bound on, and the exponent of the escape and merge times).
"""

import math

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import attnflow as af
from attnflow.theory import metastability_bounds


def on_circle(angles):
    angles = np.asarray(angles, dtype=float)
    return np.stack([np.cos(angles), np.sin(angles)], axis=-1)


def unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def in_cap(rng, centre, epsilon, size, *, boundary=False):
    """Points x with ⟨x, w⟩ ≥ 1 − ε (on the boundary circle when ``boundary``) around a unit w."""
    radius = 2 * math.asin(math.sqrt(epsilon / 2))  # cos radius = 1 − ε
    tangent = rng.normal(size=(size, centre.shape[0]))
    tangent = unit(tangent - np.outer(tangent @ centre, centre))
    angle = np.full(size, radius) if boundary else radius * np.sqrt(rng.uniform(size=size))
    return np.cos(angle)[:, None] * centre + np.sin(angle)[:, None] * tangent


# ------------------------------------------------------------------------------ closed forms


@pytest.mark.parametrize("d", [2, 3])
def test_alpha_against_sampled_caps(d):
    # α = max ⟨x, y⟩ over x ∈ S_i(2ε), y ∈ S_j(2ε), i ≠ j: no sample exceeds the closed form, and
    # samples on the boundary circles come within 1e-3 of it.
    rng = np.random.default_rng(d)
    for trial in range(4):
        centres = unit(rng.normal(size=(3, d)))
        epsilon = [0.002, 0.01, 0.03, 0.06][trial]
        alpha = metastability_bounds(centres, centres, epsilon, 2.0).alpha
        best = -1.0
        for boundary in (False, True):
            caps = [in_cap(rng, w, 2 * epsilon, 1500, boundary=boundary) for w in centres]
            for i in range(3):
                for j in range(i + 1, 3):
                    best = max(best, float(np.max(caps[i] @ caps[j].T)))
        assert best <= alpha + 1e-12
        assert best >= alpha - 1e-3, (alpha, best)


def test_alpha_hand_computed_and_overlapping_caps():
    epsilon = 0.01
    r = math.acos(1 - 2 * epsilon)
    centres = on_circle([0.0, 1.5, 3.5])  # closest pair 1.5 apart (3.5 − 1.5 = 2, 2π − 3.5 ≈ 2.78)
    b = metastability_bounds(centres, centres, epsilon, 30.0)
    assert b.alpha == pytest.approx(math.cos(1.5 - 2 * r), abs=1e-12)
    # caps S(2ε) that meet: α = 1 and nothing is separated
    b = metastability_bounds(on_circle([0.0, 0.3]), on_circle([0.0, 0.3]), 0.03, 1e4)
    assert b.alpha == 1.0 and not b.separated and b.lam_max == 0.0 and math.isnan(b.lam)
    # one cap: no cross-cap inner product, α = −1 by convention
    b = metastability_bounds(on_circle([0.05, -0.05]), on_circle([0.0]), 0.01, 10.0)
    assert b.alpha == -1.0 and b.separated


def test_separation_detection_on_hand_built_data():
    epsilon, beta = 0.01, 40.0
    centres = on_circle([0.0, 2.0])
    inside = math.acos(1 - 0.999 * epsilon)  # ⟨x, w⟩ = 1 − 0.999ε
    outside = math.acos(1 - 1.001 * epsilon)
    x0 = on_circle([inside, -inside, 2.0, 2.0 + inside])
    b = metastability_bounds(x0, centres, epsilon, beta)
    assert b.in_caps and b.separated and b.cap.tolist() == [0, 0, 1, 1]
    r = 2 * math.asin(math.sqrt(epsilon))
    alpha = math.cos(2.0 - 2 * r)
    gamma = 1 - alpha - 8 * epsilon - math.log(2 * 16 / epsilon) / beta
    assert b.gamma == pytest.approx(gamma, rel=1e-12)
    first = (beta - 1) * epsilon / (beta**2 * 16 * math.e) * math.exp((1 - alpha) * beta)
    first *= 1 - math.exp(-gamma * beta)
    second = 1 - alpha - 8 * epsilon - math.log(32 / (1 - 8 * epsilon)) / beta
    assert b.lam_max == pytest.approx(min(first, second), rel=1e-12)
    assert b.lam == pytest.approx(0.9 * b.lam_max) and b.lam_admissible
    assert b.t2_lower == pytest.approx(epsilon / 4 * math.exp((1 - alpha) * beta), rel=1e-12)
    t1 = 8 * math.exp(8 * epsilon * beta) + math.e * 4 * b.lam * beta**2 / (beta - 1)
    assert b.t1_upper == pytest.approx(t1, rel=1e-12) and b.t1_upper < b.t2_lower
    assert b.diameter_bound == pytest.approx(2 * math.exp(-b.lam * beta))
    # one token just outside its cap
    b = metastability_bounds(on_circle([outside, 0.0, 2.0, 2.0]), centres, epsilon, beta)
    assert b.cap.tolist() == [-1, 0, 1, 1] and not b.in_caps and not b.separated
    # β too small: γ < 0, the theorem does not apply
    b = metastability_bounds(x0, centres, epsilon, 5.0)
    assert b.in_caps and b.gamma < 0 and not b.separated and not b.lam_admissible
    # λ beyond the range; USA's clock
    b = metastability_bounds(x0, centres, epsilon, beta, lam=10.0)
    assert not b.lam_admissible and b.diameter_bound == pytest.approx(2 * math.exp(-10 * beta))
    usa = metastability_bounds(x0, centres, epsilon, beta, normalization="n")
    sa = metastability_bounds(x0, centres, epsilon, beta)
    assert usa.t2_lower == pytest.approx(sa.t2_lower * math.exp(-beta), rel=1e-12)
    assert usa.t1_upper == pytest.approx(sa.t1_upper * math.exp(-beta), rel=1e-12)
    # huge β: the scale overflows to inf, the rest stays finite
    b = metastability_bounds(x0, centres, epsilon, 5000.0)
    assert b.metastable_scale == math.inf and b.t2_lower == math.inf and b.separated


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(epsilon=0.07), "epsilon"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(beta=1.0), "beta"),
        (dict(lam=-0.1), "lam"),
        (dict(normalization="usa"), "normalization"),
        (dict(centres=np.eye(3)[:2]), "centres"),
        (dict(centres=2 * on_circle([0.0])), "centres"),
        (dict(x0=np.ones((2, 2))), "x0"),
    ],
)
def test_bad_input_raises(kwargs, match):
    args = dict(x0=on_circle([0.0, 0.01]), centres=on_circle([0.0]), epsilon=0.01, beta=10.0)
    with pytest.raises(ValueError, match=match):
        metastability_bounds(**{**args, **kwargs})


# ------------------------------------------------------------------------------ simulations


def numpy_field(x, beta, normalization):
    """(SA), or (USA) in the paper's form (weights e^{β(⟨x_i, x_j⟩ − 1)}/n), with NumPy."""
    logits = beta * (x @ x.T - 1)
    weights = np.exp(logits)
    if normalization == "softmax":
        weights /= weights.sum(axis=1, keepdims=True)
    else:
        weights /= x.shape[0]
    v = weights @ x
    return v - np.sum(v * x, axis=1, keepdims=True) * x


# Three caps on S² around orthogonal centres, three tokens each (n = 9), ε = 0.01, β = 28:
# α = cos(π/2 − 2r) ≈ 0.39, γ ≈ 0.18 > 0, t1_upper ≈ 3.9e2 < t2_lower ≈ 2.9e4.
EPSILON, BETA = 0.01, 28.0
CENTRES = np.eye(3)


@pytest.fixture(scope="module")
def three_caps():
    rng = np.random.default_rng(7)
    x0 = np.concatenate([in_cap(rng, w, EPSILON, 3) for w in CENTRES])
    runs = {}
    for normalization in ("softmax", "n"):
        b = metastability_bounds(x0, CENTRES, EPSILON, BETA, normalization=normalization)
        ts = np.unique(
            np.concatenate(
                [
                    [0.0],
                    np.geomspace(1e-3, 30, 60) * b.time_unit,  # the collapse
                    np.geomspace(1e-3, 1, 100) * b.t2_lower,
                    [b.t1_upper, b.t2_lower],
                ]
            )
        )
        # β as an array: one program for any β; the paper's USA is attnflow's slowed by e^{−β}
        field = af.SelfAttention(jnp.asarray(BETA), normalization=normalization)
        sol = af.solve(field, jnp.asarray(x0), b.t2_lower, ts=jnp.asarray(ts), max_steps=1 << 16)
        runs[normalization] = (b, ts, np.asarray(sol.ys))
    return x0, runs


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_tokens_stay_in_their_caps_up_to_the_t2_bound(three_caps, normalization):
    x0, runs = three_caps
    b, ts, ys = runs[normalization]
    assert b.separated and b.lam_admissible and b.cap.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert b.lam > b.lam_star  # the diameter bound says more than the geometry of the caps
    deviation = 1 - np.einsum("tnd,nd->tn", ys, CENTRES[b.cap])
    assert np.all(deviation <= 2 * EPSILON)
    # loose: the caps never come near their 2ε boundary before t2_lower
    assert deviation.max() <= 1.0 * EPSILON


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_caps_collapse_below_the_diameter_bound_from_the_t1_bound_on(three_caps, normalization):
    x0, runs = three_caps
    b, ts, ys = runs[normalization]
    gram = np.einsum("tnd,tmd->tnm", ys, ys)
    same = b.cap[:, None] == b.cap[None, :]
    diameter = np.max(np.where(same, 2 - 2 * gram, 0.0), axis=(1, 2))
    window = (ts >= b.t1_upper) & (ts <= b.t2_lower)
    assert window.sum() > 20 and np.all(diameter[window] <= b.diameter_bound)
    # the observed T₁ (first saved time below the bound) is well before the bound on it
    observed = ts[np.argmax(diameter <= b.diameter_bound)]
    assert 0 < observed < b.t1_upper / 5, (observed, b.t1_upper)


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_within_cap_inequality_along_the_flow(three_caps, normalization):
    # lem: collapsetime: ρ̇_q ≥ (2/n) ρ(1 − ρ) e^{β(ρ − 1)} − 2n e^{−(1−α)β} for the pair that
    # realises ρ_q = min ⟨x_i, x_j⟩ in cap q, with (SA) in its time and (USA) in the paper's form.
    x0, runs = three_caps
    b, ts, ys = runs[normalization]
    n = len(x0)
    # the clocks: attnflow's SA is the paper's (SA); attnflow's USA is e^β times the paper's
    field = af.SelfAttention(BETA, normalization=normalization)
    np.testing.assert_allclose(
        np.asarray(field(0.0, jnp.asarray(x0), None)) * b.time_unit,
        numpy_field(x0, BETA, normalization),
        rtol=1e-12,
        atol=1e-15,
    )
    checked = 0
    for x in ys[ts <= b.t1_upper]:
        v = numpy_field(x, BETA, normalization)
        gram = x @ x.T
        for q in range(3):
            idx = np.flatnonzero(b.cap == q)
            block = gram[np.ix_(idx, idx)]
            i, j = np.unravel_index(np.argmin(block), block.shape)
            i, j = idx[i], idx[j]
            rho = gram[i, j]
            if rho > 1 - 1e-9:
                continue  # collapsed to rounding
            rate = v[i] @ x[j] + x[i] @ v[j]
            floor = 2 / n * rho * (1 - rho) * math.exp(BETA * (rho - 1))
            floor -= 2 * n * math.exp(-(1 - b.alpha) * BETA)
            assert rate >= floor
            checked += 1
    assert checked > 30


class _CapEvent(eqx.Module):
    """Escape: min_i ⟨x_i, w_{q(i)}⟩ − (1 − 2ε) falls through 0. Merge: the cosine of the angle
    between the two clusters' mean directions rises through cos(θ/2). Array fields, so that one
    compiled solve serves both conditions and every β."""

    centres: jnp.ndarray  # (n, d): each token's cap centre
    escape: jnp.ndarray  # 1.0: escape condition, 0.0: merge condition
    level: jnp.ndarray

    def __call__(self, t, y, args, **kwargs):
        x = y / jnp.linalg.norm(y, axis=1, keepdims=True)
        escape = jnp.min(jnp.sum(x * self.centres, axis=1)) - self.level
        half = x.shape[0] // 2
        a, b = jnp.sum(x[:half], axis=0), jnp.sum(x[half:], axis=0)
        merge = self.level - a @ b / (jnp.linalg.norm(a) * jnp.linalg.norm(b))
        return self.escape * escape + (1 - self.escape) * merge


def two_cluster_time(beta, start, end):
    """Time for two point clusters of equal mass under (SA) to go from gap ``start`` to ``end``:
    a token sees the other cluster with weight w = 1/(1 + e^{β(1 − cos u)}), so u̇ = −2w sin u."""
    u = np.linspace(end, start, 20001)
    rate = 2 * np.sin(u) / (1 + np.exp(beta * (1 - np.cos(u))))
    return float(np.trapezoid(1 / rate, u))


def test_escape_and_merge_times_grow_like_the_metastable_exponent():
    # Two caps on S¹ at angle θ = 2.1, two tokens each, ε = 3e-3, β where the data are
    # separated (γ = 0.04 … 0.25). Measured (float64, stopped at the end of the step that
    # crosses, steps ≈ 3 time units): escape from S_q(2ε) at 5.1e3, 1.0e4, 2.1e4, 4.4e4
    # (380–460 × t2_lower); merge (gap θ/2) at 6.3e3 … 5.1e4. Slope of log T against β: 1.43
    # (escape), 1.39 (merge); of log(βT): 1.56, 1.51. The theorem's exponent is 1 − α = 1.305;
    # two point clusters at angle θ have 1 − cos θ = 1.505, with the Laplace prefactor
    # T ≈ e^{β(1 − cos θ)}/(2β sin²θ) (hence log(βT)). So the theorem's exponent is a lower
    # bound, 0.2 below the measured one at this ε (α → cos θ as ε → 0).
    theta, epsilon = 2.1, 3e-3
    offset = 0.8 * 2 * math.asin(math.sqrt(epsilon / 2))  # inside S(ε)
    x0 = jnp.asarray(on_circle([-offset, offset, theta - offset, theta + offset]))
    centres = on_circle([0.0, theta])
    radius = 2 * math.asin(math.sqrt(epsilon))  # of S(2ε)
    betas = np.array([7.5, 8.0, 8.5, 9.0])
    times = {"escape": [], "merge": []}
    for beta in betas:
        b = metastability_bounds(x0, centres, epsilon, beta)
        assert b.separated and b.cap.tolist() == [0, 0, 1, 1]
        for name, flag, level, end in (
            ("escape", 1.0, 1 - 2 * epsilon, theta - 2 * radius),
            ("merge", 0.0, math.cos(theta / 2), theta / 2),
        ):
            condition = _CapEvent(
                jnp.asarray(centres[b.cap]), jnp.asarray(flag), jnp.asarray(level)
            )
            sol = af.solve(
                af.SelfAttention(jnp.asarray(beta)),
                x0,
                1e8,
                event=diffrax.Event(condition),  # no root finder: a third of the compile time
                max_steps=1 << 21,
            )
            assert sol.result == diffrax.RESULTS.event_occurred
            times[name].append(float(sol.ts[-1]))
            # the two-cluster reduction, after the O(1) collapse inside each cap
            assert times[name][-1] == pytest.approx(two_cluster_time(beta, theta, end), rel=0.01)
        # the theorem's T₂ bound holds, with a wide margin
        assert times["escape"][-1] >= 300 * b.t2_lower
    exact = 1 - math.cos(theta)
    for name, values in times.items():
        values = np.array(values)
        raw = np.polyfit(betas, np.log(values), 1)[0]
        corrected = np.polyfit(betas, np.log(betas * values), 1)[0]
        assert 1 - b.alpha < raw < corrected, (name, raw, 1 - b.alpha)
        if name == "merge":
            assert corrected == pytest.approx(exact, abs=0.03), corrected
    assert np.all(np.array(times["escape"]) < np.array(times["merge"]))
