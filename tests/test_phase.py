"""phase_diagram: against per-system scipy solves, the closed-form curve Γ_∞,δ, the unreduced
simulation in R^d, and sampling checks of the Bartlett factor and the Fig. 5 ensembles."""

import functools

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import sa_field_numpy
from scipy.integrate import solve_ivp
from scipy.stats import ks_2samp

import attnflow as af
import attnflow.theory as th
from attnflow._phase._coordinates import Coordinates
from attnflow._phase._distance import Distance
from attnflow._phase._log_distance import LOG_ZERO, LogDistance

TS = np.linspace(0.0, 16.0, 9)
SMALL = dict(chunk_size=4, beta_block=2)  # one compiled shape shared by most tests
# The engine compiles its call once per device it runs on (conftest: four CPU devices), and the
# calls go round-robin over the devices: a grid that fits in one call compiles once.
# Eight realisations: calls of 5 (the second padded) × 2 β, a queue of 4 slots, shared by the
# layout tests and the other tests of 8 realisations in float64.
LAYOUT = dict(chunk_size=5, beta_block=2, slots=4)
ONE_CALL = dict(chunk_size=8, beta_block=2)  # 8 realisations × 2 β in one call (float32 tests)


def scipy_fraction(x0, beta, ts, normalization="softmax", Q=None, K=None, V=None, delta=1e-3):
    """Clustered fraction along an independent scipy solve of one system (float64)."""
    n, d = x0.shape

    def rhs(t, y):
        z = y.reshape(n, d)
        z = z / np.linalg.norm(z, axis=1, keepdims=True)
        return sa_field_numpy(z, beta, Q, K, V, normalization).ravel()

    sol = solve_ivp(
        rhs, (0, ts[-1]), np.asarray(x0).ravel(), t_eval=ts, rtol=1e-11, atol=1e-13, method="DOP853"
    )
    xs = sol.y.T.reshape(-1, n, d)
    xs /= np.linalg.norm(xs, axis=2, keepdims=True)
    close = np.einsum("tid,tjd->tij", xs, xs) >= 1 - delta
    return close[:, ~np.eye(n, dtype=bool)].mean(axis=1)


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_state_forms_against_the_token_flow(normalization):
    """Each form's rate and clustered test against the (SA)/(USA) flow of the tokens in NumPy:
    Ḋ_ij = −(⟨ẋ_i, x_j⟩ + ⟨x_i, ẋ_j⟩), L̇_ij = Ḋ_ij / D_ij."""
    n, d, beta, delta = 5, 4, 1.5, 1e-2
    x = np.array(af.random_tokens(jr.key(11), n, d))
    # Pairs (0, 1) just inside the threshold, (2, 3) just outside: ⟨x_i, x_j⟩ = 1 − δ ± δ/4.
    for i, j, gap in ((0, 1, 0.75 * delta), (2, 3, 1.25 * delta)):
        w = x[j] - (x[j] @ x[i]) * x[i]
        x[j] = (1 - gap) * x[i] + np.sqrt(1 - (1 - gap) ** 2) * w / np.linalg.norm(w)
    dx = sa_field_numpy(x, beta, normalization=normalization)
    G = x @ x.T
    D = np.where(np.eye(n, dtype=bool), 0.0, 1 - G)
    dD = -(dx @ x.T + x @ dx.T)
    close = (G >= 1 - delta) | np.eye(n, dtype=bool)
    assert close[0, 1] and not close[2, 3]
    off = ~np.eye(n, dtype=bool)
    L = np.where(off, np.log(np.where(off, D, 1.0)), LOG_ZERO)
    b = jnp.asarray(beta)
    dist = Distance((n, n), normalization, jnp.asarray(delta))
    np.testing.assert_allclose(dist.rate(jnp.asarray(D), b, {}), dD, rtol=1e-13, atol=1e-13)
    logdist = LogDistance((n, n), normalization, jnp.asarray(delta), jnp.asarray(1e-12))
    dL = np.asarray(logdist.rate(jnp.asarray(L), b, {}))
    np.testing.assert_allclose(dL[off], dD[off] / D[off], rtol=1e-10)
    assert np.all(np.diagonal(dL) == 0)
    Q, K, V = np.asarray(jr.normal(jr.key(12), (3, d, d)))
    coords = Coordinates((n, d), normalization, jnp.asarray(delta), B=jnp.asarray(Q.T @ K))
    np.testing.assert_allclose(
        coords.rate(jnp.asarray(x), b, {"V": jnp.asarray(V)}),
        sa_field_numpy(x, beta, Q, K, V, normalization),
        rtol=1e-13,
        atol=1e-13,
    )
    plain = Coordinates((n, d), normalization, jnp.asarray(delta))
    np.testing.assert_allclose(plain.rate(jnp.asarray(x), b, {}), dx, rtol=1e-13, atol=1e-13)
    for form, state in ((dist, D), (logdist, L), (plain, x)):
        flat = jnp.asarray(state).reshape(1, -1)
        np.testing.assert_array_equal(form.clustered(flat), close.reshape(1, -1))


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_matches_independent_solves(normalization):
    x0 = af.random_tokens(jr.key(1), 6, 8, (4,))
    betas = [0.5, 4.0]
    P = np.asarray(
        af.phase_diagram_from_tokens(
            x0, betas=betas, ts=TS, rtol=1e-9, atol=1e-11, normalization=normalization, **SMALL
        )
    )
    ref = np.array(
        [
            np.mean([scipy_fraction(x, b, TS, normalization) for x in np.asarray(x0)], axis=0)
            for b in betas
        ]
    )
    # Exact up to a pair sitting on the threshold at a save time (one pair = 1/120).
    assert np.abs(P - ref).max() <= 1 / 120 + 1e-12
    assert P[0, 0] == 0 and P[0, -1] == 1


def test_many_save_times_per_step_and_coincident_tokens():
    """Saves in steps where pairs change status (interpolated) and where none does (held), on a
    grid with many save times per step; two coincident tokens (D_ij = 0, log D_ij = −inf at
    the start) stay one point and count as clustered throughout."""
    x0 = np.array(af.random_tokens(jr.key(7), 6, 8, (3,)))
    x0[0, 1] = x0[0, 0]
    ts = np.linspace(0.0, 16.0, 161)
    P = np.asarray(
        af.phase_diagram_from_tokens(x0, betas=[0.5, 4.0], ts=ts, rtol=1e-9, atol=1e-11, **SMALL)
    )
    ref = np.array([np.mean([scipy_fraction(x, b, ts) for x in x0], axis=0) for b in (0.5, 4.0)])
    assert np.isfinite(P).all()
    assert np.abs(P - ref).max() <= 1 / 90 + 1e-12  # one pair of one system (3 × 30 pairs)
    assert P[:, 0].min() >= 2 / 90  # the coincident pair, both orders, from t = 0


def test_log_and_plain_distance_forms_agree():
    """float32 with δ below the log form's floor (16 × 100 eps) runs in plain distances D."""
    x0 = af.bartlett_tokens(jr.key(8), 6, 64, (8,))
    kw = dict(betas=[0.5, 3.0], ts=TS, delta=1e-4)
    plain = af.phase_diagram_from_tokens(x0.astype(jnp.float32), **kw, **ONE_CALL)
    logarithmic = af.phase_diagram_from_tokens(x0, rtol=1e-8, atol=1e-10, **kw, **LAYOUT)
    assert np.abs(np.asarray(plain) - np.asarray(logarithmic)).max() <= 0.05
    assert float(plain[0, -1]) == 1.0 and float(plain[0, 0]) == 0.0


def test_span_reduction_matches_full_dimension():
    x0 = af.random_tokens(jr.key(2), 6, 8, (4,))
    kw = dict(betas=[1.0, 6.0], ts=TS, rtol=1e-9, atol=1e-11, **SMALL)
    gram = np.asarray(af.phase_diagram_from_tokens(x0, **kw))
    full = np.asarray(af.phase_diagram_from_tokens(x0, reduce=False, **kw))
    np.testing.assert_array_equal(gram, full)
    # V = I with a random bilinear form: min(n, d) coordinates and Uᵀ(QᵀK)U.
    Q, K = (jr.normal(k, (4, 8, 8)) / 8**0.5 + jnp.eye(8)[None] for k in jr.split(jr.key(3)))
    reduced = np.asarray(af.phase_diagram_from_tokens(x0, Q=Q, K=K, **kw))
    unreduced = np.asarray(af.phase_diagram_from_tokens(x0, Q=Q, K=K, reduce=False, **kw))
    np.testing.assert_array_equal(reduced, unreduced)
    assert not np.array_equal(reduced, gram)


def test_agrees_with_clustering_curve():
    """d ≫ n: P ≈ 1 well past t*(β), ≈ 0 well before it (Thm 6.9 with the curve (6.12))."""
    betas = np.array([0.5, 3.0])
    ts = np.linspace(0.0, 16.0, 9)
    P = np.asarray(
        af.phase_diagram(
            jr.key(4), n=6, d=256, betas=betas, ts=ts, realizations=8, progress=False, **LAYOUT
        )
    )
    t_star = np.asarray(th.clustering_time(betas, 6))
    below = ts[None, :] >= 1.25 * t_star[:, None]
    above = ts[None, :] <= 0.8 * t_star[:, None]
    assert below.sum() >= 4 and above.sum() >= 4
    assert np.all(P[below] >= 0.97) and np.all(P[above] <= 0.03)


# Three layouts of one grid (n = 6, d = 256, 3 β × 8 realisations, with statistics), each run once
# per module: the CPU preset as calls of 5 realisations × 2 β (both axes padded) on a queue of
# 4 slots with the counts summed on the host; the accelerator preset (every system in flight in
# one call, counts summed on the device); and the CPU preset's calls with the counts summed on
# the devices (backend "gpu"), which compiles nothing new.
LAYOUT_GRID = dict(n=6, d=256, betas=[0.5, 3.0, 7.0], ts=TS, realizations=8, progress=False)
LAYOUTS = {
    "cpu": dict(backend="cpu", **LAYOUT),
    "accelerator": dict(backend="accelerator"),
    "device sums": dict(backend="gpu", **LAYOUT),
}


@functools.cache
def _layout_result(layout):
    return af.phase_diagram_result(jr.key(5), **LAYOUT_GRID, **LAYOUTS[layout])


def test_deterministic_and_invariant_to_chunking():
    a = np.asarray(_layout_result("cpu").probability)
    # A different call shape: one call of 8 realisations × 3 β, every system in flight.
    np.testing.assert_array_equal(a, _layout_result("accelerator").probability)
    again = af.phase_diagram(jr.key(5), **LAYOUT_GRID, **LAYOUTS["cpu"])
    np.testing.assert_array_equal(a, np.asarray(again))
    other_key = af.phase_diagram(jr.key(6), **LAYOUT_GRID, **LAYOUTS["cpu"])
    assert not np.array_equal(a, np.asarray(other_key))


def test_accelerator_layout_gives_bitwise_the_cpu_results():
    """The accelerator preset (every system of a call in flight, counts summed on the device)
    forced on the CPU: the same float64 P and the same steps of every system as the CPU
    preset (as a queue of 4 slots over padded calls), also with its counts summed on the
    devices."""
    cpu = _layout_result("cpu")
    accelerator = _layout_result("accelerator")
    device_sums = _layout_result("device sums")
    assert accelerator.slot_steps != cpu.slot_steps  # the layouts do differ
    for other in (accelerator, device_sums):
        np.testing.assert_array_equal(other.probability, cpu.probability)
        np.testing.assert_array_equal(other.accepted, cpu.accepted)
        np.testing.assert_array_equal(other.rejected, cpu.rejected)
    assert cpu.accepted.shape == (3, 8) and int(cpu.accepted.min()) >= 1
    np.testing.assert_array_equal(cpu.evaluations, 6 * (cpu.accepted + cpu.rejected) + 1)


def test_bartlett_gram_has_the_uniform_distribution():
    """Inner products of Bartlett coordinates vs tokens drawn in R^d (two-sample KS)."""
    samples, n, d = 3000, 5, 4  # rows 0..3 carry χ_{d-i} diagonals, row 4 is a full Gaussian
    y = af.bartlett_tokens(jr.key(7), n, d, (samples,))
    x = af.random_tokens(jr.key(8), n, d, (samples,))
    assert y.shape == (samples, n, d)
    gy, gx = (np.asarray(z @ jnp.swapaxes(z, -1, -2)) for z in (y, x))
    for i, j in ((0, 1), (2, 3), (3, 4), (0, 4)):
        assert ks_2samp(gy[:, i, j], gx[:, i, j]).pvalue > 1e-3
    triple = lambda g: g[:, 0, 1] * g[:, 1, 4] * g[:, 0, 4]
    assert ks_2samp(triple(gy), triple(gx)).pvalue > 1e-3
    det = lambda g: np.linalg.det(g[:, :4, :4])
    assert ks_2samp(det(gy), det(gx)).pvalue > 1e-3


def test_ensembles_sampling_conventions():
    d = 40
    keys = jr.split(jr.key(9), 200)

    def sample(ensemble, count=50):
        return jax.vmap(lambda k: ensemble.sample(k, d))(keys[:count])

    B, _ = sample(af.AttentionEnsemble("ginibre", "identity"))
    assert abs(float(B.var()) - 1) < 0.05  # B = G1 G2 / sqrt(d): unit-variance entries
    B, V = (np.asarray(m) for m in sample(af.FIG5_ENSEMBLES["b"]))
    np.testing.assert_allclose(B, np.swapaxes(B, 1, 2))
    assert np.linalg.eigvalsh(V[:5]).min() > -1e-9  # Wishart: PSD
    offdiag, diag = B[:, ~np.eye(d, dtype=bool)], np.diagonal(B, axis1=1, axis2=2)
    assert abs(offdiag.var() - 1) < 0.05 and abs(diag.var() - 2) < 0.3  # GOE
    b, v = af.FIG5_ENSEMBLES["c"].sample(keys[0], d)
    np.testing.assert_allclose(v, b / d**0.5)
    _, v2 = af.AttentionEnsemble("ginibre", "kq").sample(keys[0], d)
    np.testing.assert_allclose(v2, b.T / d**0.5)
    _, V = sample(af.FIG5_ENSEMBLES["a"], 200)
    assert abs(float(V.var()) * d - 1) < 0.05  # Ginibre V / sqrt(d): circular law, unit disc


def test_random_ensembles_run_per_system_and_shared():
    # Tight tolerances: the check below allows one pair (of 48) on the threshold.
    kw = dict(n=4, d=6, betas=[1.0, 5.0], ts=TS, realizations=4, progress=False, rtol=1e-7)
    kw.update(atol=1e-9, **SMALL)
    per_system = np.asarray(af.phase_diagram(jr.key(10), ensemble=af.FIG5_ENSEMBLES["a"], **kw))
    shared = np.asarray(
        af.phase_diagram(jr.key(10), ensemble=af.FIG5_ENSEMBLES["a"], shared_weights=True, **kw)
    )
    assert per_system.shape == shared.shape == (2, len(TS))
    assert np.all((0 <= per_system) & (per_system <= 1)) and not np.array_equal(per_system, shared)
    # The Ginibre-V ensemble against an independent solve of one of its systems.
    key_tokens, key_weights = jr.split(jr.key(10))
    g = jr.normal(key_tokens, (4, 4, 6))
    x0 = np.asarray(g / jnp.linalg.norm(g, axis=-1, keepdims=True))
    B, V = af.FIG5_ENSEMBLES["a"].sample(key_weights, 6)
    ref = np.mean(
        [scipy_fraction(x, 5.0, TS, Q=np.eye(6), K=np.asarray(B), V=np.asarray(V)) for x in x0],
        axis=0,
    )
    assert np.abs(shared[1] - ref).max() <= 1 / 48 + 1e-12


def test_float32():
    """float32 at its clamped tolerances against per-system scipy solves (DOP853, rtol 1e-11):
    at most one pair {i, j} of one system (two ordered pairs: 2/240 of P) may sit on the other
    side of 1 − δ at a save time."""
    x0 = af.bartlett_tokens(jr.key(4), 6, 256, (8,))
    betas = [0.5, 3.0]
    p32 = af.phase_diagram_from_tokens(x0.astype(jnp.float32), betas=betas, ts=TS, **ONE_CALL)
    ref = np.array([np.mean([scipy_fraction(x, b, TS) for x in np.asarray(x0)], 0) for b in betas])
    assert np.abs(np.asarray(p32, np.float64) - ref).max() <= 2 / (8 * 30) + 1e-9
    assert 0 < ref.mean() < 1


def test_bad_inputs():
    x0 = af.random_tokens(jr.key(0), 3, 4, (2,))
    with pytest.raises(ValueError, match="betas: expected a non-empty 1-d array"):
        af.phase_diagram_from_tokens(x0, betas=[[1.0]], ts=TS)
    with pytest.raises(ValueError, match="ts: expected finite, non-negative, non-decreasing"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=[2.0, 1.0])
    with pytest.raises(ValueError, match=r"delta: expected a threshold 0 < delta < 2, got 2.0"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, delta=2.0)
    with pytest.raises(ValueError, match="x0: tokens must lie on the unit sphere"):
        af.phase_diagram_from_tokens(2 * x0, betas=[1.0], ts=TS)
    with pytest.raises(ValueError, match="x0: expected initial tokens of shape"):
        af.phase_diagram_from_tokens(x0[0], betas=[1.0], ts=TS)
    with pytest.raises(ValueError, match="Q, K: give both or neither"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, Q=jnp.eye(4))
    with pytest.raises(ValueError, match=r"V: expected shape \(4, 4\)"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, V=jnp.eye(3))
    with pytest.raises(ValueError, match="normalization: expected 'softmax'"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, normalization="sum")
    with pytest.raises(ValueError, match="chunk_size: expected a positive integer"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, chunk_size=0)
    with pytest.raises(ValueError, match="slots: expected a positive integer"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, slots=1.5)
    with pytest.raises(ValueError, match="ensemble: expected an AttentionEnsemble"):
        af.phase_diagram(
            jr.key(0), n=3, d=4, betas=[1.0], ts=TS, realizations=2, ensemble="ginibre"
        )
    with pytest.raises(ValueError, match="value: expected one of"):
        af.AttentionEnsemble("ginibre", "gaussian")
    with pytest.raises(RuntimeError, match="did not reach t = 16.0 within max_steps = 2"):
        af.phase_diagram_from_tokens(
            af.random_tokens(jr.key(1), 6, 8, (4,)), betas=[1.0, 2.0], ts=TS, max_steps=2, **SMALL
        )
