"""Known optimal configurations (MATH.md §8): constructions checked against the table's inner
products, exact sphere moments (design strength), the energy closed form and criticality."""

import itertools
import math

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

from attnflow import theory

SQ5 = math.sqrt(5)

# Inner product : average multiplicity per point, copied from the MATH.md §8 table.
TABLE = {
    ("simplex", 4, 3): [(-1 / 3, 3)],
    ("simplex", 3, 5): [(-1 / 2, 2)],
    ("cross-polytope", 8, 4): [(-1, 1), (0, 6)],
    ("polygon", 7, 2): [(math.cos(2 * math.pi * k / 7), 2) for k in (3, 2, 1)],
    ("polygon", 6, 2): [(-1, 1), (-0.5, 2), (0.5, 2)],
    ("icosahedron", 12, 3): [(-1, 1), (-1 / SQ5, 5), (1 / SQ5, 5)],
    ("5-demicube", 16, 5): [(-3 / 5, 5), (1 / 5, 10)],
    ("600-cell", 120, 4): [
        (-1, 1),
        (-(1 + SQ5) / 4, 12),
        (-1 / 2, 20),
        (-(SQ5 - 1) / 4, 12),
        (0, 30),
        ((SQ5 - 1) / 4, 12),
        (1 / 2, 20),
        ((1 + SQ5) / 4, 12),
    ],
    ("e8", 240, 8): [(-1, 1), (-1 / 2, 56), (0, 126), (1 / 2, 56)],
}
# Design strengths t: MATH.md (600-cell t = 11, E8 t = 7); sharp configurations with m distinct
# inner products are (2m − 1)-designs; the n-gon is an (n − 1)-design; a simplex spanning R^d
# (n = d + 1) is a 2-design, one that does not span is only a 1-design.
STRENGTH = {
    ("simplex", 4, 3): 2,
    ("simplex", 3, 5): 1,
    ("cross-polytope", 8, 4): 3,
    ("polygon", 7, 2): 6,
    ("polygon", 6, 2): 5,
    ("icosahedron", 12, 3): 5,
    ("5-demicube", 16, 5): 3,
    ("600-cell", 120, 4): 11,
    ("e8", 240, 8): 7,
}


def construct(name, n, d):
    kwargs = {"simplex": {"n": n, "d": d}, "cross-polytope": {"d": d}, "polygon": {"n": n}}
    return theory.optimal_configuration(name, **kwargs.get(name, {}))


def spectrum_kwargs(name, n, d):
    return {"simplex": {"n": n, "d": d}, "cross-polytope": {"d": d}, "polygon": {"n": n}}.get(
        name, {}
    )


@pytest.mark.parametrize("key", list(TABLE))
def test_constructed_spectrum_matches_table(key):
    x = np.asarray(construct(*key))
    assert x.shape == key[1:]
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-15)
    values, mult = theory.inner_product_spectrum(x)
    expected = sorted(TABLE[key])
    np.testing.assert_allclose(values, [v for v, _ in expected], atol=1e-12)
    np.testing.assert_allclose(mult, [m for _, m in expected], atol=0)
    # Vertex-transitive: every point sees the same spectrum, not just on average.
    gram = x @ x.T
    for row in gram:
        others = np.sort(np.delete(row, np.argmax(row)))
        np.testing.assert_allclose(
            others, np.repeat([v for v, _ in expected], [int(m) for _, m in expected]), atol=1e-12
        )
    np.testing.assert_allclose(
        theory.known_spectrum(key[0], **spectrum_kwargs(*key)), expected, atol=1e-12
    )


def sphere_moment(alpha, d):
    """E[x^alpha] for x uniform on S^{d−1}, via Gaussian moments: g = |g| x, |g| ⟂ x."""
    if any(a % 2 for a in alpha):
        return 0.0
    k = sum(alpha)
    gaussian = math.prod(scipy.special.factorial2(a - 1) if a else 1.0 for a in alpha)
    radial = 2 ** (k / 2) * math.gamma((d + k) / 2) / math.gamma(d / 2)
    return gaussian / radial


def max_moment_error(x, degree):
    n, d = x.shape
    errors = []
    for coordinates in itertools.combinations_with_replacement(range(d), degree):
        alpha = np.bincount(coordinates, minlength=d)
        empirical = np.mean(np.prod(x**alpha, axis=1))
        errors.append(abs(empirical - sphere_moment(alpha, d)))
    return max(errors)


@pytest.mark.parametrize("key", list(STRENGTH))
def test_design_strength_against_exact_moments(key):
    x = np.asarray(construct(*key), dtype=np.float64)
    t = STRENGTH[key]
    for degree in range(1, t + 1):
        assert max_moment_error(x, degree) < 1e-12, f"degree {degree} moments must match"
    assert max_moment_error(x, t + 1) > 1e-6, f"not a {t + 1}-design"
    assert theory.design_strength(x) == t


@pytest.mark.parametrize("key", list(TABLE))
@pytest.mark.parametrize("beta", [0.3, 1.0, 7.0])
def test_optimal_energy_closed_form_matches_pair_sum(key, beta):
    x = construct(*key)
    n = x.shape[0]
    gram = np.asarray(x) @ np.asarray(x).T
    pair_sum = np.exp(beta * gram).sum() / (2 * beta * n**2)
    assert float(theory.optimal_energy(key[0], beta, **spectrum_kwargs(*key))) == pytest.approx(
        pair_sum, rel=1e-13
    )


@pytest.mark.parametrize("key", list(TABLE))
def test_configurations_are_critical_points(key):
    """∇_i E ∝ P^⊥_{x_i} Σ_j e^{β⟨x_i, x_j⟩} x_j vanishes (numpy, no autodiff)."""
    x = np.asarray(construct(*key))
    pull = np.exp(2.0 * x @ x.T) @ x
    tangential = pull - np.sum(pull * x, axis=1, keepdims=True) * x
    assert np.abs(tangential).max() < 1e-12 * np.abs(pull).max()


# (n, d) of every fixed-size row of the MATH.md §8 table.
SIZES = {
    "icosahedron": (12, 3),
    "5-demicube": (16, 5),
    "600-cell": (120, 4),
    "schlafli": (27, 6),
    "gosset": (56, 7),
    "e8": (240, 8),
    "112-21": (112, 21),
    "162-21": (162, 21),
    "higman-sims": (100, 22),
    "mclaughlin": (275, 22),
    "891-22": (891, 22),
    "equiangular-552": (552, 23),
    "kissing-4600": (4600, 23),
    "leech": (196560, 24),
}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_table_rows_satisfy_the_design_conditions(name):
    """Each row is a sharp (2m − 1)-design (or the 600-cell, an 11-design), so
    Σ_k m_k P_j(t_k) = −1 for 1 ≤ j ≤ t (Delsarte–Goethals–Seidel, P_j(1) = 1), and the
    multiplicities add up to n − 1: a check of the transcribed [T] rows for typos."""
    n, d = SIZES[name]
    spectrum = theory.known_spectrum(name)
    assert sum(m for _, m in spectrum) == n - 1
    t = 11 if name == "600-cell" else 2 * len(spectrum) - 1
    lam = (d - 2) / 2
    for j in range(1, t + 1):
        norm = scipy.special.eval_gegenbauer(j, lam, 1.0)
        total = sum(m * scipy.special.eval_gegenbauer(j, lam, s) / norm for s, m in spectrum)
        assert total == pytest.approx(-1.0, abs=1e-9), f"degree {j}"
    assert float(theory.optimal_energy(name, 0.5)) > 0


def test_float32_constructors():
    x = theory.cell600(dtype=jnp.float32)
    assert x.dtype == jnp.float32
    assert float(jnp.abs(jnp.linalg.norm(x, axis=1) - 1).max()) < 1e-6


def test_bad_inputs():
    with pytest.raises(ValueError, match="at most d \\+ 1 = 4 vertices"):
        theory.simplex(5, 3)
    with pytest.raises(ValueError, match="known only through its spectrum"):
        theory.optimal_configuration("leech")
    with pytest.raises(ValueError, match="name: expected one of"):
        theory.optimal_configuration("dodecahedron")
    with pytest.raises(ValueError, match="n = 2d = 6, got 7"):
        theory.known_spectrum("cross-polytope", n=7, d=3)
    with pytest.raises(ValueError, match="needs n, got None"):
        theory.optimal_energy("polygon", 1.0)
    with pytest.raises(ValueError, match="n = 120, got 100"):
        theory.optimal_configuration("600-cell", n=100)
    with pytest.raises(ValueError, match="beta"):
        theory.optimal_energy("e8", -1.0)
