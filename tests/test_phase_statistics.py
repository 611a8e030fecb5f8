"""phase_diagram with other statistics and field families (issue 25), against per-system
attnflow.solve / scipy solves and the diagnostics, and the authors' cluster count."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import attnflow as af

R, N, D = 3, 5, 3
TS = np.array([0.0, 1.0, 3.0, 8.0])
BETAS = [1.0, 4.0]
# chunk_size 2 < R = 3: the last chunk is padded (its padding must not enter the result).
TIGHT = dict(rtol=1e-9, atol=1e-11, max_steps=20000, chunk_size=2, progress=False)


@pytest.fixture(scope="module")
def x0():
    return af.random_tokens(jr.key(5), N, D, (R,))


def numpy_energy(x, beta):
    G = x @ x.T
    return np.exp(beta * G).sum() / (2 * beta * len(x) ** 2)


def numpy_fraction(x, delta):
    G = x @ x.T
    return (G >= 1 - delta)[~np.eye(len(x), dtype=bool)].mean()


def solved(field, x, ts):
    """Tokens of one system at ts along attnflow.solve at tight tolerances. (The fields below
    take β as an array: a Python-float β is static, and each value would compile the solve.)"""
    sol = af.solve(field, x, float(ts[-1]), ts=ts, rtol=1e-11, atol=1e-13, max_steps=50000)
    return np.asarray(sol.ys)


def per_system(field_of, x0, betas, ts, fn):
    """(len(betas), R, T) values fn(x(t), β) along solve(field_of(β, r), x0[r])."""
    return np.array(
        [
            [[fn(x, b) for x in solved(field_of(b, r), x0[r], ts)] for r in range(len(x0))]
            for b in betas
        ]
    )


def authors_cluster_count(G, threshold=0.9999):
    """The authors' count (phase-diagrams.py, --cluster_sizes): the rank of the thresholded
    Gram matrix, torch.linalg.matrix_rank((G > 0.9999).float())."""
    return np.linalg.matrix_rank((G > threshold).astype(np.float64))


# --- statistics -------------------------------------------------------------------------------


def test_statistics_against_direct_computation(x0):
    sa = lambda b, r: af.SelfAttention(jnp.asarray(b))
    xs = np.array([[solved(sa(b, r), x0[r], TS) for r in range(R)] for b in BETAS])
    # count_clusters loops with lax.while_loop: jitted once, not compiled again at every call.
    count_clusters = jax.jit(lambda x: af.count_clusters(x, 1e-2))
    cases = [
        (af.ClusteredFraction(1e-2), lambda x, b: numpy_fraction(x, 1e-2), np.mean, 1e-12),
        (af.ClusterCount(1e-2), lambda x, b: int(count_clusters(x)), np.mean, 1e-12),
        (
            af.ClusterCount(1e-2, reduce="median"),
            lambda x, b: int(count_clusters(x)),
            np.median,
            1e-12,
        ),
        # rank of x: singular values σ with σ² > tol
        (
            af.SpanDimension(1e-3),
            lambda x, b: np.sum(np.linalg.svd(x, compute_uv=False) ** 2 > 1e-3),
            np.mean,
            1e-12,
        ),
        (af.Energy(), numpy_energy, np.mean, 1e-7),
        (af.GramStatistic(lambda G: G.min()), lambda x, b: (x @ x.T).min(), np.mean, 1e-7),
    ]
    for statistic, fn, reduce, tol in cases:
        ref = reduce(
            np.array(
                [[[fn(x, b) for x in xs[i, r]] for r in range(R)] for i, b in enumerate(BETAS)]
            ),
            axis=1,
        )
        # The clustered fraction runs on the reduced engine, which compiles its call once per
        # device it runs on: one call of all R realisations (its padding is tested in
        # test_phase.py). Every other statistic runs on the general engine with a padded chunk.
        kw = {**TIGHT, "chunk_size": R} if isinstance(statistic, af.ClusteredFraction) else TIGHT
        got = np.asarray(
            af.phase_diagram_from_tokens(x0, betas=BETAS, ts=TS, statistic=statistic, **kw)
        )
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=repr(statistic))
    # The statistics move: counts fall from n, the span from min(n, d), the energy rises.
    counts = np.asarray(
        af.phase_diagram_from_tokens(x0, betas=BETAS, ts=TS, statistic=af.ClusterCount(), **TIGHT)
    )
    assert np.all(counts[:, 0] == N) and counts[1, -1] < N


def test_default_statistic_is_bitwise_unchanged():
    key = jr.key(3)
    kw = dict(n=4, d=8, betas=[0.5, 3.0], ts=TS, realizations=4, progress=False)
    ref = af.phase_diagram(key, **kw)
    assert np.array_equal(ref, af.phase_diagram(key, statistic=af.ClusteredFraction(), **kw))
    assert np.array_equal(
        ref, af.phase_diagram(key, family=af.FieldFamily(scheme=af.PostLN()), **kw)
    )


def test_general_engine_matches_the_fast_engine():
    """The clustered fraction through the general engine (a redraw period longer than the run
    forces it) against the reduced log-distance engine, both at tight tolerances."""
    kw = dict(n=4, d=8, betas=[0.5, 3.0], ts=TS, realizations=4, rtol=1e-9, atol=1e-11)
    fast = np.asarray(af.phase_diagram(jr.key(1), progress=False, **kw))
    general = np.asarray(
        af.phase_diagram(jr.key(1), family=af.FieldFamily(period=100.0), progress=False, **kw)
    )
    np.testing.assert_allclose(general, fast, rtol=0, atol=1e-12)  # one count differs by ≥ 1/12
    assert 0 < fast.mean() < 1 and fast[0, -1] == 1.0


def test_two_identity_heads_run_at_twice_the_speed():
    """Two identical heads double the field: x(t) with H = 2 is x(2t) with one head."""
    kw = dict(n=4, d=4, betas=[1.0, 3.0], realizations=4, rtol=1e-9, atol=1e-11, progress=False)
    s = af.Energy()
    with pytest.warns(UserWarning, match="2 identical heads, i.e. single-head attention at 2×"):
        two = af.phase_diagram(jr.key(2), ts=TS, family=af.FieldFamily(heads=2), statistic=s, **kw)
    one = af.phase_diagram(jr.key(2), ts=2 * TS, statistic=s, **kw)
    np.testing.assert_allclose(two, one, rtol=1e-7)


# --- field families ---------------------------------------------------------------------------


def weights(key, L, H):
    """(R, L, H, D, D) query, key and value matrices near the identity."""
    kq, kk, kv = jr.split(key, 3)
    near = lambda k, s: jnp.eye(D)[None, None, None] + s * jr.normal(k, (R, L, H, D, D))
    return near(kq, 0.5), near(kk, 0.5), near(kv, 0.3)


def test_multihead_causal_against_solve(x0):
    """Two causal (USA) heads with their own Q, K, V per realisation."""
    normalization = "n"
    Q, K, V = weights(jr.key(7), 1, 2)
    fam = af.FieldFamily(heads=2, causal=True)

    def field(b, r):
        heads = [
            af.SelfAttention(
                jnp.asarray(b),
                Q[r, 0, h],
                K[r, 0, h],
                V[r, 0, h],
                causal=True,
                normalization=normalization,
            )
            for h in range(2)
        ]
        return af.MultiHeadAttention.from_heads(heads)

    # The reference trajectories, solved once for both statistics.
    xs = {(b, r): solved(field(b, r), x0[r], TS) for b in BETAS for r in range(R)}
    for statistic, fn, tol in (
        (af.Energy(), numpy_energy, 1e-7),
        (af.ClusteredFraction(1e-2), lambda x, b: numpy_fraction(x, 1e-2), 1e-12),
    ):
        ref = np.array([[[fn(x, b) for x in xs[b, r]] for r in range(R)] for b in BETAS]).mean(
            axis=1
        )
        got = af.phase_diagram_from_tokens(
            x0,
            betas=BETAS,
            ts=TS,
            Q=Q,
            K=K,
            V=V,
            family=fam,
            statistic=statistic,
            normalization=normalization,
            **TIGHT,
        )
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_redrawn_weights_against_piecewise_constant(x0):
    """Weights redrawn every period 2.5 on [0, 8]: four pieces, against one solve of
    PiecewiseConstant (which steps to the switches through diffrax's jump_ts)."""
    Q, K, V = weights(jr.key(8), 4, 1)
    fam = af.FieldFamily(period=2.5)
    ts = np.array([0.0, 1.0, 2.5, 4.0, 8.0])  # a save time on a switch

    def field(b, r):
        # β as an array: one compiled reference solve serves both βs (a number β is static).
        return af.PiecewiseConstant.from_attention(
            jnp.asarray(b), Q=Q[r, :, 0], K=K[r, :, 0], V=V[r, :, 0], switch_times=[2.5, 5.0, 7.5]
        )

    ref = per_system(field, x0, BETAS, ts, numpy_energy).mean(axis=1)
    got = af.phase_diagram_from_tokens(
        x0, betas=BETAS, ts=ts, Q=Q, K=K, V=V, family=fam, statistic=af.Energy(), **TIGHT
    )
    np.testing.assert_allclose(got, ref, rtol=1e-7)
    # The redraws matter: the same run with the first piece's weights throughout differs
    # (given as four equal pieces: the compiled run above serves).
    first = [jnp.broadcast_to(m[:, :1], m.shape) for m in (Q, K, V)]
    fixed = af.phase_diagram_from_tokens(
        x0,
        betas=BETAS,
        ts=ts,
        Q=first[0],
        K=first[1],
        V=first[2],
        family=fam,
        statistic=af.Energy(),
        **TIGHT,
    )
    assert np.abs(np.asarray(fixed) - np.asarray(got))[:, -1].max() > 1e-3


def scipy_scheme_tokens(x, beta, ts, scheme):
    """Tokens z/|z| of the pre-LN (ż = g(z/|z|)), peri-LN (ż = N(g(z/|z|))) or nGPT
    (ż = P^⊥_z (N(g(z)) − z), rate 1) flow, g(x) = Σ_j a_ij x_j in NumPy, by scipy."""
    n, d = x.shape

    def g(z):
        u = z / np.linalg.norm(z, axis=1, keepdims=True)
        s = beta * u @ u.T
        a = np.exp(s - s.max(axis=1, keepdims=True))
        return u, (a / a.sum(axis=1, keepdims=True)) @ u

    def rhs(t, y):
        u, out = g(y.reshape(n, d))
        if scheme == "pre":
            dz = out
        elif scheme == "peri":
            dz = out / np.linalg.norm(out, axis=1, keepdims=True)
        else:
            step = out / np.linalg.norm(out, axis=1, keepdims=True) - u
            dz = step - np.sum(step * u, axis=1, keepdims=True) * u
        return dz.ravel()

    sol = solve_ivp(rhs, (0, ts[-1]), x.ravel(), t_eval=ts, rtol=1e-11, atol=1e-13, method="DOP853")
    z = sol.y.T.reshape(-1, n, d)
    return z / np.linalg.norm(z, axis=2, keepdims=True)


@pytest.mark.parametrize(
    "name, scheme", [("pre", af.PreLN()), ("peri", af.PeriLN()), ("ngpt", af.NGPT())]
)
def test_normalisation_schemes_against_scipy(x0, name, scheme):
    x = np.asarray(x0)
    ref = np.array(
        [
            [[numpy_energy(u, b) for u in scipy_scheme_tokens(x[r], b, TS, name)] for r in range(R)]
            for b in BETAS
        ]
    ).mean(axis=1)
    got = af.phase_diagram_from_tokens(
        x0, betas=BETAS, ts=TS, family=af.FieldFamily(scheme=scheme), statistic=af.Energy(), **TIGHT
    )
    np.testing.assert_allclose(got, ref, rtol=1e-7)


def test_ensemble_with_heads_and_redraws_runs():
    P = af.phase_diagram(
        jr.key(0),
        n=4,
        d=6,
        betas=[1.0],
        ts=[0.0, 2.0, 4.0],
        realizations=3,
        ensemble=af.GPT2_ENSEMBLE,
        family=af.FieldFamily(heads=2, period=2.0),
        statistic=af.SpanDimension(),
        progress=False,
    )
    # N(0, 0.02²) weights barely move the tokens by t = 4: the span stays min(n, d) = 4.
    assert np.asarray(P).tolist() == [[4.0, 4.0, 4.0]]


def test_gpt2_ensemble_moments():
    """Entries of V: N(0, σ²); entries of B = QᵀK: mean 0, variance dσ⁴ (σ = 0.02)."""
    d, m, sigma = 16, 400, 0.02
    B, V = jax.vmap(lambda k: af.GPT2_ENSEMBLE.sample(k, d))(jr.split(jr.key(0), m))
    B, V = np.asarray(B), np.asarray(V)
    # m d² = 102400 entries: the sample variance is within 2% (about 5 standard errors).
    assert abs(V.var() / sigma**2 - 1) < 0.02 and abs(V.mean()) < 5 * sigma / np.sqrt(V.size)
    # B_ij is a sum of d products: its variance d σ⁴; within 3% (entries in a row correlate).
    assert abs(B.var() / (d * sigma**4) - 1) < 0.03
    assert not np.allclose(B, np.swapaxes(B, -1, -2))


# --- the authors' cluster count ---------------------------------------------------------------


def test_cluster_count_against_the_authors_rank_on_a_chain():
    """Three tokens in a chain a ~ b ~ c with a ≁ c, and one far token: one component plus
    one, but the thresholded matrix has rank 4 (the authors' count overcounts)."""
    theta = np.arccos(1 - 0.7e-4)  # ⟨a, b⟩ = ⟨b, c⟩ = 1 − 0.7e-4, ⟨a, c⟩ ≈ 1 − 2.8e-4
    angles = np.array([0.0, theta, 2 * theta, 2.0])
    x = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    G = x @ x.T
    assert authors_cluster_count(G) == 4
    assert int(af.ClusterCount(1e-4)(jnp.asarray(x), 1.0)) == 2
    # Cliques (two coincident pairs): both counts agree.
    y = np.stack([np.cos([0.0, 1e-3, 2.0, 2.0]), np.sin([0.0, 1e-3, 2.0, 2.0])], axis=1)
    assert authors_cluster_count(y @ y.T) == 2 == int(af.ClusterCount(1e-4)(jnp.asarray(y), 1.0))


def test_median_cluster_count_diagram_against_the_authors_definition():
    """The authors' --cluster_sizes diagram (median over systems of the rank of
    1[G > 0.9999]) on solved trajectories equals ClusterCount(1e-4, "median") wherever every
    component is a clique, which is where their count is right."""
    # N = 5 tokens in R^3, as in the tests above, so the reference solve's compiled program is
    # theirs; key 24 gives one (β, t) whose graph has a component that is not a clique (the
    # authors' rank overcounts there), as the earlier 6-token systems did.
    x0 = af.random_tokens(jr.key(24), N, D, (5,))
    ts = np.array([0.0, 4.0, 10.0, 20.0])
    betas = [2.0, 9.0]
    xs = np.array(
        [[solved(af.SelfAttention(jnp.asarray(b)), x0[r], ts) for r in range(5)] for b in betas]
    )
    G = np.einsum("brtid,brtjd->brtij", xs, xs)
    theirs = np.median(
        np.array(
            [[[authors_cluster_count(g) for g in G[b, r]] for r in range(5)] for b in range(2)]
        ),
        axis=1,
    )
    close = G > 0.9999
    # A component is a clique iff closure = adjacency: adjacency² > 0 adds no new pair.
    two_step = np.einsum("...ij,...jk->...ik", close.astype(int), close.astype(int)) > 0
    cliques = np.all(two_step == close, axis=(-1, -2)).all(axis=1)  # (betas, T)
    got = np.asarray(
        af.phase_diagram_from_tokens(
            x0, betas=betas, ts=ts, statistic=af.ClusterCount(1e-4, reduce="median"), **TIGHT
        )
    )
    assert cliques.any() and np.any(got[cliques] > 1)
    np.testing.assert_array_equal(got[cliques], theirs[cliques])


# --- bad input --------------------------------------------------------------------------------


def test_bad_statistics_and_families(x0):
    with pytest.raises(ValueError, match="reduce: expected 'mean' or 'median'"):
        af.ClusterCount(reduce="max")
    with pytest.raises(ValueError, match="delta: expected a threshold"):
        af.ClusteredFraction(delta=3.0)
    with pytest.raises(ValueError, match="tol: expected a finite eigenvalue threshold > 0"):
        af.SpanDimension(tol=0.0)
    with pytest.raises(ValueError, match="fn: expected a function of the Gram matrix"):
        af.GramStatistic(3.0)
    with pytest.raises(ValueError, match="heads: expected a positive integer"):
        af.FieldFamily(heads=0)
    with pytest.raises(ValueError, match="period: expected a finite redraw period"):
        af.FieldFamily(period=-1.0)
    with pytest.raises(ValueError, match="scheme: expected a normalisation scheme"):
        af.FieldFamily(scheme="pre")
    with pytest.raises(ValueError, match="statistic: expected an AbstractStatistic"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, statistic="clusters")
    with pytest.raises(ValueError, match="family: expected a FieldFamily"):
        af.phase_diagram_from_tokens(x0, betas=[1.0], ts=TS, family="causal")
    with pytest.raises(ValueError, match=r"V: expected shape \(3, 3\) \(shared\)"):
        af.phase_diagram_from_tokens(
            x0, betas=[1.0], ts=TS, V=jnp.ones((R, 2, 2, 3, 3)), family=af.FieldFamily(heads=3)
        )
    with pytest.raises(RuntimeError, match="solves did not reach"):
        af.phase_diagram_from_tokens(
            x0, betas=[1.0], ts=TS, statistic=af.Energy(), max_steps=2, progress=False
        )
