r"""Where rescaled tokens go for a general value matrix V: the limit geometries of GLPR23.

Geshkovski, Letrouit, Polyanskiy, Rigollet, "The emergence of clusters in self-attention
dynamics" (arXiv:2305.05465; Table 1 of arXiv:2312.10794, docs/maths.md §1.8). Pure self-attention
(9.1) on R^d, ẋ_i = Σ_j a_ij V x_j, is studied through z_i(t) = e^{−tV} x_i(t), which solves (9.3)
(:class:`attnflow.RescaledSelfAttention`). As t → ∞:

| V | Q, K | z_i(t) tends to |
|---|---|---|
| I_d | QᵀK ≻ 0 | the vertices of a convex polytope (Thm 3.1) |
| λ₁ > 0 simple, eigenvector φ₁ | ⟨Qφ₁, Kφ₁⟩ > 0 | ≤ 3 parallel hyperplanes {ψ₁·z = c} (Thm 4.1) |
| paranormal | QᵀK ≻ 0 | polytope × subspace (Thm 5.1) |
| −I_d | QᵀK = I_d | one cluster at the origin, for the unscaled x |

ψ₁ is the left eigenvector of λ₁ (ψ₁ᵀV = λ₁ψ₁ᵀ): ψ₁·z is the coordinate along φ₁ in the
decomposition R^d = span φ₁ ⊕ (the other generalised eigenspaces), the only one that grows like
e^{λ₁t} in x = e^{tV}z and therefore the only one the attention sees as t → ∞.

**Paranormal** (GLPR23 §5, Definition 5.1, as used here): V is paranormal when R^d = C ⊕ H with C
and H invariant under V, V restricted to C a multiple λ I of the identity, and every eigenvalue
of V restricted to H of modulus strictly smaller than λ (λ > 0 in Theorem 5.1). Provenance: this
wording is reconstructed from the statement of Theorem 5.1 and the authors' example; the text
of Definition 5.1 itself could not be retrieved when this was written (the sources reachable
from the project's tools held the paper's abstract and opening pages only), so a difference in
a corner case (e.g. whether H may carry eigenvalues of modulus λ other than λ itself) is
possible. The
authors' example is V = diag(1, −0.5): C = span e_1, λ = 1, H = span e_2. The component along
C (coordinates along H dropped) converges to the vertices of a polytope in C; the H component
is free: "polytope × subspace".

**V = −I (derived here): the collapse is algebraic.** With Q = K = I, for small tokens
a_ij ≈ (1 + ⟨x_i, x_j − x̄⟩)/n, so the mean x̄ decays like e^{−t} and the deviations
y_i = x_i − x̄ follow ẏ_i = −C y_i with C = (1/n) Σ_j y_j y_jᵀ: Ċ = −2C² + O(|x|⁴),
C(t) ≈ C(0)(I + 2tC(0))^{−1} → I/(2t), and |x_i(t)| ~ (2t)^{−1/2} (checked in the tests).

**d = 1 (derived here).** With V > 0 and QK > 0 the logits are QK e^{2tV} z_i z_j, so row i of
the attention matrix tends to the indicator of the largest z_j (if z_i > 0) or of the smallest
(if z_i < 0): a Boolean matrix with at most two nonzero columns, hence of rank ≤ 2.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from .._fields._pure import unrescale
from .._fields._self_attention import SelfAttention


class ValueSpectrum(eqx.Module):
    """Spectral data of a value matrix V and the hypotheses of GLPR23 (see the module docstring).

    Attributes:
        eigenvalues: (d,) complex eigenvalues, by decreasing real part.
        phi1, psi1: (d,) real parts of the right and left eigenvectors of the eigenvalue with the
            largest real part, scaled so that ψ₁·φ₁ = 1 (meaningful when that eigenvalue is
            real).
        top_simple_positive: λ₁ is real, positive, simple, and Re λ_k < λ₁ for k ≥ 2.
        hyperplane_condition: ``top_simple_positive`` and ⟨Qφ₁, Kφ₁⟩ > 0 (Theorem 4.1).
        paranormal: V is paranormal with λ > 0 (Definition 5.1 as stated above).
        paranormal_lambda: λ (nan when not paranormal).
        C, H: (d, c) and (d, d − c) bases of the subspaces C and H (empty when not paranormal).
        gram_positive: QᵀK + KᵀQ ≻ 0, i.e. QᵀK ≻ 0 as a quadratic form (Theorems 3.1, 5.1).
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
    gram_positive: bool = eqx.field(static=True)


def _square(V, name="V"):
    V = np.asarray(V, dtype=float)
    if V.ndim != 2 or V.shape[0] != V.shape[1] or V.shape[0] < 1:
        raise ValueError(f"{name}: expected a square (d, d) matrix, got shape {V.shape}")
    if not np.all(np.isfinite(V)):
        raise ValueError(f"{name}: expected finite entries")
    return V


def _qk(Q, K, d):
    out = []
    for name, M in (("Q", Q), ("K", K)):
        M = np.eye(d) if M is None else np.asarray(M, dtype=float)
        if M.ndim != 2 or M.shape[1] != d:
            raise ValueError(f"{name}: expected a (k, {d}) matrix, got shape {M.shape}")
        out.append(M)
    if out[0].shape != out[1].shape:
        raise ValueError(f"Q, K: expected equal shapes, got {out[0].shape} and {out[1].shape}")
    return out


def value_spectrum(V, Q=None, K=None, *, rtol=1e-8) -> ValueSpectrum:
    r"""Eigen-decomposition of V and which row of Table 1 of GLPR23 applies.

    Args:
        V: (d, d) value matrix.
        Q, K: (k, d) query and key matrices (identity when omitted).
        rtol: relative tolerance (times max(1, ‖V‖)) for equal eigenvalues and zero parts.

    Example:
        >>> import numpy as np, attnflow as af
        >>> s = af.models.value_spectrum(np.diag([1.0, -0.5]))
        >>> s.paranormal, s.top_simple_positive, s.paranormal_lambda
        (True, True, 1.0)
    """
    V = _square(V)
    d = V.shape[0]
    Q, K = _qk(Q, K, d)
    tol = rtol * max(1.0, float(np.linalg.norm(V, 2)))
    w, vl, vr = scipy.linalg.eig(V, left=True, right=True)
    order = np.lexsort((-np.abs(w.imag), -w.real))
    w, vl, vr = w[order], vl[:, order], vr[:, order]
    phi, psi = vr[:, 0], vl[:, 0]
    scale = np.vdot(psi, phi)  # ψᴴφ; left eigenvectors from scipy satisfy ψᴴ V = λ ψᴴ
    psi = psi / np.conj(scale)
    phi1, psi1 = phi.real.copy(), psi.real.copy()
    lam1 = w[0]
    top = abs(lam1.imag) <= tol and lam1.real > tol and (d == 1 or w[1].real < lam1.real - tol)
    gram = Q.T @ K
    hyper = bool(top and float((Q @ phi1) @ (K @ phi1)) > 0)
    gram_positive = bool(np.linalg.eigvalsh(gram + gram.T).min() > tol)
    # Paranormal: the top-modulus eigenvalue λ > 0 is semisimple, all others smaller in modulus.
    lam = float(lam1.real)
    para, C, H = False, np.zeros((d, 0)), np.zeros((d, 0))
    if lam > tol and abs(lam1.imag) <= tol:
        same = np.abs(w - lam) <= np.sqrt(tol)
        rest = w[~same]
        if rest.size == 0 or np.abs(rest).max() < lam - tol:
            # Semisimple iff rank(V − λI) = d − multiplicity; then C = ker, H = range.
            u, s, vh = np.linalg.svd(V - lam * np.eye(d))
            rank = int(np.sum(s > np.sqrt(tol) * max(1.0, s.max(initial=0.0))))
            if rank == d - int(same.sum()):
                para, C, H = True, vh[rank:].T.copy(), u[:, :rank].copy()
    return ValueSpectrum(
        eigenvalues=w,
        phi1=phi1,
        psi1=psi1,
        top_simple_positive=bool(top),
        hyperplane_condition=hyper,
        paranormal=para,
        paranormal_lambda=lam if para else float("nan"),
        C=C,
        H=H,
        gram_positive=gram_positive,
    )


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
    """The result of :func:`limit_geometry` (distances are relative to the diameter of z).

    Attributes:
        spectrum: the :class:`ValueSpectrum` of V.
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
        V: (d, d) value matrix; Q, K: (k, d) (identity when omitted); beta: β.
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
    z = np.asarray(z, dtype=float)
    if z.ndim == 3:
        z = z[-1]
    if z.ndim != 2 or z.shape[0] < 1:
        raise ValueError(f"z: expected (n, d) tokens or a (T, n, d) trajectory, got {z.shape}")
    V = _square(V)
    if z.shape[1] != V.shape[0]:
        raise ValueError(f"z: tokens have d = {z.shape[1]} but V is {V.shape[0]} x {V.shape[0]}")
    if not float(tol) > 0:
        raise ValueError(f"tol: expected a positive tolerance, got {tol}")
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
        radius=float(np.linalg.norm(z, axis=1).max()),
        diameter=diameter,
    )
