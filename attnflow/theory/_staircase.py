"""The staircase of dynamic metastability: the closed forms of the staircase theorem (Geshkovski,
Koubbi, Polyanskiy, Rigollet, arXiv:2410.06833v1, §6, Theorem "staircase"), its own objects as
the authors state them. The simulation it describes, the modified USA, is
:func:`attnflow.models.modified_usa`.

On the circle, (USA) (their (eq: usa.angles), the gradient of the printed energy
E_β = (1/(2β e^β n²)) Σ_ij e^{β cos(θ_i − θ_j)}) reads

    θ̇_i = (1/|S|²) Σ_{j ∈ S} e^{β(cos(θ_j − θ_i) − 1)} sin(θ_j − θ_i),   i ∈ S.

- **Modified USA** (Definition "modified USA"): when two particles come within the collision
  radius r_β = 1/√(β log β), one is glued to the other and leaves the system; the survivors S
  follow (USA) among themselves (the 1/|S|² counts survivors only).
  :func:`attnflow.models.modified_usa`, merge rule in :func:`collision_radius`.
- **Time change** (compt: reparam): τ̇_β = log β · m(θ̃), τ_β(0) = 0, θ̃ = θ̄ ∘ τ_β, with m the
  rate e^{β(1 − cos(θ_i − θ_j))} of the *closest* pair farther apart than r_β
  (:func:`staircase_log_time_change`). The paper prints a max; its proof
  (compt: derivative) uses the closest pair, i.e. the min, and with the max every plateau
  shrinks to zero length as β → ∞ (the closest pair would merge in new time
  e^{−β(cos u_min − cos u_max)} → 0). attnflow uses the min.
- **Plateau levels**: the energy of the theorem is φ = 2β E_β = (1/n²) Σ_ij e^{β(cos − 1)} ∈ (0, 1]
  (the printed E_β ≤ 1/(2β) tends to 0; the staircase of the paper's figure ends at 1). In the
  package's normalisation, φ = 2β e^{−β} :class:`attnflow.InteractionEnergy` (β) with weights 1/n.
  Point clusters of masses m_q (fraction of tokens glued together) give φ → Σ_q m_q² as β → ∞.
- **Pair merging** (Lemma "exact time scale of clustering"): in the new time the closest pair
  follows u̇ = −c log β sin u + c(β) with c = 2/|S|² (the e^{β(cos u − 1)} of (USA) cancels the
  time change) and |c(β)| exponentially small for well-prepared data; with c(β) = 0,
  log tan(u/2) falls linearly at rate c log β, so u reaches √(log β/β) at
  1/(2c) + O(log log β / log β) and r_β a further log log β/(c log β) later
  (:func:`pair_merge_time`). The paper prints the centre 2/c; separating variables gives 1/(2c)
  (measured: tests/test_staircase_theorem.py).
- **Plateau times** (:func:`staircase_plateaus`): merging the closest pair first (well-prepared
  data, Definition "init_s1", merge the growing cluster with the next particle), the k-th merge
  happens at T_k = Σ_{l ≤ k} Δ_l, Δ_l the pair time at gap u_l with |S| = n − l + 1 survivors:
  T_k → Σ_{l ≤ k} (n − l + 1)²/4 as β → ∞, the levels between are Σ_q m_q².

Statements were read from a public Lean transcription of v1 (not from the PDF); the theorem
itself gives no explicit T_k: those above are the pair lemma applied merge by merge.
"""

import math

import numpy as np
from jaxtyping import ArrayLike

from .._check import check_angles, check_beta_above_one, check_positive_scalar, expected
from .._legacy_access import LegacyItemAccess


def collision_radius(beta: float) -> float:
    """The collision radius r_β = 1/√(β log β) of the modified USA (arXiv:2410.06833v1, §6,
    Definition "modified USA"): two particles closer than r_β are merged.

    Example:
        >>> from attnflow.theory import collision_radius
        >>> round(collision_radius(1000.0), 6)
        0.012032
    """
    beta = check_beta_above_one(beta)
    return 1.0 / math.sqrt(beta * math.log(beta))


def staircase_log_time_change(theta: ArrayLike, beta: float) -> float:
    """log τ̇_β of the staircase time change (arXiv:2410.06833v1, §6, compt: reparam) at angles
    ``theta`` (n,): τ̇_β = log β · min e^{β(1 − cos(θ_i − θ_j))} over pairs farther apart than
    1/√(β log β), i.e. log log β + β(1 − cos u) for the closest such pair u (−inf when there is
    none: the clock stops). The paper prints max; see the module docstring for why the min is
    used. Returned as a logarithm: at β = 1000 the rate itself overflows.

    Example:
        >>> import numpy as np
        >>> from attnflow.theory import staircase_log_time_change
        >>> round(staircase_log_time_change(np.array([0.0, 0.4, 1.2]), 100.0), 6)
        9.42108
    """
    beta = check_beta_above_one(beta)
    theta = check_angles(theta, "theta").astype(float)
    diff = theta[:, None] - theta[None, :]
    gap = 2 * np.sin(0.5 * diff) ** 2  # 1 − cos, without cancellation
    distance = np.abs(np.angle(np.exp(1j * diff)))
    far = distance > collision_radius(beta)
    if not far.any():
        return -math.inf
    return math.log(math.log(beta)) + beta * float(gap[far].min())


def pair_merge_time(gap: float, beta: float, c: float, *, threshold: float | None = None) -> float:
    """The time for u̇ = −c log β sin u (the pair-merging lemma of arXiv:2410.06833v1, §6,
    "exact time scale of clustering", with c(β) = 0) to bring u from ``gap`` down to
    ``threshold`` (default the collision radius 1/√(β log β)):

        t = [log tan(gap/2) − log tan(threshold/2)] / (c log β).

    To √(log β/β) it is 1/(2c) + O(log log β / log β) (the paper prints 2/c), and from there to
    1/√(β log β) exactly log log β / (c log β). In the modified USA c = 2/|S|², |S| the number
    of survivors.

    Example:
        >>> from attnflow.theory import pair_merge_time
        >>> round(pair_merge_time(0.4, 1000.0, 0.5), 10)
        1.0183789852
    """
    beta = check_beta_above_one(beta)
    gap = float(check_positive_scalar(gap, "gap", what="gap"))
    if gap >= math.pi:
        expected("gap", "a gap 0 < gap < π", gap)
    c = float(check_positive_scalar(c, "c", what="rate constant"))
    end = collision_radius(beta) if threshold is None else threshold
    end = float(check_positive_scalar(end, "threshold", what="threshold"))
    if end >= math.pi:
        expected("threshold", "a threshold 0 < threshold < π", end)
    if end > gap:
        return 0.0
    return (math.log(math.tan(gap / 2)) - math.log(math.tan(end / 2))) / (c * math.log(beta))


def well_prepared_constant(theta: ArrayLike, beta: float) -> float:
    """The largest c with cos(θ_i − θ_1) ≥ cos(θ_k − θ_i) + c log β/β for all 2 ≤ i ≤ n − 1 < k
    ... i.e. min over i ∈ {2, …, n−1}, k > i of β (cos(θ_i − θ_1) − cos(θ_k − θ_i)) / log β
    (arXiv:2410.06833v1, §6, Definition "init_s1": the angles (n,) are well-prepared when they
    increase in [0, π] and this constant is > 1). −inf if the angles are not increasing in
    [0, π]; +inf for n = 2.

    Example:
        >>> import numpy as np
        >>> from attnflow.theory import well_prepared_constant
        >>> round(well_prepared_constant(0.4 * np.array([0.0, 1.0, 3.0, 7.0]), 200.0), 4)
        8.4689
    """
    beta = check_beta_above_one(beta)
    theta = check_angles(theta, "theta").astype(float)
    if np.any(np.diff(theta) <= 0) or theta[0] < 0 or theta[-1] > math.pi:
        return -math.inf
    n = len(theta)
    worst = math.inf
    for i in range(1, n - 1):
        for k in range(i + 1, n):
            margin = math.cos(theta[i] - theta[0]) - math.cos(theta[k] - theta[i])
            worst = min(worst, beta * margin / math.log(beta))
    return worst


class StaircasePlateaus(LegacyItemAccess):
    """The result of :func:`attnflow.theory.staircase_plateaus` (see its docstring). It was a
    dict: ``p["times"]`` still returns ``p.times``, with a DeprecationWarning, for one release.

    Attributes:
        times: (n−1,) the predicted merge times T_1 < … < T_{n−1} at this β.
        limit_times: (n−1,) their β → ∞ limits Σ_{l ≤ k} (n − l + 1)²/4.
        levels: (n,) the plateau values Σ_q m_q² of φ = 2β E_β on (T_k, T_{k+1}).
        tokens: (n−1, 2) the smallest token index on each side of each merge.
        gaps: (n−1,) the gap of each merging pair.
    """

    times: np.ndarray
    limit_times: np.ndarray
    levels: np.ndarray
    tokens: np.ndarray
    gaps: np.ndarray


def staircase_plateaus(theta0: ArrayLike, beta: float) -> StaircasePlateaus:
    """Predicted merge times and plateau levels of the modified USA in the staircase time
    (arXiv:2410.06833v1, §6: Theorem "staircase" with the pair-merging lemma applied merge by
    merge; see the module docstring).

    The closest pair of survivors merges next: with |S| survivors it takes
    Δ = :func:`pair_merge_time` (u, β, 2/|S|²) from its gap u, the pair's mean angle is conserved
    and the survivor (the larger token index, as in :func:`attnflow.models.modified_usa`) ends
    r_β/2 from it; the other particles are taken as still (their pull is the c(β) of the lemma,
    exponentially small for well-prepared data).

    Returns a :class:`attnflow.theory.StaircasePlateaus`: ``times`` (n−1,) the predicted merge
    times T_1 < … < T_{n−1} at this β; ``limit_times`` (n−1,) their β → ∞ limits
    Σ_{l ≤ k} (n − l + 1)²/4; ``levels`` (n,) the plateau values Σ_q m_q² of φ = 2β E_β on
    (T_k, T_{k+1}), k = 0, …, n − 1; ``tokens`` (n−1, 2) the smallest token index on each side
    of each merge; ``gaps`` (n−1,).

    Example:
        >>> import numpy as np
        >>> from attnflow.theory import staircase_plateaus
        >>> p = staircase_plateaus(0.4 * np.array([0.0, 1.0, 3.0, 7.0]), 1000.0)
        >>> p.levels.tolist(), p.limit_times.tolist()
        ([0.25, 0.375, 0.625, 1.0], [4.0, 6.25, 7.25])
        >>> np.round(p.times, 3).tolist()
        [4.074, 7.006, 8.644]
    """
    beta = check_beta_above_one(beta)
    theta = check_angles(theta0, "theta0", distinct=True).astype(float)
    n = len(theta)
    radius = collision_radius(beta)
    angle = {i: float(theta[i]) for i in range(n)}
    members = {i: [i] for i in range(n)}
    times, limits, gaps, tokens, levels = [], [], [], [], [1 / n]
    clock = limit = 0.0
    for merged in range(n - 1):
        best = None
        for x in angle:
            for y in angle:
                if x < y:
                    signed = float(np.angle(np.exp(1j * (angle[y] - angle[x]))))
                    if best is None or abs(signed) < abs(best[2]):
                        best = (x, y, signed)
        gone, keep, signed = best  # the larger label survives, as in modified_usa
        c = 2.0 / (n - merged) ** 2
        clock += pair_merge_time(abs(signed), beta, c)
        limit += 1 / (2 * c)
        angle[keep] = angle[gone] + signed / 2 + math.copysign(radius / 2, signed)
        del angle[gone]
        tokens.append(sorted([min(members[gone]), min(members[keep])]))
        members[keep] += members.pop(gone)
        times.append(clock)
        limits.append(limit)
        gaps.append(abs(signed))
        levels.append(sum(len(m) ** 2 for m in members.values()) / n**2)
    return StaircasePlateaus(
        times=np.array(times),
        limit_times=np.array(limits),
        levels=np.array(levels),
        tokens=np.array(tokens, dtype=int).reshape(-1, 2),
        gaps=np.array(gaps),
    )
