"""Known energy-minimising configurations on the sphere (docs/maths.md §8): the targets of the
repulsive flow (V = −I, or ``GradientFlow(..., descent=True)``).

Cohn–Kumar (CK07, Thm 1.2) prove that every *sharp* configuration (m distinct inner products and
a (2m − 1)-design) and the 600-cell minimise the energy of every completely monotone potential of
the squared distance. Since exp(β⟨x, y⟩) = e^β exp(−β|x − y|²/2) and r ↦ e^{−βr/2} is completely
monotone, each of them is a global minimiser of the interaction energy E_β(X) = 1/(2βn²)
Σ_ij exp(β⟨x_i, x_j⟩) for every β > 0. The paper's Thm 9.2 states the implication in the reverse
direction, and its Def. 9.1 ("m > 1") would exclude the simplex; the CK07 forms are used here
(docs/maths.md §11.6).

Constructors return ``(n, d)`` arrays of unit vectors (float64 numbers cast to ``dtype``). The
spectrum table :data:`KNOWN_SPECTRA` also lists optima that are only known through their
inner products (Schläfli, Gosset, Leech, …), so :func:`optimal_energy` covers them too.
"""

import itertools
import math

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import (
    MAX_GRID_POINTS,
    check_beta,
    check_int,
    check_size,
    check_tokens,
    check_tolerance,
)

_PHI = (1 + math.sqrt(5)) / 2


def _as_tokens(points: np.ndarray, dtype) -> Float[Array, "n d"]:
    points = points / np.linalg.norm(points, axis=-1, keepdims=True)
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    return jnp.asarray(points, dtype=dtype)


def simplex(n: int, d: int | None = None, dtype=None) -> Float[Array, "n d"]:
    """The regular simplex: n unit vectors in R^d with ⟨x_i, x_j⟩ = −1/(n − 1) for i ≠ j.

    Needs n ≤ d + 1; ``d`` defaults to n − 1 (at least 2). For n ≤ d + 1 it is the unique
    minimiser of E_β for every β (Jensen: Σ_{i≠j}⟨x_i, x_j⟩ ≥ −n, docs/maths.md §8).

    Example:
        >>> from attnflow import theory
        >>> x = theory.simplex(4, 3)
        >>> x.shape, round(float(x[0] @ x[1]), 6)
        ((4, 3), -0.333333)
    """
    n = check_size(n, "n", low=1)
    d = max(n - 1, 2) if d is None else check_size(d, "d", low=None)
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    if n > d + 1:
        raise ValueError(
            f"n: a regular simplex in R^{d} has at most d + 1 = {d + 1} vertices, got n = {n}"
        )
    if n == 1:
        return _as_tokens(np.eye(1, d), dtype)
    centred = np.eye(n) - 1.0 / n
    # An orthonormal basis of 1^⊥ (the first n − 1 left singular vectors) maps the simplex,
    # which lives in the (n − 1)-dimensional hyperplane Σ x = 0, isometrically into R^{n−1}.
    basis = np.linalg.svd(centred)[0][:, : n - 1]
    points = np.zeros((n, d))
    points[:, : n - 1] = centred @ basis
    return _as_tokens(points, dtype)


def cross_polytope(d: int, dtype=None) -> Float[Array, "n d"]:
    """The cross-polytope {±e_1, …, ±e_d}: n = 2d points, inner products −1 (×1) and 0 (×2d−2).

    Example:
        >>> from attnflow import theory
        >>> theory.cross_polytope(3).shape
        (6, 3)
    """
    d = check_size(d, "d", low=None)
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    eye = np.eye(d)
    return _as_tokens(np.concatenate([eye, -eye]), dtype)


def regular_polygon(n: int, dtype=None) -> Float[Array, "n 2"]:
    """The regular n-gon on the circle S^1: x_k = (cos 2πk/n, sin 2πk/n), k = 0 … n−1.

    Example:
        >>> from attnflow import theory
        >>> round(float(theory.regular_polygon(4)[1, 1]), 6)
        1.0
    """
    n = check_size(n, "n", low=1)
    angles = 2 * np.pi * np.arange(n) / n
    return _as_tokens(np.stack([np.cos(angles), np.sin(angles)], axis=1), dtype)


def icosahedron(dtype=None) -> Float[Array, "12 3"]:
    """The 12 vertices of the regular icosahedron: cyclic permutations of (0, ±1, ±φ), normalised.

    Inner products −1 (×1) and ±1/√5 (×5 each); a sharp 5-design.

    Example:
        >>> from attnflow import theory
        >>> theory.icosahedron().shape
        (12, 3)
    """
    points = [
        np.roll([0.0, s1, s2 * _PHI], k) for k in range(3) for s1 in (1, -1) for s2 in (1, -1)
    ]
    return _as_tokens(np.array(points), dtype)


def demicube5(dtype=None) -> Float[Array, "16 5"]:
    """The 5-demicube (Clebsch configuration): (±1, …, ±1)/√5 with an even number of minus signs.

    16 points in R^5; inner products (5 − 2·Hamming)/5, i.e. −3/5 (×5) and 1/5 (×10).

    Example:
        >>> from attnflow import theory
        >>> theory.demicube5().shape
        (16, 5)
    """
    signs = np.array([s for s in itertools.product((1.0, -1.0), repeat=5) if np.prod(s) > 0])
    return _as_tokens(signs, dtype)


def _even_permutations(m: int):
    for perm in itertools.permutations(range(m)):
        inversions = sum(perm[i] > perm[j] for i in range(m) for j in range(i + 1, m))
        if inversions % 2 == 0:
            yield perm


def cell600(dtype=None) -> Float[Array, "120 4"]:
    """The 120 vertices of the 600-cell in R^4 (unit quaternions of the binary icosahedral group):

    the 8 permutations of (±1, 0, 0, 0), the 16 points (±½, ±½, ±½, ±½) and the 96 even
    permutations of ½(±φ, ±1, ±1/φ, 0). Not sharp (8 distinct inner products) but an 11-design;
    CK07 prove it universally optimal.

    Example:
        >>> from attnflow import theory
        >>> theory.cell600().shape
        (120, 4)
    """
    points = [sign * row for row in np.eye(4) for sign in (1.0, -1.0)]
    points += [np.array(s) for s in itertools.product((0.5, -0.5), repeat=4)]
    base = np.array([_PHI, 1.0, 1.0 / _PHI, 0.0]) / 2
    for perm in _even_permutations(4):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            vector = base * np.array([*signs, 1.0])
            points.append(vector[list(perm)])
    return _as_tokens(np.array(points), dtype)


def e8_roots(dtype=None) -> Float[Array, "240 8"]:
    """The 240 roots of E_8, normalised: the 112 vectors (±1, ±1, 0⁶) in every position and the 128
    vectors (±½)⁸ with an even number of minus signs, divided by √2.

    Inner products −1 (×1), ±½ (×56 each), 0 (×126); a sharp 7-design.

    Example:
        >>> from attnflow import theory
        >>> theory.e8_roots().shape
        (240, 8)
    """
    points = []
    for i, j in itertools.combinations(range(8), 2):
        for si, sj in itertools.product((1.0, -1.0), repeat=2):
            v = np.zeros(8)
            v[i], v[j] = si, sj
            points.append(v)
    points += [np.array(s) / 2 for s in itertools.product((1.0, -1.0), repeat=8) if np.prod(s) > 0]
    return _as_tokens(np.array(points), dtype)


def _polygon_spectrum(n: int) -> tuple[tuple[float, float], ...]:
    values = {}
    for k in range(1, n):
        # cos(2πk/n) = cos(2π(n−k)/n): key by min(k, n − k) so equal values merge exactly.
        key = min(k, n - k)
        values[key] = values.get(key, 0) + 1
    return tuple(sorted((math.cos(2 * math.pi * k / n), float(m)) for k, m in values.items()))


def _require(name, value, what):
    if value is None:
        raise ValueError(f"{what}: the {name!r} family needs {what}, got None")
    return check_int(value, what)


KNOWN_SPECTRA = {
    "simplex": lambda n, d: ((-1.0 / (n - 1), float(n - 1)),) if n > 1 else (),
    "cross-polytope": lambda n, d: ((-1.0, 1.0), (0.0, float(2 * d - 2))),
    "polygon": lambda n, d: _polygon_spectrum(n),
    "icosahedron": lambda n, d: ((-1.0, 1.0), (-(5**-0.5), 5.0), (5**-0.5, 5.0)),
    "5-demicube": lambda n, d: ((-0.6, 5.0), (0.2, 10.0)),
    "600-cell": lambda n, d: (
        tuple(
            (s * v, m)
            for v, m in (((1 + 5**0.5) / 4, 12.0), (0.5, 20.0), ((5**0.5 - 1) / 4, 12.0))
            for s in (-1.0, 1.0)
        )
        + ((-1.0, 1.0), (0.0, 30.0))
    ),
    "schlafli": lambda n, d: ((-0.5, 10.0), (0.25, 16.0)),
    "gosset": lambda n, d: ((-1.0, 1.0), (-1 / 3, 27.0), (1 / 3, 27.0)),
    "e8": lambda n, d: ((-1.0, 1.0), (-0.5, 56.0), (0.0, 126.0), (0.5, 56.0)),
    "112-21": lambda n, d: ((-1 / 3, 30.0), (1 / 9, 81.0)),
    "162-21": lambda n, d: ((-2 / 7, 56.0), (1 / 7, 105.0)),
    "higman-sims": lambda n, d: ((-4 / 11, 22.0), (1 / 11, 77.0)),
    "mclaughlin": lambda n, d: ((-0.25, 112.0), (1 / 6, 162.0)),
    "891-22": lambda n, d: ((-0.5, 42.0), (-0.125, 512.0), (0.25, 336.0)),
    "equiangular-552": lambda n, d: ((-1.0, 1.0), (-0.2, 275.0), (0.2, 275.0)),
    "kissing-4600": lambda n, d: ((-1.0, 1.0), (-1 / 3, 891.0), (0.0, 2816.0), (1 / 3, 891.0)),
    "leech": lambda n, d: (
        (-1.0, 1.0),
        (-0.5, 4600.0),
        (-0.25, 47104.0),
        (0.0, 93150.0),
        (0.25, 47104.0),
        (0.5, 4600.0),
    ),
}
"""Inner products : average multiplicity per point of the known optima, docs/maths.md §8 table.

Rows "schlafli" … "leech" are transcribed from Cohn's list of universal optima (CK07 Table 1,
transcribed, not checked: not constructed here). Each value is a function of (n, d) so the
families (simplex, cross-polytope, polygon) fit the same table.
"""

_SIZES = {
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


def _size(name: str, n: int | None, d: int | None) -> tuple[int, int]:
    if name not in KNOWN_SPECTRA:
        raise ValueError(f"name: expected one of {sorted(KNOWN_SPECTRA)}, got {name!r}")
    if name in _SIZES:
        fixed = _SIZES[name]
        for label, given, value in (("n", n, fixed[0]), ("d", d, fixed[1])):
            if given is not None and check_int(given, label) != value:
                raise ValueError(
                    f"{label}: the {name} configuration has {label} = {value}, got {given}"
                )
        return fixed
    if name == "simplex":
        n = _require(name, n, "n")
        d = max(n - 1, 2) if d is None else check_size(d, "d", low=None)
        if n > d + 1:
            raise ValueError(
                f"n: a regular simplex in R^{d} has at most {d + 1} vertices, got n = {n}"
            )
        return n, d
    if name == "cross-polytope":
        d = _require(name, d, "d")
        if n is not None and check_size(n, "n", low=None) != 2 * d:
            raise ValueError(f"n: the cross-polytope in R^{d} has n = 2d = {2 * d}, got {n}")
        return 2 * d, d
    n = _require(name, n, "n")
    if d is not None and check_size(d, "d", low=None) != 2:
        raise ValueError(f"d: the regular polygon lives on the circle, d = 2, got {d}")
    return n, 2


def known_spectrum(
    name: str, *, n: int | None = None, d: int | None = None
) -> tuple[tuple[float, float], ...]:
    """Distinct inner products of a known optimum with their average multiplicity per point.

    ``name`` is a key of :data:`KNOWN_SPECTRA`; the families need ``n`` (simplex, polygon) or
    ``d`` (cross-polytope). Values are sorted ascending; multiplicities sum to n − 1.

    Example:
        >>> from attnflow import theory
        >>> theory.known_spectrum("cross-polytope", d=3)
        ((-1.0, 1.0), (0.0, 4.0))
    """
    n, d = _size(name, n, d)
    return tuple(sorted(KNOWN_SPECTRA[name](n, d)))


def optimal_energy(
    name: str, beta, *, n: int | None = None, d: int | None = None
) -> Float[Array, ""]:
    """E_β of a known optimum from its inner-product spectrum, without constructing it:

        E_β = 1/(2βn²) Σ_ij exp(β⟨x_i, x_j⟩) = e^β/(2βn) · (1 + Σ_k m_k exp(β(t_k − 1))),

    the particle energy of §3.3 (paper (3.5) with weights 1/n); (t_k, m_k) = :func:`known_spectrum`.
    The factored form is overflow-safe up to e^β itself. Differentiable in β.

    Example:
        >>> from attnflow import theory
        >>> round(float(theory.optimal_energy("simplex", 1.0, n=3)), 6)  # (e + 2e^{-1/2})/6
        0.655224
    """
    beta = jnp.asarray(check_beta(beta, positive=True))
    n, d = _size(name, n, d)
    spectrum = KNOWN_SPECTRA[name](n, d)
    total = 1.0 + sum(m * jnp.exp(beta * (t - 1.0)) for t, m in spectrum)
    return jnp.exp(beta) / (2 * beta * n) * total


_CONSTRUCTORS = {
    "simplex": lambda n, d, dtype: simplex(n, d, dtype),
    "cross-polytope": lambda n, d, dtype: cross_polytope(d, dtype),
    "polygon": lambda n, d, dtype: regular_polygon(n, dtype),
    "icosahedron": lambda n, d, dtype: icosahedron(dtype),
    "5-demicube": lambda n, d, dtype: demicube5(dtype),
    "600-cell": lambda n, d, dtype: cell600(dtype),
    "e8": lambda n, d, dtype: e8_roots(dtype),
}


def optimal_configuration(
    name: str, *, n: int | None = None, d: int | None = None, dtype=None
) -> Float[Array, "n d"]:
    """Construct a known optimum by name: "simplex" (n, optional d), "cross-polytope" (d),
    "polygon" (n), "icosahedron", "5-demicube", "600-cell", "e8".

    The remaining rows of :data:`KNOWN_SPECTRA` are known only through their spectra; asking for
    them raises a ValueError (use :func:`optimal_energy` for their energies).

    Example:
        >>> from attnflow import theory
        >>> theory.optimal_configuration("polygon", n=5).shape
        (5, 2)
    """
    n, d = _size(name, n, d)
    if name not in _CONSTRUCTORS:
        raise ValueError(
            f"name: {name!r} is known only through its spectrum (not constructed); "
            f"constructible: {sorted(_CONSTRUCTORS)}"
        )
    return _CONSTRUCTORS[name](n, d, dtype)


def inner_product_spectrum(
    x: Float[Array | np.ndarray, "n d"], tol: float = 1e-6
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct inner products ⟨x_i, x_j⟩ (i ≠ j) with their average multiplicity per point.

    Sorted off-diagonal Gram entries are split wherever consecutive values differ by more than
    ``tol``; each group gives its mean value and size/n. Multiplicities sum to n − 1. Runs in
    numpy (the output size depends on the data, so it cannot be traced).

    Returns:
        ``(values, multiplicities)``: two float64 arrays of equal length, values ascending.

    Example:
        >>> from attnflow import theory
        >>> values, mult = theory.inner_product_spectrum(theory.icosahedron())
        >>> [round(float(v), 4) for v in values], mult.tolist()
        ([-1.0, -0.4472, 0.4472], [1.0, 5.0, 5.0])
    """
    x = check_tokens(x)
    tol = check_tolerance(tol, "tol")
    points = np.asarray(x, dtype=np.float64)
    n = points.shape[0]
    if n < 2:
        return np.zeros(0), np.zeros(0)
    gram = points @ points.T
    entries = np.sort(gram[~np.eye(n, dtype=bool)])
    breaks = np.flatnonzero(np.diff(entries) > tol) + 1
    groups = np.split(entries, breaks)
    return (
        np.array([g.mean() for g in groups]),
        np.array([g.size / n for g in groups], dtype=np.float64),
    )


def _zonal_polynomials(t: np.ndarray, d: int, degree: int) -> np.ndarray:
    """P_k(t), k = 0 … degree: Gegenbauer C_k^λ(t)/C_k^λ(1), λ = (d−2)/2 (Chebyshev T_k for d = 2).

    The three-term recurrence k C_k = 2(k+λ−1) t C_{k−1} − (k+2λ−2) C_{k−2} divided by C_k(1);
    at λ = 0 it reduces to T_k = 2t T_{k−1} − T_{k−2}.
    """
    values = [np.ones_like(t), t.copy()]
    lam = (d - 2) / 2
    for k in range(2, degree + 1):
        values.append(
            (2 * (k + lam - 1) * t * values[-1] - (k - 1) * values[-2]) / (k + 2 * lam - 1)
        )
    return np.stack(values[: degree + 1])


def design_strength(
    x: Float[Array | np.ndarray, "n d"], max_degree: int = 20, tol: float = 1e-8
) -> int:
    """The largest t ≤ ``max_degree`` such that x is a spherical t-design (docs/maths.md §8,
    Def. 9.1).

    Uses the Delsarte–Goethals–Seidel criterion: x is a t-design iff
    (1/n²) Σ_ij P_k(⟨x_i, x_j⟩) = 0 for k = 1 … t, with P_k the Gegenbauer polynomial of index
    (d − 2)/2 normalised to P_k(1) = 1 (Chebyshev on the circle). Each sum lies in [0, 1]; it
    counts as zero below ``tol``.

    Example:
        >>> from attnflow import theory
        >>> theory.design_strength(theory.icosahedron())
        5
    """
    x = check_tokens(x)
    max_degree = check_size(
        max_degree,
        "max_degree",
        per_unit=x.shape[0] ** 2,
        limit=MAX_GRID_POINTS,
        what="zonal polynomial evaluations (max_degree × n²)",
    )
    tol = check_tolerance(tol, "tol")
    points = np.asarray(x, dtype=np.float64)
    n, d = points.shape
    gram = np.clip(points @ points.T, -1.0, 1.0)
    sums = _zonal_polynomials(gram, d, max_degree).sum(axis=(1, 2)) / n**2
    for k in range(1, max_degree + 1):
        if abs(sums[k]) > tol:
            return k - 1
    return max_degree


__all__ = [
    "KNOWN_SPECTRA",
    "cell600",
    "cross_polytope",
    "demicube5",
    "design_strength",
    "e8_roots",
    "icosahedron",
    "inner_product_spectrum",
    "known_spectrum",
    "optimal_configuration",
    "optimal_energy",
    "regular_polygon",
    "simplex",
]
