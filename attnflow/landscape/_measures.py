r"""Extremisers of the interaction energy over probability measures on S^{d−1} for a general
symmetric bilinear form D (Burger, Kabri, Korolev, Roith, Weigand, arXiv:2501.03096):

    E(μ) = ∬ exp(xᵀ D y) dμ(x) dμ(y) = 2β · InteractionEnergy(β, A)(x, w)   (D = βA).

A measure is represented by points x_i ∈ S^{d−1} and weights w_i ≥ 0, Σ w_i = 1. With the first
variation φ_i = δE/δμ(x_i) = 2 Σ_j w_j e^{x_iᵀDx_j} and its mean φ̄ = Σ_i w_i φ_i = 2E:

- weight stationarity   s_w = √(Σ_i w_i (φ_i − φ̄)²) / φ̄   (φ constant on the support),
- transport stationarity s_x = √(Σ_i w_i |∇_W E(x_i)|²) / φ̄,  ∇_W E(x) = P^⊥_x ∇φ(x)
  (the Wasserstein gradient; zero on the support of a stationary measure),
- optimality gap        (φ̄ − min_i φ_i)/φ̄ (minimising) or (max_i φ_i − φ̄)/φ̄ (maximising):
  the Frank–Wolfe gap over the candidate points, zero at a KKT point of the weight problem.
"""

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._check import (
    check_bool,
    check_delta,
    check_finite_scalar,
    check_int,
    check_matrix,
    check_range,
    check_size,
    check_symmetric,
    check_tokens,
    check_tolerance,
    check_weights,
)
from .._diagnostics import cluster_centers, cluster_labels
from .._sphere import retract, tangent

__all__ = [
    "MeasureOptimum",
    "first_variation",
    "maximize_measure_energy",
    "measure_energy",
    "measure_stationarity",
    "minimize_measure_energy",
    "sphere_points",
    "wasserstein_gradient",
]


def sphere_points(num_points: int, d: int, *, offset: float = 0.5, dtype=None):
    """A quasi-uniform point set on S^{d−1}, d = 2 or 3 (equal-weight quadrature nodes).

    d = 2: the equispaced grid θ_k = 2π(k + offset)/N (exact for trigonometric polynomials of
    degree < N). d = 3: the Fibonacci (golden-spiral) points z_k = 1 − 2(k + ½)/N,
    φ_k = kπ(1 + √5), each the centre of a cell of area 4π/N. ``offset`` shifts the circle grid
    (0.5 keeps the axes ±e_1, ±e_2 off the grid, so axis-aligned extremisers must be found by
    particle moves rather than read off a grid point).

    Example:
        >>> import attnflow as af
        >>> af.landscape.sphere_points(8, 2).shape, af.landscape.sphere_points(100, 3).shape
        ((8, 2), (100, 3))
    """
    num_points = check_size(num_points, "num_points", low=1)
    offset = float(check_finite_scalar(offset, "offset"))
    dtype = jnp.result_type(float) if dtype is None else dtype
    k = np.arange(num_points, dtype=np.float64)
    if d == 2:
        theta = 2 * np.pi * (k + offset) / num_points
        points = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    elif d == 3:
        z = 1 - 2 * (k + 0.5) / num_points
        phi = np.pi * (1 + np.sqrt(5.0)) * k
        r = np.sqrt(np.clip(1 - z**2, 0, None))
        points = np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)
    else:
        raise ValueError(f"d: expected 2 (circle) or 3 (S^2), got {d!r}")
    return jnp.asarray(points, dtype=dtype)


def _check_D(D, d):
    D = check_matrix(D, "D", "(d, d)")
    check_symmetric(D, "D", "the energy ∬ exp(xᵀDy) dμ dμ needs a symmetric bilinear form")
    if jnp.shape(D) != (d, d):
        raise ValueError(f"D: expected shape ({d}, {d}) to match points in R^{d}, got {D.shape}")
    return D


def _prepare(D, points, weights):
    points = check_tokens(points, "points")
    n, d = points.shape
    D = _check_D(D, d)
    weights = check_weights(weights, n)
    D = jnp.asarray(D, points.dtype)
    if weights is None:
        weights = jnp.full((n,), 1.0 / n, points.dtype)
    else:
        weights = jnp.asarray(weights, points.dtype)
        weights = weights / jnp.sum(weights)
    return D, points, weights


def _shift(D):
    """‖D‖₂ ≥ xᵀDy on the sphere: e^{xᵀDy − shift} ≤ 1 never overflows."""
    return jax.lax.stop_gradient(jnp.max(jnp.abs(jnp.linalg.eigvalsh(D))))


def _scaled_phi(D, shift, at, points, weights):
    """e^{−shift} φ(at_i) = 2 Σ_j w_j e^{at_iᵀ D x_j − shift}, and the scaled Euclidean ∇φ."""
    kernel = jnp.exp(at @ D @ points.T - shift)
    phi = 2 * kernel @ weights
    grad = 2 * (kernel * weights[None, :]) @ (points @ D)
    return phi, grad


def measure_energy(D, points, weights=None) -> Float[Array, ""]:
    """E(μ) = Σ_ij w_i w_j exp(x_iᵀ D x_j) for μ = Σ_i w_i δ_{x_i} (weights normalised to sum 1).

    BKKRW's normalisation: ``measure_energy(β A, x, w) == 2β · InteractionEnergy(β, A)(x, w)``.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [-1.0, 0.0]])
        >>> round(float(af.landscape.measure_energy(-jnp.eye(2), x)), 6)   # cosh 1
        1.543081
    """
    D, points, weights = _prepare(D, points, weights)
    shift = _shift(D)
    phi, _ = _scaled_phi(D, shift, points, points, weights)
    return 0.5 * jnp.dot(weights, phi) * jnp.exp(shift)


def first_variation(D, points, weights=None, at=None) -> Float[Array, " m"]:
    """φ(y) = δE/δμ(y) = 2 Σ_j w_j exp(yᵀ D x_j) at the points ``at`` (default: the support).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0]])
        >>> af.landscape.first_variation(jnp.eye(2), x, at=jnp.array([[0.0, 1.0]])).tolist()  # 2e^0
        [2.0]
    """
    D, points, weights = _prepare(D, points, weights)
    at = points if at is None else check_tokens(jnp.asarray(at, points.dtype), "at")
    shift = _shift(D)
    phi, _ = _scaled_phi(D, shift, at, points, weights)
    return phi * jnp.exp(shift)


def wasserstein_gradient(D, points, weights=None, at=None) -> Float[Array, "m d"]:
    """∇_W E[μ](y) = P^⊥_y ∇φ(y) = 2 P^⊥_y Σ_j w_j exp(yᵀDx_j) D x_j at ``at`` (default: support).

    μ is stationary (a critical point of E in the Wasserstein geometry on the sphere, BKKRW) when
    this vanishes on supp μ. For D = I this is twice the (USA) field at the points.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> D = jnp.diag(jnp.array([2.0, 1.0]))
        >>> x = jnp.array([[1.0, 0.0]])                   # δ_{e1}: e1 is an eigenvector
        >>> float(jnp.abs(af.landscape.wasserstein_gradient(D, x)).max())
        0.0
    """
    D, points, weights = _prepare(D, points, weights)
    at = points if at is None else check_tokens(jnp.asarray(at, points.dtype), "at")
    shift = _shift(D)
    _, grad = _scaled_phi(D, shift, at, points, weights)
    return tangent(at, grad) * jnp.exp(shift)


def _stationarity(D, shift, points, weights, maximize):
    phi, grad = _scaled_phi(D, shift, points, points, weights)
    riemannian = tangent(points, grad)
    mean = jnp.dot(weights, phi)
    s_w = jnp.sqrt(jnp.dot(weights, (phi - mean) ** 2)) / mean
    s_x = jnp.sqrt(jnp.dot(weights, jnp.sum(riemannian**2, axis=-1))) / mean
    gap = jnp.where(maximize, jnp.max(phi) - mean, mean - jnp.min(phi)) / mean
    return s_w, s_x, gap, 0.5 * mean


def measure_stationarity(D, points, weights=None, *, maximize: bool = False):
    """(s_w, s_x, gap): weight stationarity, transport stationarity and the Frank–Wolfe gap of
    μ = Σ w_i δ_{x_i}, all relative to φ̄ = 2E (module docstring). ``maximize`` picks the sign
    of the gap.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = af.landscape.sphere_points(64, 2)                  # uniform measure, D² = I
        >>> s_w, s_x, gap = af.landscape.measure_stationarity(jnp.diag(jnp.array([1.0, -1.0])), x)
        >>> bool(s_w < 1e-6 and s_x < 1e-6)
        True
    """
    maximize = check_bool(maximize, "maximize")
    D, points, weights = _prepare(D, points, weights)
    s_w, s_x, gap, _ = _stationarity(D, _shift(D), points, weights, maximize)
    return s_w, s_x, gap


class MeasureOptimum(eqx.Module):
    """The result of :func:`attnflow.landscape.minimize_measure_energy` /
    :func:`attnflow.landscape.maximize_measure_energy`.

    Attributes:
        points: (N, d) support candidates (moved when ``move_particles``).
        weights: (N,) the optimised weights (zero on pruned or merged points), summing to 1.
        energy: E(μ) = ∬ e^{xᵀDy} dμ dμ (BKKRW's normalisation).
        weight_stationarity, transport_stationarity, optimality_gap: see the module docstring.
        converged: s_w ≤ tol and, when particles move, s_x ≤ tol.
        num_steps: iterations taken.
        maximize: whether E was maximised.
    """

    points: Float[Array, "N d"]
    weights: Float[Array, " N"]
    energy: Float[Array, ""]
    weight_stationarity: Float[Array, ""]
    transport_stationarity: Float[Array, ""]
    optimality_gap: Float[Array, ""]
    converged: Bool[Array, ""]
    num_steps: Int[Array, ""]
    maximize: bool = eqx.field(static=True)

    def atoms(self, delta: float = 1e-3, support_tol: float = 1e-6):
        """Atoms of the measure: the clusters (:func:`attnflow.cluster_centers`, ⟨x, y⟩ ≥ 1 − δ)
        of the points carrying weight > support_tol · max weight, as NumPy arrays
        ``(centers (k, d), masses (k,))``, heaviest first.
        """
        w = np.asarray(self.weights)
        keep = w > support_tol * w.max()
        x = jnp.asarray(np.asarray(self.points)[keep])
        centers, masses = cluster_centers(x, delta, jnp.asarray(w[keep]))
        masses = np.asarray(masses)
        k = int(np.sum(masses > 0))
        return np.asarray(centers)[:k], masses[:k] / masses[:k].sum()

    def kind(self, delta: float = 1e-3, support_tol: float = 1e-6, max_atoms: int = 8) -> str:
        """``"dirac"``, ``"antipodal pair"`` (two atoms of mass ½ at ±v), ``"atomic"`` (at most
        ``max_atoms`` atoms) or ``"diffuse"``: more atoms, or a cluster of the support graph
        (⟨x, y⟩ ≥ 1 − δ) that is spread out (1 − |Σ w x| / Σ w > δ), as a density on a grid is.
        """
        w = np.asarray(self.weights)
        keep = w > support_tol * w.max()
        x, w = np.asarray(self.points)[keep], w[keep]
        labels = np.asarray(cluster_labels(jnp.asarray(x), delta))
        for label in np.unique(labels):
            member = labels == label
            resultant = np.linalg.norm(w[member] @ x[member]) / w[member].sum()
            if 1 - resultant > delta:
                return "diffuse"
        centers, masses = self.atoms(delta, support_tol)
        if len(masses) == 1:
            return "dirac"
        if (
            len(masses) == 2
            and np.all(np.abs(masses - 0.5) < np.sqrt(delta))
            and centers[0] @ centers[1] < -1 + delta
        ):
            return "antipodal pair"
        return "atomic" if len(masses) <= max_atoms else "diffuse"


@dataclasses.dataclass(frozen=True)
class _Config:
    maximize: bool
    move_particles: bool
    newton: bool
    cg_steps: int
    max_steps: int
    merge_delta: float
    prune: float
    store_kernel: bool


def _cg(matvec, b, steps):
    """Truncated conjugate gradients for matvec(u) = b from u = 0; stops at non-positive
    curvature (the Steihaug rule), so it also returns a descent direction on non-convex
    problems."""
    tiny = jnp.finfo(b.dtype).tiny

    def cond(state):
        _, _, _, rr, k, done = state
        return (k < steps) & ~done & (rr > tiny)

    def body(state):
        u, r, p, rr, k, _ = state
        hp = matvec(p)
        curvature = jnp.dot(p, hp)
        ok = curvature > tiny
        alpha = jnp.where(ok, rr / jnp.where(ok, curvature, 1.0), 0.0)
        u = u + alpha * p
        r = r - alpha * hp
        rr_new = jnp.dot(r, r)
        p = r + (rr_new / jnp.where(rr > 0, rr, 1.0)) * p
        return u, r, p, rr_new, k + 1, ~ok

    zero = jnp.zeros_like(b)
    state = (zero, b, b, jnp.dot(b, b), jnp.asarray(0), jnp.asarray(False))
    return jax.lax.while_loop(cond, body, state)[0]


def _normalized(logw):
    return jax.nn.softmax(logw)


# Weight steps keep the N × N kernel e^{x_iᵀDx_j − shift} in memory (8N² bytes in float64:
# 0.8 GB at N = 10^4) and reuse it for every product of the step (CG and line search), and,
# without particle moves, for the whole run: one exponential pass instead of one per product.
# Above this size every product recomputes its kernel (no N × N array lives across products).
STORED_KERNEL_MAX_POINTS = 16384


class _Context(NamedTuple):
    """What every step of :func:`_optimize` reads: D, the shift, the sign of the objective
    (minimise sign · E), the kernel stored or recomputed, and the settings."""

    D: Array
    shift: Array
    sign: float
    store: bool
    fixed_kernel: Array | None
    config: "_Config"
    tol: Array


def _kernel_of(ctx: _Context, x):
    if ctx.store:
        return jnp.exp(x @ ctx.D @ x.T - ctx.shift)
    return x  # recompute from the points in each product


def _kernel_phi(ctx: _Context, kernel, x, w):
    """Scaled φ = 2 Σ_j w_j e^{x_iᵀDx_j − shift}."""
    if ctx.store:
        return 2 * kernel @ w
    return _scaled_phi(ctx.D, ctx.shift, x, x, w)[0]


def _halving_search(accept, t0):
    """Halve t from t0 until ``accept(t)`` (at most 30 times): (t, accepted, halvings)."""

    def cond(state):
        t, ok, k = state
        return ~ok & (k < 30)

    def body(state):
        t, _, k = state
        t = t / 2
        return t, accept(t), k + 1

    return jax.lax.while_loop(cond, body, (t0, accept(t0), 0))


def _newton_direction(ctx: _Context, kernel, x, w, phi, mean):
    """Mirror Newton: minimise the quadratic model of E in δw = √w ∘ u on Σδw = 0, i.e.
    P (2 √W K √W) P u = −P √w (φ − φ̄), solved by truncated CG; δz = u / √w."""
    alive = w > 0
    s = jnp.sqrt(w)
    inv_s = jnp.where(alive, 1 / jnp.where(alive, s, 1.0), 0.0)

    def project(v):
        return v - s * jnp.dot(s, v)

    def hessian(u):
        v = s * project(u)
        return project(s * _kernel_phi(ctx, kernel, x, v))

    u = _cg(hessian, -project(s * (phi - mean)), ctx.config.cg_steps)
    return jnp.where(alive, project(u) * inv_s, 0.0)


def _weight_step(ctx: _Context, x, logw, eta):
    w = _normalized(logw)
    kernel = _kernel_of(ctx, x) if ctx.fixed_kernel is None else ctx.fixed_kernel
    phi = _kernel_phi(ctx, kernel, x, w)
    mean = jnp.dot(w, phi)
    f0 = ctx.sign * 0.5 * mean
    direction = jnp.where(w > 0, -ctx.sign * (phi - mean) / mean, 0.0)
    sw2 = jnp.dot(w, (phi - mean) ** 2) / mean**2
    slack = 16 * jnp.finfo(x.dtype).eps * jnp.abs(f0)

    def try_direction(dz, t0, grow):
        # Armijo on the first-order decrease sign·½Σ w_i (φ_i − φ̄) δz_i; below rounding,
        # a step that leaves E unchanged is accepted if it cuts s_w by 10%.
        slope = ctx.sign * 0.5 * jnp.dot(w, (phi - mean) * dz)

        def accept(t):
            trial = _normalized(logw + t * dz)
            phi_t = _kernel_phi(ctx, kernel, x, trial)
            mean_t = jnp.dot(trial, phi_t)
            value = ctx.sign * 0.5 * mean_t
            sw2_t = jnp.dot(trial, (phi_t - mean_t) ** 2) / mean_t**2
            armijo = value <= f0 + 1e-4 * t * jnp.minimum(slope, 0.0)
            return (armijo & (value < f0)) | ((value <= f0 + slack) & (sw2_t < 0.81 * sw2))

        t, accepted, k = _halving_search(accept, t0)
        eta_next = jnp.where(accepted, jnp.where(k == 0, t * grow, t), t0 / 2)
        return jnp.where(accepted, logw + t * dz, logw), accepted, eta_next

    if ctx.config.newton and not ctx.config.maximize:
        newton = _newton_direction(ctx, kernel, x, w, phi, mean)
        logw_new, ok, _ = try_direction(newton, jnp.asarray(1.0, x.dtype), 1.0)
        logw_new, eta = jax.lax.cond(
            ok,
            lambda: (logw_new, eta),
            lambda: try_direction(direction, eta, 2.0)[::2],
        )
    else:
        logw_new, _, eta = try_direction(direction, eta, 2.0)
    return logw_new, jnp.clip(eta, 1e-12, 1e12)


def _particle_step(ctx: _Context, x, logw, tau):
    w = _normalized(logw)
    phi, grad = _scaled_phi(ctx.D, ctx.shift, x, x, w)
    mean = jnp.dot(w, phi)
    riemannian = tangent(x, grad)
    move = -ctx.sign * riemannian / mean
    f0 = ctx.sign * 0.5 * mean
    g0 = jnp.dot(w, jnp.sum(riemannian**2, axis=-1)) / mean**2
    slack = 16 * jnp.finfo(x.dtype).eps * jnp.abs(f0)

    def accept(t):
        # Armijo with c = ¼ (the first-order decrease is −t g0 φ̄/2): c = ¼ keeps the
        # contraction factor ≥ −½ on a quadratic; below rounding, a step that
        # leaves E unchanged is accepted if it cuts s_x by 10%. Without the Armijo margin,
        # doubling steps settle at the stability limit and oscillate (factor −1).
        s_w, s_x, _, e = _stationarity(
            ctx.D, ctx.shift, retract(x, move, t), w, ctx.config.maximize
        )
        value = ctx.sign * e
        armijo = (value < f0) & (value <= f0 - 0.25 * t * g0 * mean / 2)
        return armijo | ((value <= f0 + slack) & (s_x**2 < 0.81 * g0))

    t, accepted, k = _halving_search(accept, tau)
    tau_next = jnp.where(accepted, jnp.where(k == 0, 2 * t, t), tau / 2)
    return jnp.where(accepted, retract(x, move, t), x), tau_next


def _merge(config: "_Config", x, logw):
    """Merge alive points within δ of each other into the first; prune tiny weights."""
    w = _normalized(logw)
    alive = w > 0
    close = (x @ x.T >= 1 - config.merge_delta) & alive[:, None] & alive[None, :]
    n = x.shape[0]
    target = jnp.argmax(close, axis=0)  # first alive point within delta (itself if alone)
    target = jnp.where(alive, target, jnp.arange(n))
    merged = jax.ops.segment_sum(w, target, num_segments=n)
    keep = merged > config.prune * jnp.max(merged)
    return jnp.where(keep, jnp.log(jnp.where(keep, merged, 1.0)), -jnp.inf)


def _status(ctx: _Context, x, logw):
    w = _normalized(logw)
    if ctx.fixed_kernel is not None and ctx.store:  # s_w from the stored kernel
        phi = _kernel_phi(ctx, ctx.fixed_kernel, x, w)
        mean = jnp.dot(w, phi)
        return jnp.sqrt(jnp.dot(w, (phi - mean) ** 2)) / mean <= ctx.tol
    s_w, s_x, gap, _ = _stationarity(ctx.D, ctx.shift, x, w, ctx.config.maximize)
    done = s_w <= ctx.tol
    if ctx.config.move_particles:
        done = done & (s_x <= ctx.tol)
    return done


def _optimize(D, points, weights, tol, config: _Config):
    dtype = points.dtype
    ctx = _Context(
        D=D,
        shift=_shift(D),
        sign=-1.0 if config.maximize else 1.0,  # minimise sign · E
        store=config.store_kernel,
        fixed_kernel=None,
        config=config,
        tol=tol,
    )
    if not config.move_particles:
        ctx = ctx._replace(fixed_kernel=_kernel_of(ctx, points))

    def cond(state):
        x, logw, eta, tau, k, done = state
        return (k < config.max_steps) & ~done

    def body(state):
        x, logw, eta, tau, k, _ = state
        logw, eta = _weight_step(ctx, x, logw, eta)
        if config.move_particles:
            x, tau = _particle_step(ctx, x, logw, tau)
            logw = _merge(config, x, logw)
        return x, logw, eta, tau, k + 1, _status(ctx, x, logw)

    logw0 = jnp.where(weights > 0, jnp.log(jnp.where(weights > 0, weights, 1.0)), -jnp.inf)
    eta0 = jnp.asarray(1.0, dtype)
    tau0 = jnp.asarray(1.0, dtype) / jnp.maximum(jnp.max(jnp.abs(D)), 1e-3)
    state = (points, logw0, eta0, tau0, jnp.asarray(0), _status(ctx, points, logw0))
    x, logw, _, _, steps, converged = jax.lax.while_loop(cond, body, state)
    w = _normalized(logw)
    s_w, s_x, gap, e_scaled = _stationarity(D, ctx.shift, x, w, config.maximize)
    return x, w, e_scaled * jnp.exp(ctx.shift), s_w, s_x, gap, converged, steps


_optimize_jit = eqx.filter_jit(_optimize)


def _run(
    D,
    points,
    weights,
    *,
    maximize,
    num_points,
    move_particles,
    newton,
    tol,
    max_steps,
    cg_steps,
    merge_delta,
    prune,
):
    # The options first: they are checked whatever the points, and before any work.
    move_particles = check_bool(move_particles, "move_particles")
    newton = check_bool(newton, "newton")
    max_steps = check_int(max_steps, "max_steps", low=1)
    cg_steps = check_int(cg_steps, "cg_steps", low=1)
    merge_delta = float(check_delta(merge_delta, "merge_delta"))
    prune = float(check_range(prune, "prune", 0, 1))
    if tol is not None:
        tol = float(check_tolerance(tol, "tol"))
    if num_points is not None:
        num_points = check_size(num_points, "num_points", low=1)
        if points is not None:
            raise ValueError(
                f"num_points: expected None when points are given (they fix their number), "
                f"got {num_points}"
            )
    if points is None:
        if num_points is None:
            raise ValueError("points, num_points: give candidate points or their number")
        d = int(jnp.shape(D)[0]) if jnp.ndim(D) == 2 else -1
        points = sphere_points(num_points, d)
    D, points, weights = _prepare(D, points, weights)
    if tol is None:
        tol = 1e-8 if points.dtype == jnp.float64 else 1e-5
    config = _Config(
        maximize=maximize,
        move_particles=move_particles,
        newton=newton,
        cg_steps=cg_steps,
        max_steps=max_steps,
        merge_delta=merge_delta,
        prune=prune,
        store_kernel=points.shape[0] <= STORED_KERNEL_MAX_POINTS,
    )
    x, w, e, s_w, s_x, gap, converged, steps = _optimize_jit(
        D, points, weights, jnp.asarray(tol, points.dtype), config
    )
    return MeasureOptimum(x, w, e, s_w, s_x, gap, converged, steps, maximize)


def minimize_measure_energy(
    D,
    points=None,
    weights=None,
    *,
    num_points: int | None = None,
    move_particles: bool = False,
    newton: bool = True,
    tol: float | None = None,
    max_steps: int = 2000,
    cg_steps: int = 30,
    merge_delta: float = 1e-9,
    prune: float = 1e-14,
) -> MeasureOptimum:
    """Minimise E(μ) = ∬ exp(xᵀDy) dμ dμ over probability measures on the points (BKKRW).

    Exponentiated gradient (mirror descent with the entropy) on the weights of a fixed point set,
    w ← w ∘ exp(∓η(φ − φ̄)/φ̄) / Z, φ_i = δE/δμ(x_i), with a backtracking step η that doubles
    after every accepted step (η → ∞ is the Frank–Wolfe vertex step). The search is local: it
    converges to a stationary measure reached from the initial weights; compare several starts
    for a global extremiser (in float32, rounding can unbalance an antipodal pair on the way).
    When minimising, each step first tries a mirror Newton step: truncated conjugate gradients
    on the quadratic model in δw = √w ∘ u, which resolves the few kernel modes that matter (the
    spectrum of e^{xᵀDy} decays like I_k(‖D‖)), accepted only if it lowers E. Measured on the
    circle with N = 1000: 3–8 steps reach s_w = 1e-9, where exponentiated gradient alone needs
    ~10⁴.

    Cost: a weight step keeps the N × N kernel e^{x_iᵀDx_j} (8N² bytes in float64, 0.8 GB at
    N = 10⁴, for N ≤ ``STORED_KERNEL_MAX_POINTS`` = 16384) and reuses it for every product of
    the step; without particle moves the points never change and one exponential pass serves
    the whole run (N = 10⁴ on S²: 4 mirror Newton steps in about 4 s on 2 CPU cores).

    With ``move_particles`` every weight step is followed by a Wasserstein gradient step on the
    points, x_i ← normalize(x_i ∓ τ ∇_W E(x_i)/φ̄) (backtracking τ), and points closer than
    ``merge_delta`` (⟨x_i, x_j⟩ ≥ 1 − merge_delta) are merged. Atoms then sit at exact
    stationary positions (e.g. eigenvectors of D) instead of the nearest grid point.

    Args:
        D: (d, d) symmetric bilinear form (BKKRW's D = βA for attnflow's InteractionEnergy).
        points: (N, d) candidate points on the sphere; default ``sphere_points(num_points, d)``.
        weights: (N,) initial weights (default uniform); zero weights stay zero.
        num_points: size of the default point set (d = 2: circle grid, d = 3: Fibonacci);
            give it or ``points``, not both.
        move_particles: alternate weight steps with particle moves and merges.
        newton: try the mirror Newton step (minimisation only).
        tol: stop when s_w ≤ tol (and s_x ≤ tol when particles move); default 1e-8 in
            float64, 1e-5 in float32.
        max_steps: iteration cap.
        cg_steps: CG iterations per Newton step.
        merge_delta: merge threshold.
        prune: weights below prune · max weight are set to zero
            after each merge.

    Returns:
        a :class:`attnflow.landscape.MeasureOptimum`; ``.atoms()`` and ``.kind()`` read off its
        atoms with
        attnflow's cluster diagnostics. Jitted on the static options; float32 and float64.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> D = jnp.diag(jnp.array([1.0, 1.2]))
        >>> r = af.landscape.minimize_measure_energy(D, num_points=200)
        >>> float(r.weight_stationarity) < 1e-5
        True
        >>> r.kind()
        'diffuse'
    """
    return _run(
        D,
        points,
        weights,
        maximize=False,
        num_points=num_points,
        move_particles=move_particles,
        newton=newton,
        tol=tol,
        max_steps=max_steps,
        cg_steps=cg_steps,
        merge_delta=merge_delta,
        prune=prune,
    )


def maximize_measure_energy(
    D,
    points=None,
    weights=None,
    *,
    num_points: int | None = None,
    move_particles: bool = False,
    tol: float | None = None,
    max_steps: int = 2000,
    merge_delta: float = 1e-9,
    prune: float = 1e-14,
) -> MeasureOptimum:
    """Maximise E(μ) = ∬ exp(xᵀDy) dμ dμ over probability measures on the points (BKKRW).

    The same local search as :func:`attnflow.landscape.minimize_measure_energy` (exponentiated
    gradient on the weights, optional particle moves and merges; see there for the method, its
    cost and the arguments) in the ascent direction, without the mirror Newton step: ``newton``
    and ``cg_steps`` are not taken. The result is a :class:`attnflow.landscape.MeasureOptimum`
    as there.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> D = jnp.diag(jnp.array([-1.0, -0.2]))     # D < 0: the antipodal pair on e1
        >>> r = af.landscape.maximize_measure_energy(D, num_points=64, move_particles=True)
        >>> r.kind(), round(float(r.energy), 6)
        ('antipodal pair', 1.543081)
    """
    return _run(
        D,
        points,
        weights,
        maximize=True,
        num_points=num_points,
        move_particles=move_particles,
        newton=False,
        tol=tol,
        max_steps=max_steps,
        cg_steps=1,
        merge_delta=merge_delta,
        prune=prune,
    )
