r"""Where rescaled tokens go for a general value matrix V: the limit geometries of GLPR23.

Geshkovski, Letrouit, Polyanskiy, Rigollet, "The emergence of clusters in self-attention
dynamics" (arXiv:2305.05465; Table 1 of arXiv:2312.10794, docs/maths.md §1.8). Pure self-attention
(9.1) on R^d, ẋ_i = Σ_j a_ij V x_j, is studied through z_i(t) = e^{−tV} x_i(t), which solves (9.3)
(:class:`attnflow.RescaledSelfAttention`). As t → ∞:

| V | Q, K | z_i(t) tends to |
|---|---|---|
| I_d | QᵀK symmetric ≻ 0 | 0 or a point of ∂K, K a convex polytope (Thm 3.1) |
| good triple: λ₁ > |λ₂| ≥ … | ⟨Qφ₁, Kφ₁⟩ > 0 | ≤ 3 parallel hyperplanes {ψ₁·z = c} (Thm 4.1) |
| paranormal | QᵀK symmetric ≻ 0 | (∂K ∪ {0}) × G (Thm 5.1) |
| −I_d | QᵀK = I_d | one cluster at the origin, for the unscaled x |

**V = I_d (Theorem 3.1).** With A = QᵀK symmetric positive definite (the proof uses A^{1/2}),
each z_i converges either to 0 or to a point of the boundary ∂K of a convex polytope K; for
generic initial data the limits are vertices of K.

**Good triple (Theorem 4.1).** The eigenvalue of largest *modulus* is real, positive and simple,
λ₁ > |λ₂| ≥ … ≥ |λ_d| (eigenvalues counted with multiplicity), and ⟨Qφ₁, Kφ₁⟩ > 0 for its
eigenvector φ₁. Ordering by real part is not enough: for V = diag(1, −2) the component along
e₂ grows like e^{2t} and the rescaled tokens diverge.

ψ₁ is the left eigenvector of λ₁ (ψ₁ᵀV = λ₁ψ₁ᵀ): ψ₁·z is the coordinate along φ₁ in the
decomposition R^d = span φ₁ ⊕ (the other generalised eigenspaces), the only one that grows like
e^{λ₁t} in x = e^{tV}z and therefore the only one the attention sees as t → ∞.

**Paranormal** (GLPR23 §5, Theorem 5.1): V is paranormal when R^d = F ⊕ G with F and G
invariant under V, V restricted to F equal to λ·Id with λ > 0, and every eigenvalue of V
restricted to G (real or complex) of modulus < λ. Equivalently: the eigenvalue λ of largest
modulus is real, positive and semisimple (F = ker(V − λI), G = range(V − λI)), and every other
eigenvalue has modulus < λ; an eigenvalue −λ or λe^{iθ} excludes paranormality, and so does a
Jordan block at λ. The conclusion is the limit set (∂K ∪ {0}) × G: the F-component of z (in
the decomposition F ⊕ G) converges to 0 or to ∂K of a polytope K ⊂ F, the G-component is free.
Here F and G are the attributes ``C`` and ``H`` of :class:`attnflow.models.ValueSpectrum`.
The authors' example
is V = diag(1, −0.5): F = span e_1, λ = 1, G = span e_2.

**V = −I (derived here): the collapse is algebraic.** With Q = K = I, for small tokens
a_ij ≈ (1 + ⟨x_i, x_j − x̄⟩)/n, so the mean x̄ decays like e^{−t} and the deviations
y_i = x_i − x̄ follow ẏ_i = −C y_i with C = (1/n) Σ_j y_j y_jᵀ: Ċ = −2C² + O(|x|⁴),
C(t) ≈ C(0)(I + 2tC(0))^{−1} → I/(2t), and |x_i(t)| ~ (2t)^{−1/2} (checked in the tests).

**d = 1 (GLPR23 §2).** With V > 0 and QK > 0 the logits are QK e^{2tV} z_i z_j, so row i of
the attention matrix tends to the indicator of the largest z_j (if z_i > 0) or of the smallest
(if z_i < 0): a Boolean matrix, except possibly one row, which can be a general probability
vector (a token with z_i → 0: for z = (−1, 0, 1) the middle row stays (1/3, 1/3, 1/3)).
:attr:`attnflow.models.LimitGeometry.general_rows` lists the rows that are not Boolean.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from .._check import check_beta, check_finite_scalar, check_real_values, check_tolerance
from .._fields._pure import unrescale
from .._fields._self_attention import SelfAttention


class ValueSpectrum(eqx.Module):
    """Spectral data of a value matrix V and the hypotheses of GLPR23 (see the module docstring).

    Attributes:
        eigenvalues: (d,) complex eigenvalues, by decreasing modulus (ties: larger real part
            first).
        phi1, psi1: (d,) real parts of the right and left eigenvectors of the eigenvalue λ₁ of
            largest modulus, scaled so that ψ₁·φ₁ = 1 (meaningful when λ₁ is real).
        top_simple_positive: λ₁ is real, positive and simple, and λ₁ > |λ₂| ≥ … ≥ |λ_d| (the
            good-triple condition on V of Theorem 4.1).
        hyperplane_condition: ``top_simple_positive`` and ⟨Qφ₁, Kφ₁⟩ > 0 (Theorem 4.1).
        paranormal: V is paranormal (Theorem 5.1; definition in the module docstring).
        paranormal_lambda: λ (nan when not paranormal).
        C, H: (d, f) and (d, d − f) bases of the invariant subspaces F (V|F = λ·Id) and G
            (empty when not paranormal).
        gram_symmetric: QᵀK is symmetric (to ``rtol``).
        gram_definite: QᵀK + KᵀQ ≻ 0, i.e. xᵀQᵀKx > 0 for x ≠ 0.
        gram_positive: ``gram_symmetric`` and ``gram_definite``: A = QᵀK symmetric positive
            definite, the hypothesis of Theorems 3.1 and 5.1.
    """

    eigenvalues: np.ndarray
    phi1: np.ndarray
    psi1: np.ndarray
    top_simple_positive: bool = eqx.field(static=True)
    hyperplane_condition: bool = eqx.field(static=True)
    paranormal: bool = eqx.field(static=True)
    paranormal_lambda: float = eqx.field(static=True)
    C: np.ndarray
    H: np.ndarray
    gram_symmetric: bool = eqx.field(static=True)
    gram_definite: bool = eqx.field(static=True)
    gram_positive: bool = eqx.field(static=True)


def _square(V, name="V"):
    V = np.asarray(check_real_values(V, name), dtype=float)
    if V.ndim != 2 or V.shape[0] != V.shape[1] or V.shape[0] < 1:
        raise ValueError(f"{name}: expected a square (d, d) matrix, got shape {V.shape}")
    return V


def _qk(Q, K, d):
    out = []
    for name, M in (("Q", Q), ("K", K)):
        M = np.eye(d) if M is None else np.asarray(check_real_values(M, name), dtype=float)
        if M.ndim != 2 or M.shape[1] != d:
            raise ValueError(f"{name}: expected a (k, {d}) matrix, got shape {M.shape}")
        out.append(M)
    if out[0].shape != out[1].shape:
        raise ValueError(f"Q, K: expected equal shapes, got {out[0].shape} and {out[1].shape}")
    return out


def value_spectrum(V, Q=None, K=None, *, rtol=1e-8) -> ValueSpectrum:
    r"""Eigen-decomposition of V and which hypotheses of GLPR23 (arXiv:2305.05465) hold: the
    good triple of Theorem 4.1 (λ₁ > |λ₂| ≥ … ≥ |λ_d|, ⟨Qφ₁, Kφ₁⟩ > 0), paranormality
    (Theorem 5.1), A = QᵀK symmetric positive definite (Theorems 3.1, 5.1).

    Args:
        V: (d, d) value matrix.
        Q, K: (k, d) query and key matrices (identity when omitted).
        rtol: relative tolerance (times max(1, ‖V‖)) for equal eigenvalues and zero parts.
            Eigenvalues are also counted as equal when they are closer than their perturbation
            bound, 50·(κ_i + κ_j)·eps·‖V‖ with κ the eigenvalue condition numbers and eps that
            of V's dtype (float32 or float64): a Jordan block is "not simple" in every basis
            (rounding splits it by about √eps·‖V‖), while a simple eigenvalue at gap g from
            the others is told apart when g ≳ √(100·eps·‖V‖) (2e-7 in float64 for ‖V‖ = 1,
            5e-3 in float32).

    Example:
        >>> import numpy as np, attnflow as af
        >>> s = af.models.value_spectrum(np.diag([1.0, -0.5]))
        >>> s.paranormal, s.top_simple_positive, s.paranormal_lambda
        (True, True, 1.0)
        >>> af.models.value_spectrum(np.diag([1.0, -2.0])).top_simple_positive  # |−2| > 1
        False
    """
    eps = _input_eps(V)
    V = _square(V)
    d = V.shape[0]
    Q, K = _qk(Q, K, d)
    rtol = float(check_tolerance(rtol, "rtol"))
    norm = float(np.linalg.norm(V, 2))
    tol = rtol * max(1.0, norm)
    w, vl, vr = scipy.linalg.eig(V, left=True, right=True)
    # Largest modulus first; among equal moduli, the larger real part (λ before −λ, λe^{±iθ}).
    order = np.lexsort((-np.abs(w.imag), -w.real, -np.round(np.abs(w) / tol)))
    w, vl, vr = w[order], vl[:, order], vr[:, order]
    # Eigenvalue condition numbers κ_j = ‖ψ_j‖‖φ_j‖ / |ψ_jᴴφ_j| (scipy's vectors have unit
    # norm): a backward error δ = eps·‖V‖ moves a simple λ_j by about κ_j·δ, and splits a
    # defective one by about δ^{1/m}, which makes its κ_j about δ^{1/m − 1}. Two eigenvalues
    # closer than _SPLIT·(κ_i + κ_j)·δ cannot be told apart in this basis: they count as one
    # multiple eigenvalue, whatever the rotation of V (a fixed tolerance does not: rounding
    # splits a Jordan block by √eps·‖V‖, above rtol·‖V‖ in some bases and not in others).
    kappa = 1.0 / np.maximum(np.abs(np.sum(np.conj(vl) * vr, axis=0)), np.finfo(float).tiny)
    delta = eps * max(norm, np.finfo(float).tiny)
    spread = np.maximum(tol, _SPLIT * (kappa[0] + kappa) * delta)  # (d,) distance from λ₁
    phi, psi = vr[:, 0], vl[:, 0]
    scale = np.vdot(psi, phi)  # ψᴴφ; left eigenvectors from scipy satisfy ψᴴ V = λ ψᴴ
    psi = psi / np.conj(scale)
    phi1, psi1 = phi.real.copy(), psi.real.copy()
    lam1 = w[0]
    cluster = np.abs(w - lam1) <= spread
    cluster[0] = True
    real_positive = abs(lam1.imag) <= spread[0] and lam1.real > tol
    simple = int(cluster.sum()) == 1
    top = real_positive and simple and bool(np.all(np.abs(w[1:]) < lam1.real - spread[1:]))
    gram = Q.T @ K
    hyper = bool(top and float((Q @ phi1) @ (K @ phi1)) > 0)
    gram_scale = max(1.0, float(np.linalg.norm(gram, 2)))
    gram_symmetric = bool(np.max(np.abs(gram - gram.T), initial=0.0) <= rtol * gram_scale)
    gram_definite = bool(np.linalg.eigvalsh(gram + gram.T).min() > rtol * gram_scale)
    lam_mean = float(
        np.mean(w[cluster].real)
    )  # a split multiple eigenvalue: its mean is exact to O(δ)
    para, C, H = _paranormal(V, w, lam_mean, tol, cluster) if real_positive else (False, None, None)
    return ValueSpectrum(
        eigenvalues=w,
        phi1=phi1,
        psi1=psi1,
        top_simple_positive=bool(top),
        hyperplane_condition=hyper,
        paranormal=para,
        paranormal_lambda=float(lam1.real) if para else float("nan"),
        C=np.zeros((d, 0)) if C is None else C,
        H=np.zeros((d, 0)) if H is None else H,
        gram_symmetric=gram_symmetric,
        gram_definite=gram_definite,
        gram_positive=gram_symmetric and gram_definite,
    )


# How many condition-scaled backward errors apart two eigenvalues must be to count as distinct.
# Measured (tests/test_limit_geometry.py): a Jordan block at the top eigenvalue, in 300 random
# orthogonal bases, float32 and float64, splits by at most 8 of them; a simple eigenvalue at gap g
# from the next one is g²/(2·eps·‖V‖) of them (8.8e5 at g = 1e-5 in float64).
_SPLIT = 50.0


def _input_eps(V) -> float:
    """Machine epsilon of the precision V was given in (float64 for lists and integers)."""
    kind = getattr(V, "dtype", None)
    if kind is not None and np.issubdtype(np.dtype(kind), np.floating):
        return float(np.finfo(np.dtype(kind)).eps)
    return float(np.finfo(np.float64).eps)


def _paranormal(V, w, lam, tol, cluster):
    """(paranormal, F basis, G basis) for the top-modulus eigenvalue λ > 0 of V (GLPR23,
    Theorem 5.1): λ semisimple, every other eigenvalue of modulus < λ; F = ker(V − λI),
    G = range(V − λI). ``cluster``: the computed eigenvalues that are λ (conditioning-scaled)."""
    d = V.shape[0]
    same = cluster | (np.abs(w - lam) <= np.sqrt(tol))
    rest = w[~same]
    if rest.size and np.abs(rest).max() >= lam - tol:
        return False, None, None
    u, s, vh = np.linalg.svd(V - lam * np.eye(d))
    rank = int(np.sum(s > np.sqrt(tol) * max(1.0, s.max(initial=0.0))))
    if rank != d - int(same.sum()):  # a Jordan block at λ: not λ·Id on any complement
        return False, None, None
    return True, vh[rank:].T.copy(), u[:, :rank].copy()


def _hull_vertices(points: np.ndarray, tol: float) -> np.ndarray:
    """Indices of the vertices of the convex hull of ``points`` (m, k), in their affine span."""
    from scipy.spatial import ConvexHull, QhullError

    m = points.shape[0]
    if m <= 2:
        return np.arange(m)
    centred = points - points.mean(axis=0)
    u, s, vh = np.linalg.svd(centred, full_matrices=False)
    rank = int(np.sum(s > tol * max(s.max(initial=0.0), 1e-300)))
    if rank == 0:
        return np.array([0])
    coords = centred @ vh[:rank].T
    if rank == 1:
        return np.unique([int(np.argmin(coords[:, 0])), int(np.argmax(coords[:, 0]))])
    try:
        return np.sort(ConvexHull(coords).vertices)
    except QhullError:  # nearly degenerate: joggle
        return np.sort(ConvexHull(coords, qhull_options="QJ").vertices)


def _levels(values: np.ndarray, tol: float):
    """Group 1-d values into levels split at gaps > tol · spread; returns (levels, labels)."""
    order = np.argsort(values)
    v = values[order]
    spread = max(float(v[-1] - v[0]), 1e-300)
    starts = np.concatenate([[True], np.diff(v) > tol * spread])
    group = np.cumsum(starts) - 1
    labels = np.empty(values.shape[0], dtype=int)
    labels[order] = group
    levels = np.array([v[group == g].mean() for g in range(group[-1] + 1)])
    return levels, labels


class LimitGeometry(eqx.Module):
    """The result of :func:`attnflow.models.limit_geometry` (distances are relative to the
    diameter of z).

    Attributes:
        spectrum: the :class:`attnflow.models.ValueSpectrum` of V.
        hull_vertices: indices of the tokens that are vertices of the convex hull of z.
        vertex_distance: (n,) distance of each z_i to the nearest hull vertex.
        on_vertex: (n,) ``vertex_distance ≤ tol``.
        levels: distinct values of ψ₁·z (the hyperplanes), ascending; ``level_labels`` (n,).
        num_levels: ``len(levels)``.
        subspace_coordinates: (n, c) coordinates of z along C in the decomposition C ⊕ H
            (paranormal V; (n, 0) otherwise); ``subspace_vertex_distance``: (n,) distance of
            these coordinates to the vertices of their convex hull (the polytope in C).
        attention: (n, n) attention matrix at the configuration; ``boolean_distance``:
            max_ij min(a_ij, 1 − a_ij); ``attention_rank``: rank of the rounded (Boolean) matrix.
        general_rows: indices of the rows of ``attention`` farther than ``tol`` from a Boolean
            row (max_j min(a_ij, 1 − a_ij) > tol); at most one in the d = 1 limit (GLPR23 §2).
        radius: max_i |z_i|; diameter: max_ij |z_i − z_j|.
    """

    spectrum: ValueSpectrum
    hull_vertices: np.ndarray
    vertex_distance: np.ndarray
    on_vertex: np.ndarray
    levels: np.ndarray
    level_labels: np.ndarray
    num_levels: int = eqx.field(static=True)
    subspace_coordinates: np.ndarray
    subspace_vertex_distance: np.ndarray
    attention: np.ndarray
    boolean_distance: float = eqx.field(static=True)
    attention_rank: int = eqx.field(static=True)
    general_rows: np.ndarray
    radius: float = eqx.field(static=True)
    diameter: float = eqx.field(static=True)


def _nearest_vertex_distance(points, vertices):
    diff = points[:, None, :] - points[vertices][None, :, :]
    return np.sqrt(np.min(np.sum(diff * diff, axis=-1), axis=1))


def _diameter(points):
    """max_ij |p_i − p_j|, attained at hull vertices (exact), O(n + v²)."""
    if points.shape[0] < 2:
        return 0.0
    idx = _hull_vertices(points, 1e-12)
    hull = points[idx]
    return float(np.sqrt(np.max(np.sum((hull[:, None] - hull[None]) ** 2, axis=-1))))


def limit_geometry(z, V, *, Q=None, K=None, beta=1.0, t=None, tol=1e-3) -> LimitGeometry:
    r"""Diagnose which limit geometry of GLPR23 (module docstring) rescaled tokens z have reached.

    Args:
        z: (n, d) rescaled tokens z = e^{−tV}x, or a trajectory (T, n, d) (its last entry is
            used).
        V: (d, d) value matrix.
        Q, K: (k, d) (identity when omitted).
        beta: β.
        t: the time of z. When given, the attention matrix is that of (9.3), evaluated at
            x = e^{tV} z; when omitted, it is evaluated at z itself ((9.4)).
        tol: relative tolerance (times the diameter of z) for "on a vertex" and for splitting
            ψ₁·z into levels (times their spread).

    Cost: one convex hull (Qhull, O(n log n) in d ≤ 3) and O(n·v) distances (v vertices), plus
    the n × n attention matrix.

    Example:
        >>> import numpy as np, attnflow as af
        >>> z = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1e-6, 1.0], [0.5, 0.5]])
        >>> g = af.models.limit_geometry(z, np.eye(2))
        >>> g.hull_vertices.tolist(), g.on_vertex.tolist()
        ([0, 1, 2, 3], [True, True, True, True, False])
    """
    # Rescaled tokens live in R^d (any d >= 1), not on the sphere: finite real values only.
    z = np.asarray(check_real_values(z, "z"), dtype=float)
    if z.ndim == 3:
        z = z[-1]
    if z.ndim != 2 or z.shape[0] < 1:
        raise ValueError(f"z: expected (n, d) tokens or a (T, n, d) trajectory, got {z.shape}")
    V = _square(V)
    if z.shape[1] != V.shape[0]:
        raise ValueError(f"z: tokens have d = {z.shape[1]} but V is {V.shape[0]} x {V.shape[0]}")
    tol = float(check_tolerance(tol, "tol"))
    beta = check_beta(beta)
    if t is not None:
        t = float(check_finite_scalar(t, "t"))
    spectrum = value_spectrum(V, Q, K)
    diameter = _diameter(z)
    scale = max(diameter, 1e-300)
    vertices = _hull_vertices(z, 1e-9)
    vertex_distance = _nearest_vertex_distance(z, vertices) / scale
    levels, labels = _levels(z @ spectrum.psi1, tol)
    if spectrum.paranormal:
        basis = np.concatenate([spectrum.C, spectrum.H], axis=1)
        coords = np.linalg.solve(basis, z.T).T[:, : spectrum.C.shape[1]]
        sub_vertices = _hull_vertices(coords, 1e-9)
        sub_scale = max(_diameter(coords), 1e-300)
        sub_distance = _nearest_vertex_distance(coords, sub_vertices) / sub_scale
    else:
        coords, sub_distance = np.zeros((z.shape[0], 0)), np.full(z.shape[0], np.nan)
    x = z if t is None else np.asarray(unrescale(jnp.asarray(z), t, jnp.asarray(V)))
    Qm, Km = _qk(Q, K, z.shape[1])
    if z.shape[1] == 1:  # attention fields need d ≥ 2: a zero coordinate leaves logits unchanged
        x, Qm, Km = (np.pad(m, ((0, 0), (0, 1))) for m in (x, Qm, Km))
    a = np.asarray(SelfAttention(beta, jnp.asarray(Qm), jnp.asarray(Km)).attention_matrix(x))
    boolean = np.round(a)
    return LimitGeometry(
        spectrum=spectrum,
        hull_vertices=vertices,
        vertex_distance=vertex_distance,
        on_vertex=vertex_distance <= tol,
        levels=levels,
        level_labels=labels,
        num_levels=int(levels.size),
        subspace_coordinates=coords,
        subspace_vertex_distance=sub_distance,
        attention=a,
        boolean_distance=float(np.max(np.minimum(a, 1 - a))),
        attention_rank=int(np.linalg.matrix_rank(boolean)),
        general_rows=np.flatnonzero(np.max(np.minimum(a, 1 - a), axis=1) > tol),
        radius=float(np.linalg.norm(z, axis=1).max()),
        diameter=diameter,
    )
