r"""Closed forms for the interaction energy on probability measures with a general bilinear form
(Burger, Kabri, Korolev, Roith, Weigand, arXiv:2501.03096, "BKKRW"):

    E(μ) = ∬ exp(xᵀ D y) dμ(x) dμ(y),   μ ∈ P(S^{d−1}),  D symmetric (d, d).

This is BKKRW's normalisation; attnflow's :class:`attnflow.InteractionEnergy` (paper (3.5)) is
E_β = E / (2β) with D = βA, i.e. ``E = 2β · InteractionEnergy(β, A)``.

The first variation is φ_μ(x) = δE/δμ(x) = 2 ∫ e^{xᵀDy} dμ(y) and the Wasserstein gradient is
∇_W E[μ](x) = P^⊥_x ∇φ_μ(x) = 2 P^⊥_x ∫ e^{xᵀDy} D y dμ(y). A measure is stationary when
∇_W E[μ] = 0 on supp μ.

Results stated here (each tested against an independent computation in tests/test_measures.py):

- Diracs: δ_v is stationary iff v is an eigenvector of D (P^⊥_v D v = 0).
- Uniform measure: ∫ e^{xᵀDy} dσ(y) = ψ_d(|Dx|) with ψ_d(r) = Γ(d/2)(2/r)^{d/2−1} I_{d/2−1}(r), so
  ∇_W E[σ](x) = 2 ψ_d'(|Dx|) P^⊥_x D²x / |Dx|: σ is stationary iff D² ∝ I.
- Maximum (proved below): max_μ E = max(e^{λ_max}, cosh λ_min), attained by δ_v at a top
  eigenvector or by the antipodal pair ½(δ_u + δ_{−u}) at a bottom eigenvector.
- Minimum: for λ_min < 0 ≤ λ_max ≤ |λ_min| (or D ≤ 0) the minimum is e^{λ_min}, attained only by
  δ_u at a bottom eigenvector (xᵀDy ≥ −‖D‖ = λ_min); for D ⪰ 0 singular the minimum is 1,
  attained exactly by the measures on ker D ∩ S^{d−1} (E = Σ_k (1/k!) ∬ (xᵀDy)^k dμdμ, each
  term ≥ 0 and the k = 2 term vanishes iff D^{1/2} x = 0 μ-a.e.); for D = βI, β > 0, σ is the
  unique minimiser (GLPR Prop. 3.4).
"""

import math

import numpy as np
import scipy.optimize
import scipy.special

from .._check import (
    check_positive_scalar,
    check_tolerance,
    check_unit_rows,
    real_arguments,
)

__all__ = [
    "antipodal_energy",
    "dirac_energy",
    "first_order_minimizer_coefficient",
    "first_order_minimizer_density",
    "maximizer",
    "maximum_energy",
    "maximizer_switch",
    "minimizer",
    "rectangle_critical_angle",
    "rectangle_energy",
    "uniform_potential",
    "uniform_wasserstein_gradient",
]


def _symmetric(D, name="D"):
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1] or D.shape[0] < 2:
        raise ValueError(
            f"{name}: expected a square (d, d) matrix with d >= 2, got shape {D.shape}"
        )
    if not np.all(np.isfinite(D)):
        raise ValueError(f"{name}: contains NaN or inf")
    asym = float(np.max(np.abs(D - D.T)))
    if asym > 1e-10 * max(1.0, float(np.max(np.abs(D)))):
        raise ValueError(f"{name}: expected a symmetric matrix, max |D - D^T| = {asym:.3g}")
    return (D + D.T) / 2


def _unit(v, d, name="v"):
    v = np.asarray(v, dtype=np.float64)
    if v.shape != (d,):
        raise ValueError(f"{name}: expected a vector of shape ({d},), got shape {v.shape}")
    norm = float(np.linalg.norm(v))
    if not np.isfinite(norm) or norm == 0:
        raise ValueError(f"{name}: expected a non-zero finite vector, got {v}")
    return v / norm


def dirac_energy(D, v) -> float:
    """E(δ_v) = exp(vᵀDv) for a unit vector v (v is normalised).

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> round(theory.dirac_energy(np.diag([1.0, -1.0]), [1.0, 0.0]), 6)  # e
        2.718282
    """
    D = _symmetric(D)
    v = _unit(v, D.shape[0])
    return float(np.exp(v @ D @ v))


def antipodal_energy(D, v) -> float:
    """E(½δ_v + ½δ_{−v}) = ½e^{vᵀDv} + ½e^{−vᵀDv} = cosh(vᵀDv) (v is normalised).

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> round(theory.antipodal_energy(-np.eye(2), [0.0, 1.0]), 6)  # cosh 1
        1.543081
    """
    D = _symmetric(D)
    v = _unit(v, D.shape[0])
    return float(np.cosh(v @ D @ v))


def maximum_energy(D) -> float:
    r"""max over P(S^{d−1}) of E(μ) = ∬ e^{xᵀDy} dμ dμ:  max(e^{λ_max}, cosh λ_min).

    Proof (derived for attnflow; BKKRW prove the D = diag(−1, d₂) crossover). Split
    D = D₊ − D₋ into positive and negative parts (D₊D₋ = 0) and write
    e^{−xᵀD₋y} = cosh(xᵀD₋y) − sinh(xᵀD₋y). The kernels e^{xᵀD₊y} and
    sinh(xᵀD₋y) = Σ_k (xᵀD₋y)^{2k+1}/(2k+1)! are positive semi-definite (Schur products), so
    ∬ e^{xᵀD₊y} sinh(xᵀD₋y) dμdμ ≥ 0 and E(μ) ≤ sup_{x,y} e^{xᵀD₊y} cosh(xᵀD₋y). With
    p = |P₊x||P₊y|, q = |P₋x||P₋y|, p + q ≤ 1 (Cauchy–Schwarz), this is at most
    max_{p ∈ [0,1]} exp(λ₊p + log cosh(λ₋(1 − p))), a convex function of p, hence at most
    max(e^{λ₊}, cosh λ₋) = max(e^{λ_max}, cosh λ_min). δ_v (v a top eigenvector) and the antipodal
    pair on a bottom eigenvector attain the two values.

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> round(theory.maximum_energy(np.diag([-1.0, 0.2])), 6)  # cosh 1 > e^0.2
        1.543081
    """
    lam = np.linalg.eigvalsh(_symmetric(D))
    return float(max(np.exp(lam[-1]), np.cosh(lam[0])))


@real_arguments(lam_min=None)
def maximizer_switch(lam_min) -> float:
    """The top eigenvalue at which the maximiser switches type: λ_max = log cosh λ_min.

    For λ_max > log cosh λ_min the maximiser is the Dirac δ_v at a top eigenvector; below, the
    antipodal pair at a bottom eigenvector (:func:`maximum_energy`). For D = diag(−1, d₂) the
    switch is at d₂ = log cosh 1 ≈ 0.4338 (BKKRW).

    Example:
        >>> from attnflow import theory
        >>> round(theory.maximizer_switch(-1.0), 4)
        0.4338
    """
    lam_min = float(lam_min)
    return float(np.logaddexp(lam_min, -lam_min) - math.log(2.0))


def maximizer(D):
    """A global maximiser of E(μ) as ``(points (k, d), weights (k,), kind)``.

    kind is ``"dirac"`` (δ_v at a top eigenvector, E = e^{λ_max}) when e^{λ_max} ≥ cosh λ_min,
    else ``"antipodal pair"`` (½δ_u + ½δ_{−u} at a bottom eigenvector, E = cosh λ_min).
    Proof in :func:`maximum_energy`. A multiple extreme eigenvalue gives a family of maximisers;
    one member is returned.

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> theory.maximizer(np.diag([-1.0, 0.2]))[2]
        'antipodal pair'
    """
    lam, vecs = np.linalg.eigh(_symmetric(D))
    if np.exp(lam[-1]) >= np.cosh(lam[0]):
        return vecs[:, -1:].T.copy(), np.ones(1), "dirac"
    u = vecs[:, 0]
    return np.stack([u, -u]), np.full(2, 0.5), "antipodal pair"


def minimizer(D, *, tol: float = 1e-12):
    """A proven global minimiser of E(μ) as ``(points, weights, kind, value)``, or ``None``.

    - ``"dirac"``: λ_min < 0 and λ_max ≤ |λ_min|: δ_u at a bottom eigenvector, E = e^{λ_min}
      (the kernel satisfies e^{xᵀDy} ≥ e^{−‖D‖} = e^{λ_min}, with equality only at x = y = ±u).
    - ``"kernel"``: D ⪰ 0 singular: any measure on ker D ∩ S^{d−1}, E = 1; returned: the
      antipodal pair on a kernel vector.
    - ``"uniform"``: D = βI, β > 0: σ, E = Γ(d/2)(2/β)^{d/2−1} I_{d/2−1}(β) (points ``None``).

    Other D (positive definite anisotropic, or indefinite with λ_max > |λ_min|) have no closed
    form here: ``None``; use :func:`attnflow.landscape.minimize_measure_energy`.

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> theory.minimizer(np.diag([0.0, 2.0]))[2:]
        ('kernel', 1.0)
    """
    tol = float(check_tolerance(tol, "tol"))
    D = _symmetric(D)
    d = D.shape[0]
    lam, vecs = np.linalg.eigh(D)
    scale = max(1.0, float(np.max(np.abs(lam))))
    if lam[0] < -tol * scale and lam[-1] <= -lam[0] + tol * scale:
        return vecs[:, :1].T.copy(), np.ones(1), "dirac", float(np.exp(lam[0]))
    if abs(lam[0]) <= tol * scale and lam[-1] > tol * scale:
        u = vecs[:, 0]
        return np.stack([u, -u]), np.full(2, 0.5), "kernel", 1.0
    if lam[0] > 0 and lam[-1] - lam[0] <= tol * scale:
        beta = float(lam[0])
        value = math.gamma(d / 2) * (2 / beta) ** (d / 2 - 1) * scipy.special.iv(d / 2 - 1, beta)
        return None, None, "uniform", float(value)
    return None


def _psi(r, d, derivative=False):
    """ψ_d(r) = ∫ e^{r⟨e, y⟩} dσ(y) = Γ(d/2)(2/r)^{d/2−1} I_{d/2−1}(r), or ψ_d'(r)."""
    r = np.asarray(r, dtype=np.float64)
    nu = d / 2 - 1 + (1 if derivative else 0)
    small = r < 1e-8
    rs = np.where(small, 1.0, r)
    value = math.gamma(d / 2) * (2 / rs) ** (d / 2 - 1) * scipy.special.ive(nu, rs) * np.exp(rs)
    limit = 0.0 if derivative else 1.0  # ψ(0) = 1, ψ'(0) = 0
    return np.where(small, limit, value)


def uniform_potential(D, x):
    """∫ e^{xᵀDy} dσ(y) = ψ_d(|Dx|), ψ_d(r) = Γ(d/2)(2/r)^{d/2−1} I_{d/2−1}(r) (Funk–Hecke).

    Half the first variation of E at the uniform measure σ. ``x``: (..., d) points.

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> round(float(theory.uniform_potential(np.eye(3), [0.0, 0.0, 1.0])), 6)  # sinh(1)/1
        1.175201
    """
    D = _symmetric(D)
    x = np.asarray(check_unit_rows(x, "x"), dtype=np.float64)
    if x.shape[-1] != D.shape[0]:
        raise ValueError(f"x: expected points of dimension {D.shape[0]}, got shape {x.shape}")
    return _psi(np.linalg.norm(x @ D, axis=-1), D.shape[0])


def uniform_wasserstein_gradient(D, x):
    """∇_W E[σ](x) = 2 P^⊥_x ∫ e^{xᵀDy} D y dσ(y) = 2 ψ_d'(|Dx|) P^⊥_x D² x / |Dx|.

    (∫ e^{zᵀy} y dσ(y) = ∇_z ψ_d(|z|) at z = Dx.) Zero for every x iff D² ∝ I: the uniform
    measure is stationary exactly then (BKKRW). ``x``: (..., d) unit points.

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> D = np.diag([1.0, -1.0])   # D² = I
        >>> float(np.abs(theory.uniform_wasserstein_gradient(D, [0.6, 0.8])).max()) < 1e-15
        True
    """
    D = _symmetric(D)
    x = np.asarray(check_unit_rows(x, "x"), dtype=np.float64)
    if x.shape[-1] != D.shape[0]:
        raise ValueError(f"x: expected points of dimension {D.shape[0]}, got shape {x.shape}")
    z = x @ D
    r = np.linalg.norm(z, axis=-1, keepdims=True)
    d2x = z @ D
    tangent = d2x - np.sum(d2x * x, axis=-1, keepdims=True) * x
    coef = _psi(r, D.shape[0], derivative=True) / np.where(r > 0, r, 1.0)
    return 2 * coef * tangent


@real_arguments(d1=None, d2=None, theta=None)
def rectangle_energy(d1, d2, theta):
    """E of ¼ Σ δ at (±cos θ, ±sin θ) with D = diag(d1, d2): cosh(d1 cos²θ) cosh(d2 sin²θ).

    Example:
        >>> from attnflow import theory
        >>> round(float(theory.rectangle_energy(1.0, 1.0, 0.0)), 6)  # antipodal pair: cosh 1
        1.543081
    """
    c2 = np.cos(np.asarray(theta, dtype=np.float64)) ** 2
    return np.cosh(d1 * c2) * np.cosh(d2 * (1 - c2))


@real_arguments(d1=None, d2=None)
def rectangle_critical_angle(d1, d2) -> float:
    """θ* ∈ (0, π/2) where the rectangle (±cos θ, ±sin θ) is critical for D = diag(d1, d2):

        d1 tanh(d1 cos²θ) = d2 tanh(d2 sin²θ).

    With s = cos²θ, g(s) = d1 tanh(d1 s) − d2 tanh(d2 (1 − s)) is strictly increasing from
    −d2 tanh d2 < 0 to d1 tanh d1 > 0, so the root is unique for any d1, d2 ≠ 0 (of any signs).
    Along the family the log-energy log cosh(d1 s) + log cosh(d2(1 − s)) is convex in s: θ* is
    its minimum within rectangles.

    Example:
        >>> from attnflow import theory
        >>> round(theory.rectangle_critical_angle(1.0, 1.0), 6)  # the square: π/4
        0.785398
    """
    d1, d2 = float(d1), float(d2)
    if d1 == 0 or d2 == 0 or not (np.isfinite(d1) and np.isfinite(d2)):
        raise ValueError(f"d1, d2: expected finite non-zero values, got d1 = {d1}, d2 = {d2}")

    def g(s):
        return d1 * np.tanh(d1 * s) - d2 * np.tanh(d2 * (1 - s))

    s = scipy.optimize.brentq(g, 0.0, 1.0, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    return float(np.arccos(np.sqrt(s)))


def first_order_minimizer_coefficient(beta: float = 1.0, d: int = 2) -> float:
    r"""κ_d(β) = β I_{d/2}(β) / I_{d/2+1}(β): the first-order minimiser for D = β(I + εM) is

        dμ_ε/dσ(x) = 1 − ε κ_d(β) (xᵀMx − tr M / d) + O(ε²).

    Derivation (attnflow). At ε = 0 the minimiser is σ (GLPR Prop. 3.4). Write
    μ_ε = (1 + εν)σ with ∫ν dσ = 0; a full-support minimiser has a constant first variation,
    ∫ e^{xᵀDy} dμ_ε(y) = const. Expanding e^{xᵀDy} = e^{βx·y}(1 + εβ xᵀMy + O(ε²)) and using
    Funk–Hecke, ∫ e^{βx·y} Y_k(y) dσ(y) = λ_k Y_k(x) with λ_k = Γ(d/2)(2/β)^{d/2−1} I_{k+d/2−1}(β)
    for spherical harmonics of degree k, the order-ε terms give
    λ_2 ν(x) = −β λ_1 xᵀMx + const, i.e. ν = −β(λ_1/λ_2)(xᵀMx − tr M/d).

    On the circle with M = diag(0, 1), xᵀMx − ½ = −½cos 2θ: the density is
    1 + (κ_2(1)/2) ε cos 2θ with κ_2(1)/2 = I_1(1)/(2 I_2(1)) ≈ 2.0817. BKKRW's stored
    minimisers (N = 1000 grid, exponentiated gradient) have cos 2θ coefficients 2.129 ε at
    ε = −0.05 and 2.033 ε at ε = 0.05, whose symmetric difference 2.081 agrees; the constant of
    their first-order ansatz does not, so it is not used.

    Example:
        >>> from attnflow import theory
        >>> round(theory.first_order_minimizer_coefficient(1.0, 2) / 2, 4)
        2.0817
    """
    beta = float(check_positive_scalar(beta, "beta"))
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
        raise ValueError(f"d: expected an integer dimension >= 2, got {d!r}")
    return float(beta * scipy.special.ive(d / 2, beta) / scipy.special.ive(d / 2 + 1, beta))


def first_order_minimizer_density(x, M, eps, beta: float = 1.0):
    """The first-order density dμ_ε/dσ(x) = 1 − ε κ_d(β)(xᵀMx − tr M/d) of the minimiser for
    D = β(I + εM) (:func:`first_order_minimizer_coefficient`). ``x``: (..., d) unit points.

    Example:
        >>> import numpy as np
        >>> from attnflow import theory
        >>> M = np.diag([0.0, 1.0])
        >>> round(float(theory.first_order_minimizer_density([1.0, 0.0], M, 0.01)), 5)
        1.02082
    """
    M = _symmetric(M, "M")
    d = M.shape[0]
    x = np.asarray(check_unit_rows(x, "x"), dtype=np.float64)
    if x.shape[-1] != d:
        raise ValueError(f"x: expected points of dimension {d}, got shape {x.shape}")
    quad = np.einsum("...i,ij,...j->...", x, M, x) - np.trace(M) / d
    return 1 - eps * first_order_minimizer_coefficient(beta, d) * quad
