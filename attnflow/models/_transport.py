r"""Explicit Transformer parameters that carry N empirical measures onto N targets.

Geshkovski, Rigollet, Ruiz-Balet, "Measure-to-measure interpolation using Transformers"
(arXiv:2411.04551, GRR24) give piecewise-constant parameters θ(t) of the Transformer continuity
equation ∂_t μ + div(μ v_θ[μ]) = 0 on S^{d−1}, v_θ[μ](x) = P^⊥_x(V ∫ a(x, y) y dμ(y) +
W(Ax + b)_+), that send N given input measures to N given targets at once: attention
*disentangles* inputs whose supports overlap (the perceptron acts pointwise, so it cannot tell
two measures apart where they share points; attention sees the whole measure), then perceptron
pieces steer. Their theorem covers arbitrary measures, matched up to ε in Wasserstein distance.
:func:`interpolate_measures` implements the empirical case of that programme with an explicit
construction of our own and exact landing; see its docstring for where it departs from GRR24.
"""

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jaxtyping import Array, Float, Int

from .._check import (
    as_array,
    check_budget,
    check_dtype,
    check_finite_scalar,
    check_positive_scalar,
    check_seed,
    check_size,
)
from .._fields._feedforward import FeedForward, TransformerBlock
from .._fields._piecewise import PiecewiseConstant
from .._fields._self_attention import SelfAttention
from .._solve import solve

# One-neuron pieces of an interpolation: each is a (d, d) layer of the transport field.
MAX_PIECES = 2**16

__all__ = ["MeasureInterpolation", "interpolate_measures"]

# A steering cap reaches 7h/4 from its centre, 1/2 h off the route; other atoms keep ≥ 5h/2 away.
_CLEARANCE_PER_STEP = 2.5


class MeasureInterpolation(eqx.Module):
    """The result of :func:`interpolate_measures`.

    Attributes:
        field: the :class:`attnflow.PiecewiseConstant` Transformer; every piece is a
            ``TransformerBlock(SelfAttention(β, V=V_k), FeedForward(w_k, a_k, b_k))`` of hidden
            width 1. Push each input measure (n, d) through ``attnflow.solve(field, x, t1)``.
        t1: the final time (the depth).
        num_switches: L − 1, the number of discontinuities of θ(t).
        segments: (N, n) steering pieces spent on each input atom (0 if it starts on its target).
        steps: (N, n) the step h of each atom's route (its arcs are cut into ⌈length/h⌉ pieces).
        lengths: (N, n) the geodesic length of each atom's route.
        assignment: (N, n) index k of the target atom y[i, k] that atom x[i, j] is sent to.
        disentangled: (N, n, d) the atoms after the attention phase.
    """

    field: PiecewiseConstant
    t1: float = eqx.field(static=True)
    num_switches: int = eqx.field(static=True)
    segments: Int[Array, "N n"]
    steps: Float[Array, "N n"]
    lengths: Float[Array, "N n"]
    assignment: Int[Array, "N n"]
    disentangled: Float[Array, "N n d"]


def _angle(u, v):
    """Geodesic distance, stable for close and for antipodal points."""
    return 2 * np.arctan2(np.linalg.norm(u - v, axis=-1), np.linalg.norm(u + v, axis=-1))


def _arc_distance(points, a, b):
    """Geodesic distance from each point to the minor arc from a to b (a ≠ ±b)."""
    e = b - (a @ b) * a
    e = e / np.linalg.norm(e)
    length = _angle(a, b)
    pa, pe = points @ a, points @ e
    planar = np.hypot(pa, pe)
    theta = np.arctan2(pe, pa)
    on_arc = (theta >= 0) & (theta <= length) & (planar > 0)
    to_circle = np.arccos(np.clip(planar, 0.0, 1.0))
    ends = np.minimum(_angle(points, a[None]), _angle(points, b[None]))
    return np.where(on_arc, to_circle, ends)


def _arc(a, b, theta):
    """The point at angle theta along the great circle from a towards b."""
    e = b - (a @ b) * a
    e = e / np.linalg.norm(e)
    return np.cos(theta) * a + np.sin(theta) * e


def _cap_time_per_speed(theta0, theta1, r):
    """∫ dt / c from angle θ0 to θ1 < θ0 from the cap centre under u̇ = c (u − cos r)(1 − u²),
    u = cos θ (the one-neuron field below), by partial fractions, with every factor written
    through half-angles so that small caps lose no digits."""

    def logs(theta):
        return (
            np.log(np.sin((r + theta) / 2) * np.sin((r - theta) / 2)),
            np.log(np.sin(theta / 2)) * 2,
            np.log(np.cos(theta / 2)) * 2,
        )

    (p1, q1, s1), (p0, q0, s0) = logs(theta1), logs(theta0)
    return (
        (p1 - p0) / np.sin(r) ** 2
        - (q1 - q0) / (4 * np.sin(r / 2) ** 2)
        - (s1 - s0) / (4 * np.cos(r / 2) ** 2)
    )


def interpolate_measures(
    x,
    y,
    *,
    beta=1.0,
    disentangle_time=1.0,
    step_time=1.0,
    max_step=np.pi / 8,
    min_clearance=1e-2,
    waypoints: int = 16,
    seed: int = 0,
) -> MeasureInterpolation:
    r"""Piecewise-constant Transformer parameters θ(t) whose flow carries the N empirical
    measures μ_i = (1/n) Σ_j δ_{x[i, j]} onto ν_i = (1/n) Σ_k δ_{y[i, k]}, i = 1, …, N, exactly
    (up to the ODE solver's tolerance), on S^{d−1} with d ≥ 3.

    The field is GRR24's (arXiv:2411.04551, eq. (1.1)–(1.2): attention plus a perceptron inside
    one projection), here with Q = K = I and hidden width 1:

        ẋ = P^⊥_x ( V_k Σ_j a_ij x_j + w_k (a_kᵀx + b_k)_+ )   on piece k.

    Each input measure is pushed *separately* (attention couples atoms of one measure only); the
    same θ serves all N.

    **Phase 1, disentangle** (one piece, length ``disentangle_time``; none if 0): V = I, w = 0,
    i.e. (SA) with β. An atom shared by μ_i and μ_j moves with the attention average of μ_i in
    one and of μ_j in the other, so overlapping supports separate (the role attention plays in
    GRR24, whose perceptron, acting pointwise, cannot separate them). The flow map of each
    measure is injective, so atoms of one measure stay distinct; that the N·n atoms are pairwise
    distinct afterwards is checked (``ValueError`` otherwise: then the measures are too
    symmetric for this phase, e.g. equal).

    **Phase 2, steer** (V = 0): atoms are moved one at a time along a route of one or two
    great-circle arcs (direct, or through the best of ``waypoints`` random waypoints, which in
    d ≥ 3 misses the other atoms almost surely), each arc cut into K = ⌈length/h⌉ equal steps of
    length h' ≤ h. A step from p to q is one piece with a = m, w = c m, b = −cos r, where m lies
    on the same great circle h'/2 beyond q and r = 7h'/4:

        ẋ = c (mᵀx − cos r)_+ P^⊥_x m,    u = mᵀx:  u̇ = c (u − cos r)(1 − u²).

    *Why it lands exactly.* Atoms outside the cap {mᵀx > cos r} have zero velocity; the cap's
    boundary is made of equilibria, so no atom enters or leaves it. The only atom inside is the
    moving one: p is 3h'/2 < r from m, and every other atom is at least ρ − h'/2 ≥ 7h'/2 > r
    from m, where ρ ≥ 4h is the route's clearance (the least distance from the route to any
    other atom, current position). Inside, the field is c (u − cos r)_+ times the gradient of u
    on the sphere, so the atom runs along the great circle through p and m towards m; u solves
    the separable equation above, and c is set so that it reaches q (angle h'/2 from m) at the
    end of the piece, from the partial fractions of 1/((u − κ)(1 − u²)), κ = cos r. Other
    atoms never move, so the clearance computed at planning time holds throughout.

    **Switch count.** With s = 1 if ``disentangle_time`` > 0 else 0, L = s + Σ_atoms Σ_arcs
    ⌈length/h⌉ pieces and L − 1 switches, each atom's h = min(``max_step``, clearance/4).
    A route has at most two arcs of length ≤ π, so L − s ≤ 2 N n ⌈π/h_min⌉; every piece lasts
    ``step_time`` (the first ``disentangle_time``), so t1 = s·``disentangle_time`` +
    (L − s)·``step_time``.

    **Where this departs from GRR24.** Their theorem (arbitrary measures, ε-matching in W₂ under
    a transport-map assumption, d ≥ 3) clusters each disentangled measure with attention and
    then matches the clusters with perceptron flows approximating transport maps; their switch
    count depends on ε. For empirical measures with n atoms each, we skip clustering (it would
    only shrink the room between atoms) and match exactly, atom by atom; the count above is ours,
    not theirs. Within each measure the atoms are paired with the targets by minimal total
    squared distance (any bijection would do).

    Args:
        x: (N, n, d) input atoms (unit vectors), distinct within each measure.
        y: (N, n, d) target atoms, all N·n pairwise distinct.
        beta: the attention's β in phase 1.
        disentangle_time: length of phase 1 (0 skips it: then the inputs must be pairwise
            distinct already).
        step_time: length of each steering piece.
        max_step: the longest steering step h (radians).
        min_clearance: a route must keep this far (radians) from the other atoms; an atom with
            none is moved later, when the atoms in its way have left (``ValueError`` if no order
            works).
        waypoints: random waypoints tried per atom besides the direct arc.
        seed: seed of the waypoints.

    Returns:
        a :class:`MeasureInterpolation`.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> kx, ky = jr.split(jr.key(0))
        >>> x = af.random_tokens(kx, 6, 3).reshape(2, 3, 3)
        >>> y = af.random_tokens(ky, 6, 3).reshape(2, 3, 3)
        >>> plan = af.models.interpolate_measures(x, y)
        >>> plan.num_switches == int(plan.segments.sum())  # one disentangling piece, then steps
        True
        >>> out = jnp.stack([af.solve(plan.field, xi, plan.t1, rtol=1e-8, atol=1e-8).ys[-1]
        ...                  for xi in x])
        >>> moved = jnp.take_along_axis(y, plan.assignment[..., None], axis=1)
        >>> bool(jnp.abs(out - moved).max() < 1e-3)  # float32 or float64; exact up to the solve
        True
    """
    x, y = _check_measures(x, y)
    N, n, d = x.shape
    beta = float(check_finite_scalar(beta, "beta"))
    disentangle_time = float(check_finite_scalar(disentangle_time, "disentangle_time"))
    if disentangle_time < 0:
        raise ValueError(f"disentangle_time: expected >= 0, got {disentangle_time}")
    step_time = float(check_positive_scalar(step_time, "step_time"))
    max_step = float(check_positive_scalar(max_step, "max_step"))
    min_clearance = float(check_positive_scalar(min_clearance, "min_clearance"))
    waypoints = check_size(
        waypoints, "waypoints", low=0, limit=MAX_PIECES, what="random waypoints per atom"
    )
    seed = check_seed(seed, "seed")
    dtype = x.dtype
    eye = np.eye(d)

    if disentangle_time > 0:
        first = SelfAttention(beta)
        z = jnp.stack(
            [solve(first, xi, disentangle_time, rtol=1e-11, atol=1e-13).ys[-1] for xi in x]
        )
    else:
        z = x
    points = np.array(z, dtype=np.float64).reshape(N * n, d)
    _check_separated(points, n, min_clearance, "x", "after the attention phase")
    _check_separated(np.asarray(y, np.float64).reshape(N * n, d), n, min_clearance, "y", "")
    assignment = np.zeros((N, n), dtype=int)
    for i in range(N):
        cost = np.sum((points[i * n : (i + 1) * n, None] - np.asarray(y[i])[None]) ** 2, axis=-1)
        assignment[i] = scipy.optimize.linear_sum_assignment(cost)[1]
    targets = np.asarray(y, np.float64)[np.arange(N)[:, None], assignment].reshape(N * n, d)

    rng = np.random.default_rng(seed)
    segments = np.zeros(N * n, dtype=int)
    steps = np.full(N * n, np.nan)
    lengths = np.zeros(N * n)
    # (V, w, a, b) of every piece; the first is attention only, the others one neuron each.
    pieces = [(eye, np.zeros(d), np.zeros(d), 0.0)] if disentangle_time > 0 else []
    remaining = [j for j in range(N * n) if _angle(points[j], targets[j]) > 0]
    # Each atom needs at least ⌈angle / max_step⌉ one-neuron pieces: refuse an absurd count
    # before building any.
    check_budget(
        "max_step",
        sum(math.ceil(_angle(points[j], targets[j]) / max_step) for j in remaining),
        MAX_PIECES,
        what="one-neuron pieces (at least the angle of each atom's route / max_step)",
        hint="the default max_step = π/8 is enough; lower it only a little",
    )
    while remaining:
        deferred = []
        for j in remaining:
            others = np.delete(points, j, axis=0)
            best = _best_route(
                points[j], targets[j], others, rng, waypoints, min_clearance, max_step
            )
            if best is None:
                deferred.append(j)
                continue
            segments[j], steps[j], arcs = best
            for a, b in arcs:
                lengths[j] += _angle(a, b)
                pieces += _steering_pieces(a, b, steps[j], step_time)
            points[j] = targets[j]
        if len(deferred) == len(remaining):
            raise ValueError(
                f"y: no route keeps min_clearance = {min_clearance} from the other atoms for the "
                f"atoms (measure, atom) {[divmod(j, n) for j in deferred]}: each one's target "
                "is blocked by an atom that cannot leave first"
            )
        remaining = deferred
    if not pieces:
        pieces = [(0 * eye, np.zeros(d), np.zeros(d), 0.0)]

    V, w, a, b = (jnp.asarray(np.stack(p), dtype) for p in zip(*pieces, strict=True))
    stacked = eqx.filter_vmap(
        lambda V, w, a, b: TransformerBlock(
            SelfAttention(beta, V=V), FeedForward(w[:, None], a[None], b[None])
        )
    )(V, w, a, b)
    durations = [disentangle_time] * (disentangle_time > 0)
    durations += [step_time] * (len(pieces) - len(durations))
    ends = np.cumsum(durations)
    return MeasureInterpolation(
        field=PiecewiseConstant(stacked, jnp.asarray(ends[:-1], dtype)),
        t1=float(ends[-1]),
        num_switches=len(pieces) - 1,
        segments=jnp.asarray(segments.reshape(N, n)),
        steps=jnp.asarray(steps.reshape(N, n), dtype),
        lengths=jnp.asarray(lengths.reshape(N, n), dtype),
        assignment=jnp.asarray(assignment),
        disentangled=jnp.asarray(z, dtype),
    )


def _check_measures(x, y):
    x, y = as_array(x, "x"), as_array(y, "y")
    for name, value in (("x", x), ("y", y)):
        check_dtype(value, name)
        if value.ndim != 3:
            raise ValueError(
                f"{name}: expected N measures of n atoms, shape (N, n, d), got {value.shape}"
            )
        norms = np.linalg.norm(np.asarray(value), axis=-1)
        if not np.allclose(norms, 1.0, atol=1e-6):
            raise ValueError(
                f"{name}: expected unit vectors, got norms in [{norms.min()}, {norms.max()}]"
            )
    if x.shape != y.shape:
        raise ValueError(f"x, y: expected equal shapes (N, n, d), got {x.shape} and {y.shape}")
    if x.shape[2] < 3:
        raise ValueError(
            f"x: expected d >= 3 (on the circle a flow keeps the cyclic order of the atoms, so "
            f"general targets cannot be reached), got d = {x.shape[2]}"
        )
    return x, y


def _check_separated(points, n, min_clearance, name, when):
    gaps = _angle(points[:, None], points[None]) + 4 * np.eye(len(points))
    if gaps.min() < min_clearance:
        i, j = np.unravel_index(np.argmin(gaps), gaps.shape)
        raise ValueError(
            f"{name}: atoms {divmod(int(i), n)} and {divmod(int(j), n)} (measure, atom) are "
            f"{gaps.min():.2g} apart {when} (min_clearance = {min_clearance}); a flow can "
            "neither merge atoms nor, without attention, split a shared one"
        )


def _best_route(p, q, others, rng, waypoints, min_clearance, max_step):
    """The route from p to q (direct, or via a random waypoint) with the fewest steps:
    ``(steps, h, arcs)``, or None if every route passes within min_clearance of another atom."""
    d = p.shape[0]
    routes = [[p, q]] if p @ q > -1 + 1e-6 else []
    for _ in range(waypoints):
        w = rng.standard_normal(d)
        w = w / np.linalg.norm(w)
        if abs(p @ w) < 1 - 1e-6 and abs(w @ q) < 1 - 1e-6:
            routes.append([p, w, q])
    best = None
    for route in routes:
        arcs = list(zip(route[:-1], route[1:], strict=True))
        clearance = min(_arc_distance(others, a, b).min() for a, b in arcs)
        if clearance < min_clearance:
            continue
        h = min(max_step, clearance / _CLEARANCE_PER_STEP)
        count = sum(int(np.ceil(_angle(a, b) / h)) for a, b in arcs)
        if best is None or count < best[0]:
            best = (count, h, arcs)
    return best


def _steering_pieces(a, b, h, step_time):
    """(V, w, a, b) of the ⌈|ab|/h⌉ one-neuron pieces that carry an atom from a to b."""
    length = _angle(a, b)
    k = int(np.ceil(length / h))
    step = length / k
    r = 1.75 * step
    c = _cap_time_per_speed(1.5 * step, 0.5 * step, r) / step_time
    zero = np.zeros((a.shape[0], a.shape[0]))
    centres = [_arc(a, b, (s + 1.5) * step) for s in range(k)]
    return [(zero, c * m, m, -np.cos(r)) for m in centres]
