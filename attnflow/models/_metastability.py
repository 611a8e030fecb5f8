"""Dynamic metastability at large β: the time-rescaled staircase flow on the circle and the
collision model of its merges (Geshkovski, Koubbi, Polyanskiy, Rigollet 2024; docs/maths.md §10).

(USA) on the circle, paper (7.1), is the gradient ascent θ̇ = n∇E_β of the energy (7.4); its
metastable plateaux last e^{β(1 − cos u)} (u the gap to the next cluster), so at β = 1000 no
clock in physical time can follow it. The authors step instead in the arclength of the path:
their ``time_rescale_3`` takes normalised gradient steps θ ← θ + η log β ∇φ/|∇φ|, so that after
k steps s = kη is the arclength (in R^n, one coordinate per token) divided by log β. Along s
the energy climbs a staircase in finite time. :func:`rescaled_staircase` integrates that flow,

    dθ/ds = log β · g/|g|,   g_i = −Σ_j sin(θ_i − θ_j) e^{β(cos(θ_i − θ_j) − 1)} [/ Z_i for SA],

exactly rather than by fixed steps:

- g is evaluated with every exponential shifted by C = max β(cos(θ_i − θ_j) − 1) over pairs in
  different clusters (the direction g/|g| does not depend on C), so it neither underflows nor
  overflows for any β, however far apart the clusters are;
- β(1 − cos u) is computed as 2β sin²(u/2) (no cancellation for small gaps);
- adaptive Dormand–Prince 5(4) steps; two clusters whose gap satisfies 2β sin²(u/2) ≤ merge_tol
  are merged (mass-weighted mean angle, which the two-body flow conserves), and the merge is
  logged. In s two clusters meet at a finite s with constant speed, so the merge threshold costs
  O(log(1/merge_tol)) steps and moves φ by at most 2 m_a m_b · merge_tol;
- once one cluster is left (φ = 1) the flow stops: nothing divides 0 by 0 (the published script
  does, and returns NaN after the last merge).

:func:`collision_model` predicts the merge sequence from pairwise two-body merge times, and the
merge positions in s from the arclength of two-body merges.

:func:`modified_usa` is the staircase theorem's own dynamics (arXiv:2410.06833v1, §6): the same
loop with particles glued inside the collision radius, in the theorem's time; its closed forms
(collision radius, pair merge time, plateaus) are in ``attnflow.theory``.
"""

import functools
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from .._check import (
    check_angles,
    check_beta_above_one,
    check_finite_scalar,
    check_int,
    check_positive_scalar,
    check_tolerance,
    expected,
)
from .._integrators._dopri5 import dopri5_step, error_norm, step_factor
from .._legacy_access import LegacyItemAccess
from ..theory._metastability import two_body_log_time
from ..theory._staircase import collision_radius


class StaircaseMerge(LegacyItemAccess):
    """One merge of :func:`attnflow.models.rescaled_staircase` or
    :func:`attnflow.models.modified_usa`. It was a dict whose time key was named by the clock
    (``"s"`` or ``"t"``): ``merge["s"]`` (``merge["t"]``) still returns ``merge.time``, and the
    other keys their fields, with a DeprecationWarning, for one release.

    Attributes:
        time: when the merge happens, on the run's clock.
        clusters_before, clusters_after: the number of clusters before and after.
        masses: [m_a, m_b] the masses of the two clusters (the survivor first in the modified USA).
        tokens: the smallest token index on each side.
        energy_before, energy_after: φ just before and after the merge.
        clock: ``"s"`` (the arclength clock of rescaled_staircase) or ``"t"`` (the new time of
            modified_usa).
    """

    time: float
    clusters_before: int
    clusters_after: int
    masses: list[float]
    tokens: list[int]
    energy_before: float
    energy_after: float
    clock: str = eqx.field(static=True)


class StaircaseRun(LegacyItemAccess):
    """The path of :func:`attnflow.models.rescaled_staircase` or
    :func:`attnflow.models.modified_usa`: one row per accepted step and per merge. It was a dict
    whose time key was named by the clock: ``run["s"]`` (``run["t"]``) still returns
    ``run.time``, and the other keys their fields, with a DeprecationWarning, for one release.

    Attributes:
        time: (R,) the clock: s (arclength / log β) or t (the staircase time).
        theta: (R, n) every token, merged ones at their cluster's angle.
        energy: (R,) φ = (1/n²) Σ_ij e^{β(cos(θ_i − θ_j) − 1)}.
        levels: (R,) Σ_q m_q² over the cluster masses.
        counts: (R,) the number of clusters.
        merges: the merges, a list of :class:`attnflow.models.StaircaseMerge`.
        steps: the steps taken (accepted and rejected).
        finished: one cluster is left.
        clock: ``"s"`` or ``"t"``, the name of the time variable.
    """

    time: np.ndarray
    theta: np.ndarray
    energy: np.ndarray
    levels: np.ndarray
    counts: np.ndarray
    merges: list[StaircaseMerge]
    steps: int
    finished: bool
    clock: str = eqx.field(static=True)


class CollisionEvent(LegacyItemAccess):
    """One merge predicted by :func:`attnflow.models.collision_model`. It was a dict:
    ``event["tokens"]`` still returns ``event.tokens``, with a DeprecationWarning, for one
    release.

    Attributes:
        tokens: the smallest token index on each side.
        masses: [m_a, m_b] the masses of the two clusters.
        gap: u, their gap.
        log_time: the log two-body merge time.
        s: the predicted merge position on the arclength clock of rescaled_staircase.
        level: Σ m_q² after the merge.
    """

    tokens: list[int]
    masses: list[float]
    gap: float
    log_time: float
    s: float
    level: float


def _half_gap(diff):
    """2 sin²(Δ/2) = 1 − cos Δ without cancellation."""
    return 2 * jnp.sin(0.5 * diff) ** 2


def _direction(theta, labels, beta, log_beta, softmax):
    diff = theta[:, None] - theta[None, :]
    exponent = -beta * _half_gap(diff)
    other = labels[:, None] != labels[None, :]
    top = jnp.max(jnp.where(other, exponent, -jnp.inf))
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    # Same-cluster pairs contribute sin 0 = 0; masked so that e^{0 − top} cannot overflow.
    weight = jnp.where(other, jnp.exp(jnp.where(other, exponent - top, 0.0)), 0.0)
    pull = -jnp.sum(jnp.sin(diff) * weight, axis=1)
    if softmax:
        pull = pull / jnp.sum(jnp.exp(exponent), axis=1)
    norm = jnp.linalg.norm(pull)
    safe = jnp.where(norm > 0, norm, 1.0)
    return jnp.where(norm > 0, log_beta * pull / safe, 0.0)


# How far (in log tan(u/2)) below the collision radius a step of the modified USA may end.
_LANDING = 1e-9


def _closest_log_tan(theta, labels):
    """log tan(u/2) for the closest pair u of tokens in different clusters (+inf if none)."""
    gap = _half_gap(theta[:, None] - theta[None, :])
    other = labels[:, None] != labels[None, :]
    closest = jnp.min(jnp.where(other, gap, 2.0))
    return jnp.where(jnp.any(other), 0.5 * jnp.log(closest / (2 - closest)), jnp.inf)


def _theorem_field(theta, labels, beta, log_beta):
    """The modified (USA) of GKPR24 §6 in the reparametrised time: survivors only (token i
    survives while ``labels[i] == i``), each with weight 1/|S|², times the time change
    log β e^{β(1 − cos u)} of the closest pair u in different clusters."""
    n = theta.shape[0]
    diff = theta[:, None] - theta[None, :]
    exponent = -beta * _half_gap(diff)
    other = labels[:, None] != labels[None, :]
    top = jnp.max(jnp.where(other, exponent, -jnp.inf))
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    alive = labels == jnp.arange(n)
    pair = other & alive[None, :]
    weight = jnp.where(pair, jnp.exp(jnp.where(pair, exponent - top, 0.0)), 0.0)
    pull = -jnp.sum(jnp.sin(diff) * weight, axis=1)
    return log_beta * pull / jnp.sum(alive).astype(theta.dtype) ** 2


def _energy(theta, beta):
    diff = theta[:, None] - theta[None, :]
    return jnp.mean(jnp.exp(-beta * _half_gap(diff)))


def _levels(labels):
    n = labels.shape[0]
    masses = jnp.sum(labels[None, :] == jnp.arange(n)[:, None], axis=1) / n
    return jnp.sum(masses**2), jnp.sum(masses > 0)


def _record(c, index, beta):
    """Write the current state of carry ``c`` into row ``index`` of its paths."""
    level, count = _levels(c["labels"])
    level = level.astype(c["theta"].dtype)
    return {
        **c,
        "s_path": c["s_path"].at[index].set(c["s"]),
        "theta_path": c["theta_path"].at[index].set(c["theta"]),
        "energy_path": c["energy_path"].at[index].set(_energy(c["theta"], beta)),
        "level_path": c["level_path"].at[index].set(level),
        "count_path": c["count_path"].at[index].set(count),
        "rows": index + 1,
    }


def _mergeable(theta, previous, labels, beta, merge_tol):
    n = theta.shape[0]
    diff = theta[:, None] - theta[None, :]
    close = beta * _half_gap(diff) <= merge_tol
    # A pair whose (small) signed gap changed sign over the last step collided inside it: the
    # flow cannot cross, only a loose error estimate can step over the collision.
    before = jnp.sin(previous[:, None] - previous[None, :])
    after = jnp.sin(diff)
    near = (jnp.cos(diff) > 0) & (jnp.cos(previous[:, None] - previous[None, :]) > 0)
    crossed = near & (before * after < 0)
    close = (close | crossed) & (labels[:, None] != labels[None, :])
    flat = jnp.argmax(close.reshape(-1))
    return jnp.any(close), flat // n, flat % n


def _merge(c, beta, merge_tol, glue):
    """Merge the first mergeable pair of clusters and log the merge: at their centre of mass, or
    (``glue``, the modified USA) at the survivor, the cluster of the larger label, whose
    representative keeps moving while the other cluster is glued to it."""
    n, dtype = c["theta"].shape[0], c["theta"].dtype
    _, i, j = _mergeable(c["theta"], c["previous"], c["labels"], beta, merge_tol)
    a, b = c["labels"][i], c["labels"][j]
    if glue:
        a, b = jnp.maximum(a, b), jnp.minimum(a, b)
    in_a, in_b = c["labels"] == a, c["labels"] == b
    m_a, m_b = jnp.sum(in_a).astype(dtype), jnp.sum(in_b).astype(dtype)
    if glue:
        centre = c["theta"][a]
    else:
        diff = c["theta"][j] - c["theta"][i]
        as_complex = jnp.complex128 if diff.dtype == jnp.float64 else jnp.complex64
        gap = jnp.angle(jnp.exp(1j * diff.astype(as_complex)))
        centre = c["theta"][i] + m_b / (m_a + m_b) * gap
    theta = jnp.where(in_a | in_b, centre, c["theta"])
    labels = jnp.where(in_b, a, c["labels"])
    k = c["merges"]
    before = _energy(c["theta"], beta)
    log = {
        "merge_s": c["merge_s"].at[k].set(c["s"]),
        "merge_masses": c["merge_masses"].at[k].set(jnp.stack([m_a, m_b]) / n),
        "merge_tokens": c["merge_tokens"].at[k].set(jnp.stack([a, b])),
        "merge_energy": c["merge_energy"].at[k].set(jnp.stack([before, _energy(theta, beta)])),
    }
    c = {**c, **log, "theta": theta, "previous": theta, "labels": labels, "merges": k + 1}
    return _record(c, c["rows"], beta)


def _initial_carry(theta0, k1, rows):
    n, dtype = theta0.shape[0], theta0.dtype
    zeros = jnp.zeros((rows,), dtype)
    return {
        "theta": theta0,
        "previous": theta0,
        "labels": jnp.arange(n),
        "s": jnp.zeros((), dtype),
        "h": jnp.asarray(1e-3, dtype),
        "k1": k1,
        "steps": jnp.zeros((), int),
        "rows": jnp.zeros((), int),
        "merges": jnp.zeros((), int),
        "s_path": zeros,
        "theta_path": jnp.zeros((rows, n), dtype),
        "energy_path": zeros,
        "level_path": zeros,
        "count_path": jnp.zeros((rows,), int),
        "merge_s": jnp.zeros((n,), dtype),
        "merge_masses": jnp.zeros((n, 2), dtype),
        "merge_tokens": jnp.zeros((n, 2), int),
        "merge_energy": jnp.zeros((n, 2), dtype),
    }


@functools.partial(jax.jit, static_argnames=("max_steps", "scheme"))
def _run(theta0, beta, s_max, rtol, atol, merge_tol, max_steps, scheme):
    """The shared loop: ``scheme`` is ``"usa"`` or ``"sa"`` (the arclength flow of
    :func:`rescaled_staircase`) or ``"theorem"`` (:func:`modified_usa`)."""
    n = theta0.shape[0]
    log_beta = jnp.log(beta)
    glue = scheme == "theorem"
    if glue:
        field = functools.partial(_theorem_field, beta=beta, log_beta=log_beta)
    else:
        field = functools.partial(_direction, beta=beta, log_beta=log_beta, softmax=scheme == "sa")
    rows = max_steps + n + 1

    def mergeable(c):
        return _mergeable(c["theta"], c["previous"], c["labels"], beta, merge_tol)[0]

    def step(c):
        theta, labels = c["theta"], c["labels"]
        h = jnp.minimum(c["h"], s_max - c["s"])
        new, k_new, error = dopri5_step(lambda y: field(y, labels), theta, c["k1"], h)
        ratio = error_norm(error, theta, new, rtol, atol)
        # A growth of at most 5 per step and no cap after a rejection: the rule the default
        # tolerances (and the merge placement they give) were chosen with.
        factor = step_factor(ratio, max_factor=5.0)
        c = {**c, "h": h * factor, "steps": c["steps"] + 1}
        ok = ratio <= 1
        if glue:
            # The merge time is the theorem's observable: a step that carries the closest pair
            # past the collision radius is retried, shortened by the secant in log tan(u/2)
            # (linear in time for the closest pair), until it ends within _LANDING below it.
            start, end = _closest_log_tan(theta, labels), _closest_log_tan(new, labels)
            target = 0.5 * jnp.log(merge_tol / (2 * beta - merge_tol))
            overshoot = ok & (end < target - _LANDING)
            shorter = h * (start - target + 0.5 * _LANDING) / (start - end)
            c = {**c, "h": jnp.where(overshoot, shorter, c["h"])}
            ok = ok & ~overshoot

        def accepted(c):
            c = {**c, "theta": new, "previous": theta, "s": c["s"] + h, "k1": k_new}
            return _record(c, c["rows"], beta)

        return jax.lax.cond(ok, accepted, lambda c: c, c)

    def body(c):
        can_merge = mergeable(c)
        c = jax.lax.cond(can_merge, lambda c: _merge(c, beta, merge_tol, glue), step, c)
        k1 = jax.lax.cond(can_merge, lambda: field(c["theta"], c["labels"]), lambda: c["k1"])
        return {**c, "k1": k1}

    def cond(c):
        _, count = _levels(c["labels"])
        # A zero direction is a critical point only if no merge is pending: in float32 a step can
        # land two clusters on the same angle, where the direction vanishes until they merge.
        can_merge = mergeable(c)
        stalled = jnp.all(c["k1"] == 0) & ~can_merge
        return (
            (count > 1)
            & (c["s"] < s_max)
            & (c["steps"] < max_steps)
            & ~stalled
            & (c["rows"] < rows - 1)
        )

    c = _initial_carry(theta0, field(theta0, jnp.arange(n)), rows)
    c = _record(c, 0, beta)
    return jax.lax.while_loop(cond, body, c)


def _check_angles(theta0, beta):
    """Angles (n,), n >= 2, finite, as a floating array; β a finite scalar > 1."""
    theta0 = np.asarray(theta0)
    if theta0.ndim != 1 or theta0.shape[0] < 2:
        raise ValueError(f"theta0: expected angles of shape (n,) with n >= 2, got {theta0.shape}")
    if not np.issubdtype(theta0.dtype, np.floating):
        theta0 = theta0.astype(float)
    if not np.all(np.isfinite(theta0)):
        raise ValueError("theta0: expected finite angles, got NaN or inf")
    beta = float(check_finite_scalar(beta, "beta"))
    if not beta > 1:
        expected("beta", "a finite scalar > 1 (the flow uses log β)", beta)
    return theta0


def rescaled_staircase(
    theta0: ArrayLike,
    beta: float,
    *,
    s_max: float = 100.0,
    normalization: Literal["n", "softmax"] = "n",
    rtol: float | None = None,
    atol: float | None = None,
    merge_tol: float = 1e-8,
    max_steps: int = 20000,
) -> StaircaseRun:
    """The time-rescaled staircase flow on the circle (GKPR24; the authors' ``time_rescale_3``,
    integrated exactly): dθ/ds = log β · ∇φ/|∇φ| from angles ``theta0``, with clusters merged
    when 2β sin²(u/2) ≤ ``merge_tol``, until one cluster is left or s = ``s_max``.

    φ = (1/n²) Σ_ij e^{β(cos(θ_i − θ_j) − 1)} = 2β e^{−β} E_β ∈ (0, 1] is the normalised energy
    (7.4); on a plateau it is Σ_q m_q² over the cluster masses (plus cross terms
    m_q m_r e^{β(cos u_qr − 1)}). s is the Euclidean arclength of the path in R^n divided by
    log β. ``normalization="softmax"`` rescales the (SA) direction instead (g_i / Z_i).
    See the module docstring for the numerics; n = 32 at β = 1000 takes about 2000 steps.

    Args:
        theta0: initial angles (n,), float32 or float64.
        beta: β > 1.
        s_max: the largest s integrated.
        normalization: ``"n"`` (USA, default: the staircase theorem) or ``"softmax"`` (SA).
        rtol, atol: Dormand–Prince tolerances on the angles (default 1e-9, 1e-11 in float64,
            3e-7, 3e-8 in float32: looser float32 tolerances step over collisions and
            misplace merges in s by several per cent).
        merge_tol: merge two clusters when β(1 − cos u) ≤ merge_tol (φ moves by at most
            2 m_a m_b merge_tol at a merge).
        max_steps: step budget (accepted and rejected).

    Returns:
        A :class:`attnflow.models.StaircaseRun` with ``clock="s"``: ``time`` the arclength s
        (R,), ``theta`` (R, n) (every token, merged ones at their cluster's angle), ``energy``
        φ (R,), ``levels`` Σ m_q² (R,), ``counts`` (R,), one row per accepted step and per
        merge; ``merges``: a list of :class:`attnflow.models.StaircaseMerge` (``time``,
        ``clusters_before``, ``clusters_after``, ``masses``, ``tokens`` (the smallest token
        index on each side), ``energy_before``, ``energy_after``); ``steps`` and ``finished``
        (one cluster left). It was a dict: ``run["s"]`` and the other keys still work for one
        release, with a DeprecationWarning.

    Example:
        >>> import numpy as np
        >>> from attnflow.models import rescaled_staircase
        >>> run = rescaled_staircase(np.array([0.0, 0.3, 1.2, 2.0]), 100.0)
        >>> len(run.merges), int(run.counts[-1]), round(float(run.energy[-1]), 12)
        (3, 1, 1.0)
    """
    theta0 = _check_angles(theta0, beta)
    if normalization not in ("n", "softmax"):
        raise ValueError(
            f"normalization: expected 'n' (USA) or 'softmax' (SA), got {normalization!r}"
        )
    merge_tol = check_tolerance(merge_tol, "merge_tol")
    s_max = check_positive_scalar(s_max, "s_max")
    rtol = None if rtol is None else check_tolerance(rtol, "rtol")
    atol = None if atol is None else check_tolerance(atol, "atol")
    max_steps = check_int(max_steps, "max_steps", low=1)
    theta = jnp.asarray(theta0)
    dtype = theta.dtype
    single = dtype == jnp.float32
    rtol = (3e-7 if single else 1e-9) if rtol is None else rtol
    atol = (3e-8 if single else 1e-11) if atol is None else atol
    scheme = "sa" if normalization == "softmax" else "usa"
    return _simulate(theta, beta, s_max, rtol, atol, merge_tol, max_steps, scheme, "s")


def _simulate(theta, beta, horizon, rtol, atol, merge_tol, max_steps, scheme, clock):
    """:func:`_run` on checked arguments (the scalars in the angles' dtype), collected on the
    host with its ``clock``."""
    dtype = theta.dtype
    scalars = (jnp.asarray(value, dtype) for value in (beta, horizon, rtol, atol, merge_tol))
    out = _run(theta, *scalars, int(max_steps), scheme)
    return _collect(out, theta.shape[0], clock)


def _collect(out, n, clock):
    """The :class:`StaircaseRun` returned by :func:`rescaled_staircase` and :func:`modified_usa`,
    with the time variable named ``clock``."""
    out = jax.tree_util.tree_map(np.asarray, out)
    rows = int(out["rows"])
    counts = out["count_path"][:rows]
    members = {i: [i] for i in range(n)}
    merges = []
    for k in range(int(out["merges"])):
        a, b = (int(t) for t in out["merge_tokens"][k])
        merges.append(
            StaircaseMerge(
                time=float(out["merge_s"][k]),
                clusters_before=n - k,
                clusters_after=n - k - 1,
                masses=[float(m) for m in out["merge_masses"][k]],
                tokens=sorted([min(members[a]), min(members[b])]),
                energy_before=float(out["merge_energy"][k, 0]),
                energy_after=float(out["merge_energy"][k, 1]),
                clock=clock,
            )
        )
        members[a] = members[a] + members.pop(b)
    return StaircaseRun(
        time=out["s_path"][:rows],
        theta=out["theta_path"][:rows],
        energy=out["energy_path"][:rows],
        levels=out["level_path"][:rows],
        counts=counts,
        merges=merges,
        steps=int(out["steps"]),
        finished=bool(counts[-1] == 1),
        clock=clock,
    )


def collision_model(theta0: ArrayLike, beta: float) -> list[CollisionEvent]:
    """The merge sequence predicted by pairwise two-body merges (GKPR24's heuristic; the
    authors' ``algo_traj_1`` merges the closest pair, the β → ∞ limit of this).

    Clusters start as the tokens (mass 1/n each). Repeatedly, among circularly adjacent clusters
    the pair with the smallest two-body merge time (:func:`attnflow.theory.two_body_log_time`)
    merges into one
    cluster at their mass-weighted mean angle (conserved by the two-body flow) while the others
    wait. The rescaled flow moves only that pair, along a straight segment of length
    u √(n m_a m_b / (m_a + m_b)) in R^n, so the merge happens at

        s_k = Σ_{l ≤ k} u_l √(n m_a m_b / (m_a + m_b)) / log β.

    Returns one :class:`attnflow.models.CollisionEvent` per merge: ``tokens`` (the smallest token
    index on each side), ``masses``, ``gap``, ``log_time`` (log two-body time), ``s``
    (predicted), ``level`` (Σ m_q² after). The old dict keys (``event["tokens"]``) still work for
    one release, with a DeprecationWarning.

    Example:
        >>> import numpy as np
        >>> from attnflow.models import collision_model
        >>> [e.tokens for e in collision_model(np.array([0.0, 0.3, 1.2, 2.0]), 100.0)]
        [[0, 1], [2, 3], [0, 2]]
    """
    theta = np.mod(check_angles(theta0, "theta0", distinct=True), 2 * np.pi)
    n = len(theta)
    order = np.argsort(theta)
    clusters = [{"angle": theta[i], "mass": 1 / n, "tokens": [int(i)]} for i in order]
    events, s = [], 0.0
    while len(clusters) > 1:
        best = None
        for a in range(len(clusters)):
            b = (a + 1) % len(clusters)
            left, right = clusters[a], clusters[b]
            gap = float(np.mod(right["angle"] - left["angle"], 2 * np.pi))
            if gap > np.pi:
                continue
            log_t = two_body_log_time(gap, left["mass"] + right["mass"], beta)
            if best is None or log_t < best[0]:
                best = (log_t, a, b, gap)
        if best is None:  # two antipodal clusters: a critical point, no merge
            break
        log_t, a, b, gap = best
        left, right = clusters[a], clusters[b]
        m_a, m_b = left["mass"], right["mass"]
        s += gap * math.sqrt(n * m_a * m_b / (m_a + m_b)) / math.log(beta)
        merged = {
            "angle": np.mod(left["angle"] + m_b / (m_a + m_b) * gap, 2 * np.pi),
            "mass": m_a + m_b,
            "tokens": sorted(left["tokens"] + right["tokens"]),
        }
        clusters[a] = merged
        del clusters[b]
        events.append(
            CollisionEvent(
                tokens=sorted([min(left["tokens"]), min(right["tokens"])]),
                masses=[m_a, m_b],
                gap=gap,
                log_time=log_t,
                s=s,
                level=float(sum(c["mass"] ** 2 for c in clusters)),
            )
        )
    return events


def modified_usa(
    theta0: ArrayLike,
    beta: float,
    *,
    t_max: float = math.inf,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_steps: int = 20000,
) -> StaircaseRun:
    """The modified USA on the circle in the staircase time (arXiv:2410.06833v1, §6, Definition
    "modified USA" and compt: reparam; the statement is with the staircase closed forms of
    ``attnflow.theory``, :func:`attnflow.theory.staircase_plateaus`): angles ``theta0`` (n,)
    follow

        dθ_i/dt = (log β/|S|²) Σ_{j ∈ S} e^{β(cos(θ_j − θ_i) − cos u)} sin(θ_j − θ_i),   i ∈ S,

    (USA) times the time change τ̇_β = log β e^{β(1 − cos u)}, u the closest pair of survivors;
    the exponents are ≤ 0, so any β works. Merge rule: when two survivors come within
    1/√(β log β) (:func:`collision_radius`), the one of smaller token index is glued to the other
    (it moves with it from then on and leaves S); the step that crosses the radius is shortened
    so that the merge time is located to ~1e-9/(c log β). Integrated by the package's
    Dormand–Prince loop (the one of :func:`attnflow.models.rescaled_staircase`) in the dtype of
    ``theta0``
    (float64 needs ``jax_enable_x64``; the default tolerances are for float64), until one
    particle is left or t = ``t_max``. Its closed forms (merge times and plateau levels) are
    :func:`attnflow.theory.staircase_plateaus` and :func:`attnflow.theory.pair_merge_time`.

    Returns a :class:`attnflow.models.StaircaseRun` with ``clock="t"``: ``time`` (R,) the new
    time t, ``theta`` (R, n) (glued particles at their survivor's angle), ``energy``
    φ = 2β E_β (R,), ``levels`` Σ m_q² (R,) with m_q the fraction of tokens glued together,
    ``counts`` (R,); ``merges``: a list of :class:`attnflow.models.StaircaseMerge` (``time``,
    ``clusters_before``, ``clusters_after``, ``masses`` [survivor, glued], ``tokens``,
    ``energy_before``, ``energy_after``); ``steps``; ``finished``. The old dict keys (``run["t"]``,
    ``merge["t"]``) still work for one release, with a DeprecationWarning.

    Example:
        >>> import numpy as np
        >>> from attnflow.models import modified_usa
        >>> run = modified_usa(0.4 * np.array([0.0, 1.0, 3.0, 7.0]), 1000.0)
        >>> [round(m.time, 3) for m in run.merges]
        [4.074, 7.006, 8.644]
        >>> [round(m.energy_after, 6) for m in run.merges]
        [0.375, 0.625, 1.0]
    """
    beta = check_beta_above_one(beta)
    theta = check_angles(theta0, "theta0")
    real = isinstance(t_max, (int, float, np.integer, np.floating))
    if isinstance(t_max, bool) or not real or not float(t_max) > 0:
        expected("t_max", "a time > 0 (inf: until one particle is left)", t_max)
    rtol, atol = float(check_tolerance(rtol, "rtol")), float(check_tolerance(atol, "atol"))
    max_steps = check_int(max_steps, "max_steps", low=1)
    theta = jnp.asarray(theta)
    merge_tol = 2 * beta * math.sin(collision_radius(beta) / 2) ** 2
    return _simulate(theta, beta, t_max, rtol, atol, merge_tol, max_steps, "theorem", "t")
