"""Limit geometries of GLPR23 (attnflow/_limit_geometry.py) on the authors' examples.

Matrices and settings transcribed from clustering-Tformers.py of
github.com/borjanG/2023-transformers (n = 20, x0 uniform on [−5, 5]^d, Q = K = I); the
dynamics is integrated with diffrax at a tight tolerance to T = 10 (the authors use RK4,
dt = 0.1, T = 5), where hardmax has set in.
"""

import os
import pathlib
import runpy

import diffrax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.linalg

import attnflow as af
from attnflow.figures import limit_geometries

# The authors' value matrices.
V_HYPERPLANES_2D = np.array([[0.64709742, 0.81911926], [0.61210449, 0.63263484]])
V_HYPERPLANES_3D_NEG = np.array(  # "Re(l) < 0": the other two eigenvalues
    [
        [0.2362413, 0.0599536, 0.40506019],
        [0.81321448, 0.49948705, 0.33754772],
        [0.2160645, 0.38505272, 0.14588075],
    ]
)
V_HYPERPLANES_3D_POS = np.array(  # "Re(l) > 0"
    [
        [0.18608476, 0.34391026, 0.13905949],
        [0.35244288, 0.6694859, 0.39992145],
        [0.46685606, 0.17094454, 0.42092308],
    ]
)
V_CODIMENSION_K = np.array(  # symmetric, two positive eigenvalues, one negative
    [
        [0.92761287, 0.94333073, 0.3827744],
        [0.94333073, 0.59991396, 0.47825472],
        [0.3827744, 0.47825472, 0.46668605],
    ]
)
V_PARANORMAL = np.diag([1.0, -0.5])
V_ROTATION = np.array([[0.5, -1.0], [1.0, 0.5]])  # complex top pair: violates Thm 4.1

T = 10.0


def _simulate(V, QK, x0):
    # The figure's integrator (Tsit5, rtol 1e-7) with the notebook's quick settings, so that the
    # compiled solves are shared within the test session.
    return limit_geometries.simulate(V, QK, x0, T, 2, 1e-7)[1][-1]


def _authors_run(V, seed=0, QK=None):
    V = np.asarray(V, dtype=float)
    d = V.shape[0]
    x0 = jr.uniform(jr.key(seed), (20, d), minval=-5.0, maxval=5.0, dtype=jnp.float64)
    QK = np.eye(d) if QK is None else QK
    return _simulate(V, QK, x0)


def test_identity_puts_every_token_on_a_hull_vertex():
    for seed in (0, 1):
        z = _authors_run(np.eye(2), seed)
        g = af.models.limit_geometry(z, np.eye(2), t=T)
        assert g.spectrum.gram_positive
        assert g.on_vertex.all() and g.vertex_distance.max() < 1e-3
        assert 3 <= g.hull_vertices.size <= 20
    # A V outside the hypothesis leaves tokens on edges of the hull, not at its vertices.
    z = _authors_run(V_PARANORMAL)
    assert af.models.limit_geometry(z, V_PARANORMAL, t=T).vertex_distance.max() > 0.05


@pytest.mark.parametrize("V", [V_HYPERPLANES_2D, V_HYPERPLANES_3D_NEG, V_HYPERPLANES_3D_POS])
def test_authors_hyperplane_examples_reach_at_most_three_levels(V):
    g = af.models.limit_geometry(_authors_run(V), V, t=T)
    assert g.spectrum.top_simple_positive and g.spectrum.hyperplane_condition
    # ψ₁ is the left eigenvector of the top eigenvalue.
    lam = g.spectrum.eigenvalues[0].real
    np.testing.assert_allclose(g.spectrum.psi1 @ V, lam * g.spectrum.psi1, atol=1e-12)
    assert 2 <= g.num_levels <= 3
    # Within a level ψ₁·z agrees to 1e-3 of the spread; across levels they are far apart.
    s = _authors_run(V) @ g.spectrum.psi1
    for k in range(g.num_levels):
        assert np.ptp(s[g.level_labels == k]) < 1e-3 * np.ptp(s)
    # The right eigenvector would not do: φ₁·z takes many values.
    assert af.models.limit_geometry(_authors_run(V), V.T, t=T).num_levels > 3


def test_a_value_matrix_violating_the_hypothesis_is_detected():
    g = af.models.limit_geometry(_authors_run(V_ROTATION), V_ROTATION, t=T)
    assert not g.spectrum.top_simple_positive and not g.spectrum.paranormal
    assert g.num_levels > 3
    # Random Gaussian V (seed 0: three draws satisfy Thm 4.1, three do not, two of those with a
    # complex top pair): at most three levels exactly when the hypothesis holds.
    rng = np.random.default_rng(0)
    outcomes = []
    for _ in range(6):
        V = rng.normal(size=(2, 2))
        g = af.models.limit_geometry(_authors_run(V), V, t=T)
        assert (g.num_levels <= 3) == g.spectrum.hyperplane_condition
        outcomes.append(g.spectrum.hyperplane_condition)
    assert 0 < sum(outcomes) < 6


def test_paranormal_polytope_times_subspace():
    spec = af.models.value_spectrum(V_PARANORMAL)
    assert spec.paranormal and spec.paranormal_lambda == 1.0
    np.testing.assert_allclose(np.abs(spec.C[:, 0]), [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(np.abs(spec.H[:, 0]), [0.0, 1.0], atol=1e-12)
    z = _authors_run(V_PARANORMAL)
    g = af.models.limit_geometry(z, V_PARANORMAL, t=T)
    # C-coordinates at the two vertices of an interval; H-coordinates spread out.
    assert np.nanmax(g.subspace_vertex_distance) < 1e-3
    assert np.unique(np.round(g.subspace_coordinates[:, 0] / g.diameter, 3)).size == 2
    assert np.ptp(z[:, 1]) > 1.0
    # Not paranormal: a Jordan block, and a dominant eigenvalue that is negative.
    assert not af.models.value_spectrum(np.array([[1.0, 1.0], [0.0, 1.0]])).paranormal
    assert not af.models.value_spectrum(np.diag([0.5, -2.0])).paranormal
    # Codimension-k (the authors' symmetric example): not Table 1's simple rows; it is still
    # diagnosed (levels along ψ₁).
    spec = af.models.value_spectrum(V_CODIMENSION_K)
    assert (spec.eigenvalues.real > 0).sum() == 2 and spec.top_simple_positive


@pytest.mark.parametrize(
    "V",
    [
        np.diag([1.0, -2.0]),  # |−2| > 1: e₂ grows like e^{2t}
        np.diag([1.0, -1.0]),  # |λ₂| = λ₁: not strictly dominant
        np.array([[1.0, 0.0, 0.0], [0.0, 0.5, -3.0], [0.0, 3.0, 0.5]]),  # |0.5 ± 3i| > 1
        np.array([[1.0, 1.0], [0.0, 1.0]]),  # λ₁ = 1 not simple
        np.array([[0.5, -1.0], [1.0, 0.5]]),  # complex top pair
        np.diag([-1.0, 0.5]),  # top modulus negative
    ],
)
def test_good_triple_needs_the_largest_modulus_real_positive_simple(V):
    spec = af.models.value_spectrum(V)
    assert not spec.top_simple_positive and not spec.hyperplane_condition


@pytest.mark.parametrize(
    "V",
    [
        np.diag([2.0, -1.0]),
        np.diag([1.0, 0.5, -0.5]),
        np.array([[2.0, 0.0, 0.0], [0.0, 0.5, -1.0], [0.0, 1.0, 0.5]]),  # |0.5 ± i| < 2
    ],
)
def test_good_triple_holds_when_the_largest_modulus_dominates(V):
    spec = af.models.value_spectrum(V)
    assert spec.top_simple_positive and spec.hyperplane_condition
    assert spec.eigenvalues[0] == pytest.approx(np.max(np.abs(np.linalg.eigvals(V))))


def test_diag_one_minus_two_diverges_in_the_rescaled_variables():
    # Why the real-part order is wrong: z = e^{−tV}x grows along e₂ when λ₂ = −2.
    V = np.diag([1.0, -2.0])
    x0 = jr.uniform(jr.key(0), (20, 2), minval=-5.0, maxval=5.0, dtype=jnp.float64)
    z = limit_geometries.simulate(V, np.eye(2), x0, 6.0, 2, 1e-7)[1][-1]
    assert np.abs(z).max() > 1e4 * np.abs(np.asarray(x0)).max()


def test_gram_symmetry_and_definiteness_are_reported_separately():
    shear = np.array([[1.0, 1.0], [0.0, 1.0]])  # QᵀK = [[1, 0], [1, 1]]: xᵀAx = x² + xy + y²
    spec = af.models.value_spectrum(np.eye(2), Q=shear)
    assert (spec.gram_symmetric, spec.gram_definite, spec.gram_positive) == (False, True, False)
    spec = af.models.value_spectrum(np.eye(2), Q=np.diag([1.0, -1.0]))
    assert (spec.gram_symmetric, spec.gram_definite, spec.gram_positive) == (True, False, False)
    spec = af.models.value_spectrum(np.eye(2), Q=shear, K=shear)  # QᵀK = [[1, 1], [1, 2]]
    assert (spec.gram_symmetric, spec.gram_definite, spec.gram_positive) == (True, True, True)


def _rotation(angle, radius):
    c, s = np.cos(angle), np.sin(angle)
    return radius * np.array([[c, -s], [s, c]])


@pytest.mark.parametrize(
    ("V", "f_dim"),
    [
        (np.diag([1.0, 1.0, 0.5]), 2),
        (np.diag([1.0, -0.5]), 1),
        (scipy.linalg.block_diag([[1.0]], _rotation(1.0, 0.7)), 1),  # complex G, |μ| < λ
        (np.diag([1.0, 1.0, -1.0]), None),  # −λ has modulus λ
        (scipy.linalg.block_diag([[1.0]], _rotation(1.0, 1.0)), None),  # λe^{±i}
        (scipy.linalg.block_diag([[1.0]], _rotation(1.0, 1.3)), None),
        (np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.2]]), None),  # Jordan block
        (np.diag([-1.0, 0.5]), None),  # λ < 0
    ],
)
def test_paranormal_matches_the_definition(V, f_dim):
    # R^d = F ⊕ G, both invariant, V|F = λ·Id with λ > 0, spectrum of V|G inside |μ| < λ.
    spec = af.models.value_spectrum(V)
    assert spec.paranormal == (f_dim is not None)
    if f_dim is None:
        return
    lam, F, G = spec.paranormal_lambda, spec.C, spec.H
    assert F.shape == (V.shape[0], f_dim) and G.shape == (V.shape[0], V.shape[0] - f_dim)
    np.testing.assert_allclose(V @ F, lam * F, atol=1e-12)
    # G invariant: V G lies in span G; the spectrum of V|G is strictly inside the disc of radius λ.
    restricted = np.linalg.lstsq(G, V @ G, rcond=None)[0]
    np.testing.assert_allclose(G @ restricted, V @ G, atol=1e-12)
    if G.shape[1]:
        assert np.abs(np.linalg.eigvals(restricted)).max() < lam
    assert np.linalg.matrix_rank(np.concatenate([F, G], axis=1)) == V.shape[0]


def test_one_dimensional_attention_allows_one_general_row():
    # A limit configuration with a token at 0, V = 1, Q = K = 1, read at t = T: the logits
    # e^{2T} z_i z_j of the middle row vanish, so it is uniform, a general probability row; every
    # other row is the indicator of the largest z_j (z_i > 0) or of the smallest (z_i < 0).
    z = np.array([[-4.0], [-2.5], [-1.0], [0.0], [0.5], [1.5], [3.0]])
    g = af.models.limit_geometry(z, np.eye(1), t=T)
    assert g.general_rows.tolist() == [3]
    np.testing.assert_allclose(g.attention[3], np.full(7, 1 / 7), atol=1e-12)
    expected = np.eye(7)[[0, 0, 0, 3, 6, 6, 6]]
    others = [0, 1, 2, 4, 5, 6]
    np.testing.assert_allclose(g.attention[others], expected[others], atol=1e-12)
    # Rank is not the statement: the limit matrix has rank 3 here, not ≤ 2.
    assert np.linalg.matrix_rank(g.attention) == 3


def test_one_dimensional_attention_becomes_boolean():
    # d = 1 embedded in d = 2 exactly: Q = K = diag(1, 0) and z_2 ≡ 0.
    P = np.diag([1.0, 0.0])
    x0 = np.zeros((20, 2))
    x0[:, 0] = np.asarray(jr.uniform(jr.key(4), (20,), minval=-5.0, maxval=5.0))
    for v, boolean in ((1.0, True), (-1.0, False)):
        V2 = np.diag([v, v])
        z = _simulate(V2, P, jnp.asarray(x0))
        assert np.abs(z[:, 1]).max() == 0.0
        g = af.models.limit_geometry(z[:, :1], np.array([[v]]), t=T)
        if boolean:
            assert g.boolean_distance < 1e-6 and g.general_rows.size == 0
            # rows attend to the largest z (z_i > 0) or to the smallest (z_i < 0)
            leader = np.where(z[:, 0] > 0, np.argmax(z[:, 0]), np.argmin(z[:, 0]))
            np.testing.assert_allclose(g.attention, np.eye(20)[leader], atol=1e-6)
        else:  # V < 0: the logits fade, attention tends to uniform, far from Boolean
            assert g.boolean_distance > 0.04


def test_minus_identity_collapses_unscaled_tokens_to_the_origin():
    # V = −I, Q = K = I: the mean decays like e^{−t} and the covariance C of the tokens obeys
    # Ċ = −2C² + O(|x|⁴) (module docstring), so every eigenvalue of 2t·C(t) tends to 1: an
    # algebraic collapse at the rate |x| ~ (2t)^{−1/2}. At β = 0 (uniform attention) the
    # differences x_i − x_j are conserved: no collapse, which the check must reject.
    x0 = jr.uniform(jr.key(2), (20, 2), minval=-5.0, maxval=5.0, dtype=jnp.float64)
    t1 = 40.0
    for beta in (1.0, 0.0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(af.PureSelfAttention(beta, None, None, -jnp.eye(2))),
            diffrax.Tsit5(),
            0.0,
            t1,
            0.01,
            x0,
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10),
        )
        x = np.asarray(sol.ys[-1])
        y = x - x.mean(axis=0)
        scaled = np.linalg.eigvalsh(2 * t1 * y.T @ y / x.shape[0])
        g = af.models.limit_geometry(x, -np.eye(2))
        if beta > 0:
            np.testing.assert_allclose(scaled, 1.0, atol=0.05)
            assert np.linalg.norm(x.mean(axis=0)) < 1e-4
            assert g.radius < 0.3 < 0.1 * float(jnp.linalg.norm(x0, axis=1).max())
        else:
            assert scaled.min() > 100 and g.radius > 1.0


def test_validation():
    with pytest.raises(ValueError, match="V"):
        af.models.limit_geometry(np.zeros((3, 2)), np.eye(3))
    with pytest.raises(ValueError, match="V"):
        af.models.value_spectrum(np.ones((2, 3)))
    with pytest.raises(ValueError, match="tol"):
        af.models.limit_geometry(np.zeros((3, 2)), np.eye(2), tol=0.0)
    with pytest.raises(ValueError, match="Q"):
        af.models.value_spectrum(np.eye(2), Q=np.eye(3))


def test_notebook_runs_quick(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parents[1] / "notebooks" / "limit_geometries.py"
    ns = runpy.run_path(os.fspath(path), run_name="__main__")
    assert ns["polytope_distance"] < 1e-3
    assert 2 <= ns["hyperplane_levels"] <= 3
    assert ns["paranormal_distance"] < 1e-3
    assert ns["boolean_distance"] < 1e-6 and ns["general_rows"] <= 1
    assert ns["rotation_levels"] > 3


# --- Basis independence of the simple-eigenvalue test (issue #34) --------------------------------

_JORDAN_TOP = {  # a Jordan block at the top eigenvalue 2: never simple, whatever the basis
    "J2": np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.5]]),
    "J3": np.array([[2.0, 1.0, 0, 0], [0, 2.0, 1.0, 0], [0, 0, 2.0, 0], [0, 0, 0, 0.5]]),
    "J2_far": np.array([[2.0, 100.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.5]]),
}


def _rotations(d, count, seed):
    import scipy.stats

    return scipy.stats.ortho_group.rvs(d, size=count, random_state=seed)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(_JORDAN_TOP))
def test_jordan_block_is_not_simple_in_any_basis(name, dtype):
    """V = R J Oᵀ with a Jordan block at λ₁ = 2: the algebraic multiplicity of λ₁ is 2 or 3 in
    every basis, so neither the good triple nor the hyperplane condition nor paranormality
    holds (the old fixed tolerance said "simple" in about a quarter of the rotations)."""
    J = _JORDAN_TOP[name]
    for R in _rotations(J.shape[0], 100, seed=len(name)):
        V = (R @ J @ R.T).astype(dtype)
        s = af.models.value_spectrum(V)
        assert not s.top_simple_positive and not s.hyperplane_condition and not s.paranormal


@pytest.mark.parametrize(
    "dtype, gap", [(np.float64, 1e-4), (np.float64, 0.1), (np.float32, 0.05), (np.float32, 0.5)]
)
def test_simple_top_eigenvalue_is_simple_in_every_basis(dtype, gap):
    """Genuinely simple λ₁ = 2, including nearly defective ones (a unit Jordan coupling to an
    eigenvalue 2 − gap, eigenvalue condition number ≈ 1/gap): simple and dominant in every
    rotation, and the computed λ₁ and ψ₁ are those of the construction."""
    J = np.array([[2.0, 1.0, 0.0], [0.0, 2.0 - gap, 0.0], [0.0, 0.0, 0.5]])
    for R in _rotations(3, 100, seed=7):
        V = (R @ J @ R.T).astype(dtype)
        s = af.models.value_spectrum(V)
        assert s.top_simple_positive and s.hyperplane_condition, (gap, R)
        assert s.eigenvalues[0].real == pytest.approx(
            2.0, abs=1e-4 if dtype == np.float32 else 1e-9
        )
        # ψ₁ of J is (1, 1/gap, 0) up to scale: rotated, it is R ψ₁.
        psi = R @ np.array([1.0, 1.0 / gap, 0.0])
        cos = abs(s.psi1 @ psi) / (np.linalg.norm(s.psi1) * np.linalg.norm(psi))
        assert cos == pytest.approx(1.0, abs=1e-3 if dtype == np.float32 else 1e-8)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_semisimple_double_top_eigenvalue_is_paranormal_not_simple(dtype):
    """V = R diag(2, 2, 0.5) Oᵀ: λ₁ = 2 is double but semisimple (paranormal, F of dimension
    2), and not simple (no good triple), in every basis."""
    for R in _rotations(3, 100, seed=3):
        V = (R @ np.diag([2.0, 2.0, 0.5]) @ R.T).astype(dtype)
        s = af.models.value_spectrum(V)
        assert s.paranormal and s.C.shape == (3, 2) and not s.top_simple_positive
