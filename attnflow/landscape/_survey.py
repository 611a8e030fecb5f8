"""Surveys of the critical points of the interaction energy (GLPR Problem 3, docs/maths.md §6–7).

Problem 3 asks whether, on the circle and for every β, each critical point of E_β other than
synchrony is a strict saddle in the paper's sense (the Hessian has a positive eigenvalue, so the
ascent flow escapes it). A survey seeds the Newton search of :func:`attnflow.find_critical_point`
from many configurations, deduplicates the critical points modulo rotations and permutations,
and classifies each with :func:`attnflow.classify_critical_point`.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import PRNGKeyArray

from .._check import (
    MAX_ARRAY_ELEMENTS,
    MAX_STEPS_LIMIT,
    check_beta,
    check_budget,
    check_int,
    check_key,
    check_positive_scalar,
    check_real_values,
    check_tokens,
    check_tolerance,
)
from .._diagnostics import count_clusters
from .._energy import InteractionEnergy
from .._fields._self_attention import SelfAttention
from .._layers import layers
from ._critical import classify_critical_point, find_critical_point

KINDS = ("local maximum", "local minimum", "strict saddle", "degenerate")


def _great_circle(angles, d):
    """Points (cos a, sin a, 0, …, 0) of S^{d−1}."""
    angles = np.asarray(angles, dtype=np.float64)
    x = np.zeros((angles.size, d))
    x[:, 0], x[:, 1] = np.cos(angles), np.sin(angles)
    return x


def symmetric_configurations(n: int, d: int) -> dict[str, np.ndarray]:
    """Symmetric critical points of every O(d)-invariant pair energy, as seeds (float64 NumPy).

    - ``synchronised``: all tokens at e_1 (the global maximum);
    - ``polygon``: n equally spaced points on a great circle;
    - ``antipodal k|n-k``: k tokens at e_1 and n − k at −e_1 (Lemma A.2's two groups);
    - ``clusters m``: m equally spaced cluster sites on a great circle holding ⌈n/m⌉ or ⌊n/m⌋
      tokens (the most balanced split; exactly critical when m divides n);
    - for d ≥ 3: ``simplex`` (n ≤ d + 1) and ``cross-polytope`` (n = 2d).

    Example:
        >>> import attnflow as af
        >>> sorted(af.landscape.symmetric_configurations(4, 2))
        ['antipodal 1|3', 'antipodal 2|2', 'clusters 3', 'polygon', 'synchronised']
    """
    n = check_int(n, "n", low=2)
    d = check_int(d, "d", low=2)
    check_budget(
        "n",
        n * n * d,
        MAX_ARRAY_ELEMENTS,
        what="numbers in about n/2 configurations of n x d",
        factors={"n": n, "d": d},
    )
    configs = {
        "synchronised": _great_circle(np.zeros(n), d),
        "polygon": _great_circle(2 * np.pi * np.arange(n) / n, d),
    }
    for k in range(1, n // 2 + 1):
        configs[f"antipodal {k}|{n - k}"] = _great_circle(np.where(np.arange(n) < k, 0, np.pi), d)
    for m in range(3, n):
        sites = np.arange(n) % m
        configs[f"clusters {m}"] = _great_circle(2 * np.pi * np.sort(sites) / m, d)
    if d >= 3 and n <= d + 1:
        centred = np.eye(n) - 1.0 / n
        q, _ = np.linalg.qr(centred[:, : n - 1])
        points = np.zeros((n, d))
        points[:, : n - 1] = centred @ q
        configs["simplex"] = points / np.linalg.norm(points, axis=1, keepdims=True)
    if d >= 3 and n == 2 * d:
        configs["cross-polytope"] = np.concatenate([np.eye(d), -np.eye(d)])
    return configs


def configuration_signature(x) -> np.ndarray:
    """Invariants of x under O(d) and permutations, used to deduplicate critical points.

    The sorted pairwise inner products ⟨x_i, x_j⟩ (i < j), then the sorted per-token sums
    Σ_j ⟨x_i, x_j⟩² and Σ_j ⟨x_i, x_j⟩³. Equal for configurations related by a rotation,
    reflection or relabelling; the converse can fail (homometric configurations share them), so
    deduplication may merge such rare pairs.

    Example:
        >>> import numpy as np, attnflow as af
        >>> x = af.landscape.symmetric_configurations(5, 2)["polygon"]
        >>> moved = x[::-1] @ np.array([[0.0, -1.0], [1.0, 0.0]]).T  # relabel and rotate
        >>> sig = af.landscape.configuration_signature
        >>> bool(np.allclose(sig(x), sig(moved)))
        True
    """
    x = np.asarray(check_tokens(x, "x"), dtype=np.float64)
    gram = x @ x.T
    upper = np.sort(gram[np.triu_indices(x.shape[0], 1)])
    return np.concatenate(
        [upper, np.sort(np.sum(gram**2, axis=1)), np.sort(np.sum(gram**3, axis=1))]
    )


class SurveyPoint(eqx.Module):
    """One critical point found by :func:`attnflow.landscape.survey_critical_points` (up to
    rotation/permutation).

    Attributes:
        x: (n, d) the critical point (NumPy float64).
        kind: as in :class:`attnflow.landscape.Classification`.
        eigenvalues: Hessian spectrum with the orbit modes removed (for E_β with weights 1/n).
        num_positive, num_negative, num_zero, orbit_dimension: from the classification.
        energy: E_β(x) with weights 1/n (paper (7.4) on the circle).
        normalized_energy: 2β e^{−β} E_β(x) = E_β(x)/E_β(synchrony): in (0, 1] for β > 0
            (Σ_q m_q² for point clusters of masses m_q as β → ∞); ≥ 1 for β < 0, where E_β < 0
            and synchrony is still the global maximum.
        num_clusters: number of distinct positions (⟨x_i, x_j⟩ ≥ 1 − 1e-6 merges).
        synchronised: all tokens at one point (the global maximum).
        grad_norm: ‖grad E_β‖ at x (weights 1/n, product round metric).
        source: the seed family that found it first ("random", "flow t=…", or a symmetric name).
        hits: how many seeds converged to it.
    """

    x: np.ndarray
    kind: str
    eigenvalues: np.ndarray
    num_positive: int
    num_negative: int
    num_zero: int
    orbit_dimension: int
    energy: float
    normalized_energy: float
    num_clusters: int
    synchronised: bool
    grad_norm: float
    source: str
    hits: int

    @property
    def is_paper_strict_saddle(self) -> bool:
        """The paper's strict saddle: a positive Hessian eigenvalue (ascent escapes)."""
        return self.num_positive >= 1

    @property
    def is_counterexample(self) -> bool:
        """A non-synchronised local maximum: a counterexample to Problem 3."""
        return self.kind == "local maximum" and not self.synchronised

    @property
    def is_inconclusive(self) -> bool:
        """Non-synchronised, degenerate, no positive eigenvalue: second order decides nothing."""
        return self.kind == "degenerate" and self.num_positive == 0 and not self.synchronised


class LandscapeSurvey(eqx.Module):
    """The outcome of :func:`attnflow.landscape.survey_critical_points` for one (n, d, β).

    Attributes:
        n, d, beta: the system surveyed.
        num_seeds: number of starting configurations.
        num_converged: how many searches reached ‖grad‖ ≤ gtol.
        points: the distinct critical points found, sorted by decreasing energy.
    """

    n: int
    d: int
    beta: float
    num_seeds: int
    num_converged: int
    points: tuple[SurveyPoint, ...]

    @property
    def counts(self) -> dict[str, int]:
        """Number of distinct critical points of each kind."""
        return {kind: sum(p.kind == kind for p in self.points) for kind in KINDS}

    @property
    def counterexample(self) -> bool:
        """Whether a non-synchronised local maximum was found (a counterexample to Problem 3)."""
        return any(p.is_counterexample for p in self.points)

    @property
    def inconclusive(self) -> bool:
        """Whether a non-synchronised degenerate point without a positive eigenvalue was found."""
        return any(p.is_inconclusive for p in self.points)


@eqx.filter_jit
def _flow_snapshots(beta, x0, num_layers, step, snapshot_layers):
    traj = jax.vmap(lambda x: layers(SelfAttention(beta), x, num_layers, step))(x0)
    return traj[:, snapshot_layers]


@eqx.filter_jit
def _batched_search(energy, seeds, weights, gtol, max_steps):
    def search(x):
        return find_critical_point(energy, x, weights, gtol=gtol, max_steps=max_steps, throw=False)

    return jax.vmap(search)(seeds)


def survey_critical_points(
    n: int,
    d: int,
    beta: float,
    *,
    key: PRNGKeyArray,
    num_random: int = 32,
    num_flow: int = 8,
    flow_times: tuple[float, ...] = (10.0, 100.0, 1000.0),
    flow_step: float = 0.1,
    gtol: float = 1e-10,
    max_steps: int = 100,
    dedup_tol: float = 1e-6,
) -> LandscapeSurvey:
    """Enumerate, deduplicate and classify critical points of E_β on (S^{d−1})^n.

    Seeds: ``num_random`` uniform configurations; the metastable states of ``num_flow`` (SA)
    trajectories (the discrete Transformer :func:`attnflow.layers` with step ``flow_step``)
    sampled at ``flow_times``; and :func:`attnflow.landscape.symmetric_configurations`. From each
    seed,
    :func:`attnflow.find_critical_point` converges to a critical point of any index (all seeds
    in one vmapped batch). Converged points are deduplicated modulo O(d) and permutations with
    :func:`attnflow.landscape.configuration_signature` (max difference ≤ ``dedup_tol``) and
    classified.

    The search runs on E_β with weights e^{−|β|/2}/n, i.e. e^{−|β|} × the energy (7.4), which
    has the same critical points and kinds but an O(1/n) gradient for every β, so the absolute
    ``gtol`` means the same at all β; reported energies and spectra use the weights 1/n.

    β ≠ 0 of either sign (docs/conventions.md, "Negative β"): at n = 3, d = 2 the survey finds
    the equilateral triangle as a non-synchronised local maximum (``counterexample``) for
    β < −2/3 and not above (arXiv:2507.22857).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> s = af.landscape.survey_critical_points(
        ...     3, 2, 1.0, key=jr.key(0), num_random=4, num_flow=0
        ... )
        >>> s.counts["local maximum"], s.counterexample
        (1, False)
    """
    n = check_int(n, "n", low=2)
    d = check_int(d, "d", low=2)
    beta = float(check_beta(beta, positive=True, signed=True))
    key = check_key(key)
    num_random = check_int(num_random, "num_random", low=0)
    num_flow = check_int(num_flow, "num_flow", low=0)
    flow_step = float(check_positive_scalar(flow_step, "flow_step"))
    flow_times = tuple(
        float(t) for t in np.ravel(check_real_values(flow_times, "flow_times", low=0))
    )
    if num_flow and flow_times:
        num_layers = max(round(t / flow_step) for t in flow_times)
        check_budget(
            "flow_times",
            num_layers,
            MAX_STEPS_LIMIT,
            what="layers (max(flow_times) / flow_step)",
            hint="shorten flow_times or lengthen flow_step",
        )
        check_budget(
            "flow_times",
            num_flow * (num_layers + 1) * n * d,
            MAX_ARRAY_ELEMENTS,
            what="numbers in the flow trajectories (num_flow x layers x n x d)",
            hint="shorten flow_times, lengthen flow_step or lower num_flow",
        )
    gtol = float(check_tolerance(gtol, "gtol"))
    max_steps = check_int(max_steps, "max_steps", low=1)
    dedup_tol = float(check_tolerance(dedup_tol, "dedup_tol"))
    if not jax.config.jax_enable_x64:
        raise ValueError(
            "survey_critical_points needs float64 (gtol ~ 1e-10): call "
            "jax.config.update('jax_enable_x64', True) first"
        )
    seeds, sources = _seeds(key, n, d, beta, num_random, num_flow, flow_times, flow_step)
    seeds = np.concatenate(seeds)
    seeds = seeds / np.linalg.norm(seeds, axis=-1, keepdims=True)
    energy = InteractionEnergy(beta)
    search_weights = jnp.full((n,), math.exp(-abs(beta) / 2) / n)
    # gtol = 0: iterate to the rounding floor (the search stops once the Newton step is below
    # resolution), so that flat directions — far clusters, whose eigenvalues are ~e^{−2β}
    # relative — are converged too; ``gtol`` then only decides which seeds count.
    found = _batched_search(energy, jnp.asarray(seeds), search_weights, jnp.zeros(()), max_steps)
    converged = np.asarray(found.grad_norm) <= gtol

    unique = _deduplicate(found.x, converged, sources, dedup_tol)

    points = [_survey_point(energy, beta, *entry) for entry in unique]
    points.sort(key=lambda p: -p.energy)
    return LandscapeSurvey(
        n=n,
        d=d,
        beta=float(beta),
        num_seeds=len(sources),
        num_converged=int(converged.sum()),
        points=tuple(points),
    )


def _seeds(key, n, d, beta, num_random, num_flow, flow_times, flow_step):
    """Random seeds, snapshots of the attention flow, and the symmetric configurations."""
    key_random, key_flow = jr.split(key)
    seeds, sources = [], []
    if num_random:
        seeds.append(np.asarray(jax.random.normal(key_random, (num_random, n, d))))
        sources += ["random"] * num_random
    if num_flow and flow_times:
        snapshot = np.asarray([round(t / flow_step) for t in flow_times])
        x0 = jax.random.normal(key_flow, (num_flow, n, d))
        x0 = x0 / jnp.linalg.norm(x0, axis=-1, keepdims=True)
        states = _flow_snapshots(
            jnp.asarray(beta), x0, int(snapshot.max()), flow_step, jnp.asarray(snapshot)
        )
        seeds.append(np.asarray(states).reshape(-1, n, d))
        sources += [f"flow t={t:g}" for _ in range(num_flow) for t in flow_times]
    for name, config in symmetric_configurations(n, d).items():
        seeds.append(config[None])
        sources.append(name)
    return seeds, sources


def _deduplicate(xs, converged, sources, dedup_tol):
    """One (x, signature, source, hits) per critical point modulo rotations and relabelling."""
    unique: list[tuple[np.ndarray, np.ndarray, str, list[int]]] = []
    for index in np.flatnonzero(converged):
        x = np.asarray(xs[index])
        signature = configuration_signature(x)
        for _, other, _, hits in unique:
            if np.max(np.abs(signature - other)) <= dedup_tol:
                hits.append(index)
                break
        else:
            unique.append((x, signature, sources[index], [index]))

    return unique


def _survey_point(energy, beta, x, _signature, source, hits) -> "SurveyPoint":
    xj = jnp.asarray(x)
    verdict = classify_critical_point(energy, xj)
    value = float(energy(xj))
    return SurveyPoint(
        x=x,
        kind=verdict.kind,
        eigenvalues=np.asarray(verdict.eigenvalues),
        num_positive=verdict.num_positive,
        num_negative=verdict.num_negative,
        num_zero=verdict.num_zero,
        orbit_dimension=verdict.orbit_dimension,
        energy=value,
        normalized_energy=2 * beta * math.exp(-beta) * value,
        num_clusters=int(count_clusters(xj, 1e-6)),
        synchronised=int(count_clusters(xj, 1e-6)) == 1,
        grad_norm=verdict.grad_norm,
        source=source,
        hits=len(hits),
    )


__all__ = [
    "symmetric_configurations",
    "configuration_signature",
    "SurveyPoint",
    "LandscapeSurvey",
    "survey_critical_points",
]
