r"""The metastability theorem of Geshkovski, Koubbi, Polyanskiy, Rigollet, "Dynamic
metastability in the self-attention model" (arXiv:2410.06833v1, §2, Theorem "metastability",
label thm: metastability; its hypotheses Definition hyp: init, (eq: gamma), (eq: lambda.3)):
the separation, the exponents and the times T₁, T₂ as closed forms.

**Source.** The statement was read from a public Lean transcription of v1 (the definitions of
the caps, α, γ, (β, ε)-separation, the bounds on T₁ and T₂, the two bounds on λ of
(eq: lambda.3) and the within-cap inequality of lem: collapsetime), not from the PDF; the
transcription corrects one sign in (eq: lambda.3), followed here (see ``lam_max``).

**Objects.** Centres w_1, …, w_k on S^{d−1} and caps S_q(ε) = {x : ⟨x, w_q⟩ ≥ 1 − ε}.

- Separation (eq: alpha.dist): α = max{⟨x, y⟩ : x ∈ S_i(2ε), y ∈ S_j(2ε), i ≠ j}. The cap S_q(2ε)
  is the geodesic ball of radius r = arccos(1 − 2ε) = 2 arcsin √ε around w_q, so with θ_ij the
  angle between w_i and w_j, α = max_{i≠j} cos(max(θ_ij − 2r, 0)) (the maximum is reached on the
  great circle through w_i and w_j; overlapping caps give α = 1). For k = 1 the set is empty and
  α = −1 is used (any α ≥ −1 serves in the proof; cap containment then holds for all times).
- γ = 1 − α − 8ε − β⁻¹ log(2n²/ε) (eq: gamma).
- (β, ε)-separated data (hyp: init), β > 1, ε ∈ (0, 1/16): every x_i(0) lies in some S_q(ε)
  and γ > 0.

**Theorem.** For (β, ε)-separated data and 0 < λ < λ_max there are T₂ > T₁ > 0 with

    T₁ ≤ 2n e^{8εβ} + e n λ β²/(β − 1),      T₂ ≥ (ε/n) e^{(1−α)β},

such that x_i(t) ∈ S_q(2ε) for t ∈ [0, T₂] whenever x_i(0) ∈ S_q(ε), and
‖x_i(t) − x_j(t)‖² ≤ 2e^{−λβ} on [T₁, T₂] for x_i(t), x_j(t) in the same cap S_q(2ε). So the
metastable time scale is e^{(1−α)β}, and the two conclusions hold on the explicit window
[``t1_upper``, ``t2_lower``] (nonempty: the first bound on λ is what makes t1_upper < t2_lower).
(eq: lambda.3) bounds λ twice:

    λ < (β−1)ε/(β²n²e) · e^{(1−α)β} (1 − e^{−γβ})         (t1_upper < t2_lower),
    λ < 1 − α − 8ε − β⁻¹ log(2n²/(1 − 8ε))                  (the "1 − α − O(1/β)").

The first is printed with e^{(1 − α − β⁻¹ log(c))β}, c = (β−1)ε/(β²n²e); the transcription
shows that the proof needs +β⁻¹ log c (the printed sign gives c⁻² times the bound above, and
t1_upper < t2_lower no longer follows); attnflow uses the +. For λ ≤ λ_* = β⁻¹ log(1/(8ε)) the
diameter claim is the geometry of the caps (two points of S_q(2ε) are 16ε ≤ 2e^{−λβ} apart): it
says something about the dynamics only for λ > λ_*.

**Dynamics.** The proof rests on the within-cap inequality (lem: collapsetime) for
ρ_q = min_{i,j in cap q} ⟨x_i, x_j⟩,

    ρ̇_q ≥ (2/n) ρ_q(1 − ρ_q) e^{β(ρ_q − 1)} − 2n e^{−(1−α)β},

which fixes the clock: a within-cap attention weight must be ≥ e^{β(ρ−1)}/n and a cross-cap one
≤ e^{−(1−α)β}. (SA) gives both (Z_i ≤ n e^β, Z_i ≥ e^{β⟨x_i, x_i⟩} = e^β), in its own time:
``attnflow.SelfAttention(beta)``. (USA) in the paper's form ẋ_i = P^⊥_{x_i} (1/n) Σ_j
e^{β(⟨x_i, x_j⟩ − 1)} x_j gives them too (cross-cap terms sum to ≤ e^{−(1−α)β}); this is attnflow's
``SelfAttention(beta, normalization="n")`` (no e^{−β}) slowed by e^{−β}, so in attnflow's USA
time every time above is multiplied by e^{−β} (``normalization="n"``).

**Measured** (tests/test_metastability_bounds.py, float64): the bounds hold and are loose.
Three caps on S² around orthogonal centres, n = 9, ε = 0.01, β = 28 (α = 0.390, γ = 0.184,
λ = 0.9 λ_max = 0.311 > λ_* = 0.090): 1 − ⟨x_i, w_q⟩ never exceeds its initial maximum 0.69ε
up to t2_lower = 2.9e4 (the caps S_q(2ε) end at 2ε), and the within-cap diameter falls below
2e^{−λβ} = 3.3e-4 at t ≈ 2.6 for (SA) and 7.4 for (USA) (paper's time), while t1_upper = 3.9e2.
Two caps on S¹ at angle θ = 2.1 (n = 4, ε = 3e-3, β = 7.5 … 9): the tokens leave S_q(2ε) at
380–460 × t2_lower, and the escape and merge times grow like e^{sβ}/β with s ≈ 1 − cos θ =
1.505 (fitted slope of log(βT): 1.51 to 1.56; of log T: 1.39 to 1.43), the exponent of two point
clusters at angle θ, not 1 − α(ε) = 1 − cos(θ − 2r) = 1.305: e^{(1−α)β} is a lower bound on the
metastable time scale, which approaches the measured exponent as ε → 0 (α → cos θ).
"""

import math
from typing import Literal

import equinox as eqx
import numpy as np
from jaxtyping import ArrayLike

from .._check import check_beta_above_one, check_positive_scalar, check_tokens, expected


class MetastabilityBounds(eqx.Module):
    """The result of :func:`attnflow.theory.metastability_bounds` (see its docstring).

    Attributes:
        alpha: the separation α of the caps S_q(2ε).
        gamma: γ = 1 − α − 8ε − β⁻¹ log(2n²/ε).
        cap: (n,) the cap S_q(ε) that contains x_i(0) (the nearest centre), −1 if none does.
        in_caps: every token lies in some cap S_q(ε).
        separated: the data are (β, ε)-separated: ``in_caps`` and γ > 0.
        lam: the λ the λ-dependent fields use.
        lam_max: the admissible range is 0 < λ < lam_max (≤ 0: empty).
        lam_star: β⁻¹ log(1/(8ε)): for λ ≤ lam_star the diameter bound holds by cap geometry.
        lam_admissible: ``separated`` and 0 < lam < lam_max.
        metastable_scale: e^{(1−α)β}, in the paper's time.
        t1_upper: 2n e^{8εβ} + e n λ β²/(β − 1), in the clock of ``normalization``.
        t2_lower: (ε/n) e^{(1−α)β}, in the clock of ``normalization``.
        diameter_bound: 2e^{−λβ}, the bound on ‖x_i − x_j‖² within a cap on [t1_upper, t2_lower].
        time_unit: 1 (SA) or e^{−β} (attnflow's USA): the factor from the paper's time.
    """

    alpha: float = eqx.field(static=True)
    gamma: float = eqx.field(static=True)
    cap: np.ndarray
    in_caps: bool = eqx.field(static=True)
    separated: bool = eqx.field(static=True)
    lam: float = eqx.field(static=True)
    lam_max: float = eqx.field(static=True)
    lam_star: float = eqx.field(static=True)
    lam_admissible: bool = eqx.field(static=True)
    metastable_scale: float = eqx.field(static=True)
    t1_upper: float = eqx.field(static=True)
    t2_lower: float = eqx.field(static=True)
    diameter_bound: float = eqx.field(static=True)
    time_unit: float = eqx.field(static=True)


def _exp(value: float) -> float:
    """e^value, inf past the float range (β(1 − α) of several hundred)."""
    return math.exp(value) if value < 700 else math.inf


def _cap_separation(centres: np.ndarray, epsilon: float) -> float:
    """α: the largest ⟨x, y⟩ over x, y in two distinct caps {⟨·, w_q⟩ ≥ 1 − 2ε} (−1 for one cap)."""
    k = centres.shape[0]
    if k == 1:
        return -1.0
    chord = np.linalg.norm(centres[:, None, :] - centres[None, :, :], axis=-1)
    angle = 2 * np.arcsin(np.clip(chord / 2, 0.0, 1.0))  # accurate for close centres too
    radius = 2 * math.asin(math.sqrt(epsilon))  # cos radius = 1 − 2ε
    gap = np.maximum(angle - 2 * radius, 0.0)[~np.eye(k, dtype=bool)]
    return float(np.max(np.cos(gap)))


def metastability_bounds(
    x0: ArrayLike,
    centres: ArrayLike,
    epsilon: float,
    beta: float,
    *,
    lam: float | None = None,
    normalization: Literal["softmax", "n"] = "softmax",
) -> MetastabilityBounds:
    r"""The hypotheses and bounds of the metastability theorem of arXiv:2410.06833v1 (§2,
    Theorem "metastability"; module docstring for the statement, the source and the dynamics)
    for the tokens ``x0`` and caps S_q(ε) = {x : ⟨x, w_q⟩ ≥ 1 − ε} around ``centres``:

        α = max_{i≠j} cos(max(θ_ij − 2 arccos(1 − 2ε), 0)),   γ = 1 − α − 8ε − β⁻¹ log(2n²/ε),
        T₁ ≤ 2n e^{8εβ} + e n λ β²/(β − 1),   T₂ ≥ (ε/n) e^{(1−α)β},
        0 < λ < min((β−1)ε/(β²n²e) e^{(1−α)β}(1 − e^{−γβ}), 1 − α − 8ε − β⁻¹ log(2n²/(1 − 8ε))).

    When ``separated`` (every token in a cap S_q(ε), γ > 0) and ``lam_admissible``, every
    solution of (SA) (or of (USA), see ``normalization``) from ``x0`` keeps x_i(t) ∈ S_q(2ε) on
    [0, t2_lower] and ‖x_i(t) − x_j(t)‖² ≤ ``diameter_bound`` = 2e^{−λβ} within each cap on
    [t1_upper, t2_lower]. The formulas are evaluated whatever the hypotheses (the flags say
    whether the theorem applies).

    Args:
        x0: (n, d) initial tokens on the unit sphere.
        centres: (k, d) cap centres w_q on the unit sphere, k ≥ 1.
        epsilon: ε ∈ (0, 1/16).
        beta: β > 1.
        lam: λ > 0 for ``t1_upper`` and ``diameter_bound``; default ``0.9 lam_max`` (nan when
            the admissible range is empty). A larger λ gives a smaller diameter bound and a
            larger t1_upper.
        normalization: the clock of the times: ``"softmax"`` (SA, ``attnflow.SelfAttention
            (beta)``: the paper's time) or ``"n"`` (``SelfAttention(beta, normalization="n")``,
            e^β times faster than the paper's (USA): times multiplied by e^{−β}).

    Returns:
        A :class:`attnflow.theory.MetastabilityBounds`.

    Example:
        >>> import numpy as np
        >>> from attnflow.theory import metastability_bounds
        >>> on_circle = lambda a: np.stack([np.cos(a), np.sin(a)], axis=-1)
        >>> x0 = on_circle(np.array([-0.1, 0.0, 0.1, 1.4, 1.5, 1.6]))
        >>> b = metastability_bounds(x0, on_circle(np.array([0.0, 1.5])), 0.01, 25.0)
        >>> b.separated, b.cap.tolist(), round(b.alpha, 4), round(b.gamma, 4)
        (True, [0, 0, 0, 1, 1, 1], 0.4542, 0.1105)
        >>> round(b.lam_max, 4), round(b.t1_upper, 1), round(b.t2_lower, 1)
        (0.2914, 200.1, 1405.6)
        >>> f"{b.diameter_bound:.2e}"
        '2.84e-03'
    """
    x0 = np.asarray(check_tokens(x0, "x0"), dtype=np.float64)
    centres = np.asarray(check_tokens(centres, "centres"), dtype=np.float64)
    if centres.shape[1] != x0.shape[1]:
        expected(
            "centres",
            f"centres of dimension d = {x0.shape[1]} (that of x0)",
            f"= shape {centres.shape}",
        )
    epsilon = float(check_positive_scalar(epsilon, "epsilon", what="ε"))
    if not epsilon < 1 / 16:
        expected("epsilon", "ε in (0, 1/16) (the theorem's range)", epsilon)
    beta = check_beta_above_one(beta)
    if lam is not None:
        lam = float(check_positive_scalar(lam, "lam", what="λ"))
    if normalization not in ("softmax", "n"):
        expected("normalization", "'softmax' (SA) or 'n' (USA)", normalization)

    n = x0.shape[0]
    alpha = _cap_separation(centres, epsilon)
    gamma = 1 - alpha - 8 * epsilon - math.log(2 * n**2 / epsilon) / beta
    # ⟨x, w⟩ ≥ 1 − ε  ⟺  ‖x − w‖² ≤ 2ε, without the cancellation of 1 − ⟨x, w⟩.
    distance2 = np.sum((x0[:, None, :] - centres[None, :, :]) ** 2, axis=-1)
    nearest = np.argmin(distance2, axis=1)
    inside = distance2[np.arange(n), nearest] <= 2 * epsilon
    cap = np.where(inside, nearest, -1)
    in_caps = bool(np.all(inside))
    separated = in_caps and gamma > 0

    if gamma > 0:
        log_first = (
            (1 - alpha) * beta
            + math.log((beta - 1) * epsilon / (beta**2 * n**2 * math.e))
            + math.log(-math.expm1(-gamma * beta))
        )
        second = 1 - alpha - 8 * epsilon - math.log(2 * n**2 / (1 - 8 * epsilon)) / beta
        lam_max = min(_exp(log_first), second)
    else:
        lam_max = 0.0
    if lam is None:
        lam = 0.9 * lam_max if lam_max > 0 else math.nan
    log_unit = 0.0 if normalization == "softmax" else -beta
    t1 = 2 * n * _exp(8 * epsilon * beta) + math.e * n * lam * beta**2 / (beta - 1)
    return MetastabilityBounds(
        alpha=alpha,
        gamma=gamma,
        cap=cap,
        in_caps=in_caps,
        separated=separated,
        lam=lam,
        lam_max=lam_max,
        lam_star=math.log(1 / (8 * epsilon)) / beta,
        lam_admissible=bool(separated and 0 < lam < lam_max),
        metastable_scale=_exp((1 - alpha) * beta),
        t1_upper=math.exp(log_unit) * t1,
        t2_lower=_exp(log_unit + math.log(epsilon / n) + (1 - alpha) * beta),
        diameter_bound=2 * math.exp(-lam * beta) if math.isfinite(lam) else math.nan,
        time_unit=math.exp(log_unit),
    )
