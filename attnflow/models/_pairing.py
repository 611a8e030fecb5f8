r"""The pairing phase of metastable clusters (Thm 6 and eq. (6) of Rigollet, arXiv:2512.01868;
Geshkovski–Koubbi–Polyanskiy–Rigollet, arXiv:2410.06833): K point clusters with masses α_j, and
the merge of the closest pair.

A configuration of K point clusters y_1, …, y_K ∈ S^{d−1} with masses α_j > 0, Σ α_j = 1, is the
measure μ = Σ_j α_j δ_{y_j}, and (SA)/(USA) move it as K weighted particles (attnflow's weights
are masses, docs/conventions.md): for USA,

    ẏ_i = P^⊥_{y_i} Σ_j α_j e^{β⟨y_i, y_j⟩} y_j,

and for SA the same divided by Z_i = Σ_j α_j e^{β⟨y_i, y_j⟩}. At large β the closest pair (i, j),
at angle θ₀, interacts exponentially more strongly than any other, and on its great circle its
angle θ obeys, up to terms e^{−β(cos θ₀ − cos θ_other)} smaller,

    (USA)  θ' = −(α_i + α_j) e^{β cos θ} sin θ,
    (SA)   θ' = −sin θ e^{β cos θ} [α_j/(α_i e^β + α_j e^{β cos θ})
                                    + α_i/(α_j e^β + α_i e^{β cos θ})].

**Time scales (derived here).** Let T_pair be the pair's time scale at its initial gap,
T_pair = e^{−β cos θ₀}/(α_i + α_j) for USA and e^{β(1−cos θ₀)}/(α_i/α_j + α_j/α_i) for SA (the
prefactors at θ = θ₀, with Z ≈ α e^β), and τ' = t/T_pair. Then dθ/dτ' = −sin θ · e^{β(cos θ −
cos θ₀)} (1 + O(e^{−β(1−cos θ)})): freezing the exponential at its initial value gives the limit
ODE dθ/dτ' = −sin θ, whose solution tan(θ/2) = tan(θ₀/2) e^{−τ'} **never merges in finite time**
(the form the issue reports for the printed eq. (6)). The exponential is not frozen: with
u = β sin θ₀ (θ₀ − θ) and τ = β sin²θ₀ · τ', du/dτ = e^{u} (1 + O(u/β)), so u = −log(1 − τ)
blows up at τ = 1: the pair merges at

    t_merge = T_pair / (β sin²θ₀) · (1 + O(1/β)),

i.e. in the τ' clock at τ' ≈ 1/(β sin²θ₀) → 0, not never. :func:`pairing_phase` measures the
merge on the full K-cluster flow and reports it in both clocks.
"""

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float, Int

from .._check import (
    check_beta,
    check_int,
    check_measure,
    check_positive_scalar,
    check_sa_normalization,
    check_tokens,
    check_tolerance,
    expected,
)
from .._fields._self_attention import SelfAttention
from .._solve import solve


class PairingPhase(eqx.Module):
    r"""The merge of the closest pair of K point clusters (:func:`pairing_phase`).

    Attributes:
        pair: (2,) indices (i, j) of the closest pair at t = 0.
        initial_angle: θ₀, its angle.
        time_scale: T_pair (module docstring): e^{−β cos θ₀}/(α_i + α_j) (USA) or
            e^{β(1−cos θ₀)}/(α_i/α_j + α_j/α_i) (SA).
        merge_time: the measured time at which the pair's angle reaches ``merge_angle``
            (inf if it did not within the horizon).
        predicted_merge_time: T_pair/(β sin²θ₀), the leading order as β → ∞.
        rescaled_merge_time: merge_time / predicted_merge_time (τ of the module docstring; → 1).
        frozen_clock_merge_time: merge_time / T_pair (τ'; → 0 like 1/(β sin²θ₀)).
        frozen_limit_angle: the angle 2 arctan(tan(θ₀/2) e^{−τ'}) that the frozen-rate limit
            ODE dθ/dτ' = −sin θ reaches at the measured merge: it stays positive.
        other_displacement: the largest angle by which a cluster outside the pair moved between
            t = 0 and the merge (the other clusters are frozen during the pairing phase).
        centers: (K, d) clusters at the merge.
    """

    pair: Int[Array, "2"]
    initial_angle: Float[Array, ""]
    time_scale: Float[Array, ""]
    merge_time: Float[Array, ""]
    predicted_merge_time: Float[Array, ""]
    rescaled_merge_time: Float[Array, ""]
    frozen_clock_merge_time: Float[Array, ""]
    frozen_limit_angle: Float[Array, ""]
    other_displacement: Float[Array, ""]
    centers: Float[Array, "K d"]


def _angles(y):
    """Pairwise angles 2 arcsin(|y_i − y_j|/2), accurate for small angles."""
    gaps = jnp.linalg.norm(y[:, None, :] - y[None, :, :], axis=-1)
    return 2 * jnp.arcsin(jnp.clip(gaps / 2, 0.0, 1.0))


class _PairMerged(eqx.Module, strict=True):
    """Event condition: the pair's angle minus the merge angle (crosses 0 downwards)."""

    i: int = eqx.field(static=True)
    j: int = eqx.field(static=True)
    angle: float

    def __call__(self, t, y, args, **kwargs):
        x = y / jnp.linalg.norm(y, axis=-1, keepdims=True)
        gap = jnp.linalg.norm(x[self.i] - x[self.j])
        return 2 * jnp.arcsin(jnp.clip(gap / 2, 0.0, 1.0)) - self.angle


def pairing_phase(
    centers: Float[Array, "K d"],
    masses: Float[Array, " K"],
    beta: float,
    *,
    normalization: str = "n",
    merge_angle: float = 1e-3,
    horizon: float = 50.0,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_steps: int = 100_000,
) -> PairingPhase:
    r"""Simulate K point clusters with masses α_j under (USA) or (SA) until the closest pair
    merges, and measure the merge against the time scales of the pairing phase (Thm 6, eq. (6)
    of arXiv:2512.01868; module docstring).

    The clusters are K weighted tokens (weights = masses) integrated by :func:`attnflow.solve`
    with an event that stops the flow when the closest pair's angle reaches ``merge_angle``,
    located by a Newton root find inside the step.

    Args:
        centers: (K, d) cluster positions on the sphere, K ≥ 2, pairwise distinct.
        masses: (K,) positive masses (normalised to sum 1).
        beta: β > 0 (scalar).
        normalization: ``"n"`` (USA, default) or ``"softmax"`` (SA).
        merge_angle: the angle at which the pair counts as merged (0 < merge_angle < θ₀).
            After the slow approach the final collapse is exponential at rate ~(α_i + α_j)e^β
            (USA), so this choice moves the merge time by O(e^{−β(1−cos θ₀)}) relatively.
        horizon: integrate up to ``horizon`` × the predicted merge time.
        rtol, atol, max_steps: solver settings (:func:`attnflow.solve`).

    Returns:
        :class:`PairingPhase`.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> angles = jnp.array([0.0, 0.6, 2.2])
        >>> y0 = jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=-1)
        >>> out = af.models.pairing_phase(y0, jnp.array([0.5, 0.3, 0.2]), 40.0)
        >>> out.pair.tolist(), round(float(out.rescaled_merge_time), 2)
        ([0, 1], 1.26)
    """
    centers = check_tokens(centers, "centers")
    k, _ = centers.shape
    if k < 2:
        expected("centers", "at least two clusters (K >= 2)", f"= K = {k}")
    masses = check_measure(masses, k, "masses")
    if masses is None or bool(jnp.any(jnp.asarray(masses) <= 0)):
        expected("masses", "positive masses, one per cluster", masses)
    beta = float(check_beta(beta, positive=True))
    check_sa_normalization(normalization)
    merge_angle = float(check_positive_scalar(merge_angle, "merge_angle", what="angle"))
    horizon = float(check_positive_scalar(horizon, "horizon", what="multiple"))
    rtol, atol = check_tolerance(rtol, "rtol"), check_tolerance(atol, "atol")
    max_steps = check_int(max_steps, "max_steps", low=1)

    dtype = centers.dtype
    weights = jnp.asarray(masses, dtype) / jnp.sum(jnp.asarray(masses, dtype))
    angles0 = np.array(_angles(centers))
    np.fill_diagonal(angles0, np.inf)
    i, j = (int(v) for v in np.unravel_index(np.argmin(angles0), angles0.shape))
    i, j = min(i, j), max(i, j)
    theta0 = float(angles0[i, j])
    if not theta0 > merge_angle:
        expected(
            "centers",
            f"distinct clusters whose closest pair is farther apart than merge_angle = "
            f"{merge_angle:g}",
            f"= a closest pair at angle {theta0:.3g}",
        )
    a_i, a_j = float(weights[i]), float(weights[j])
    if normalization == "n":
        time_scale = np.exp(-beta * np.cos(theta0)) / (a_i + a_j)
    else:
        time_scale = np.exp(beta * (1 - np.cos(theta0))) / (a_i / a_j + a_j / a_i)
    predicted = time_scale / (beta * np.sin(theta0) ** 2)
    if np.pi - theta0 <= np.sqrt(np.finfo(dtype).eps):  # antipodal to the dtype's accuracy
        # The closest pair antipodal: an equilibrium of the pair (sin θ₀ = 0), no merge to
        # predict; refused at once rather than after a solve to an infinite horizon.
        expected(
            "centers",
            "a closest pair that is not antipodal (an equilibrium)",
            f"= θ₀ = {theta0!r} (π to {np.sqrt(np.finfo(dtype).eps):.1g})",
        )
    if not (np.isfinite(predicted) and predicted > 0):
        # e^{−β cos θ₀} or e^{β(1 − cos θ₀)} past float64 (issue 44 item 5: β = 1e4 predicted
        # a merge at t = 0.0).
        expected(
            "beta",
            "a β whose predicted merge time T_pair is a positive float64 (e^{±β(·)} within "
            "[1e-308, 1e308])",
            f"= {beta:g}, T_pair = {predicted:.3g}",
        )

    event = diffrax.Event(
        _PairMerged(i, j, merge_angle), optx.Newton(rtol=1e-12, atol=1e-14), direction=False
    )
    field = SelfAttention(beta, normalization=normalization)
    sol = solve(
        field,
        centers,
        horizon * predicted,
        args={"weights": weights},
        event=event,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
    )
    final = sol.ys[-1]
    merged = sol.result == diffrax.RESULTS.event_occurred
    merge_time = jnp.where(merged, sol.ts[-1], jnp.inf)
    others = jnp.asarray([m not in (i, j) for m in range(k)])
    moved = 2 * jnp.arcsin(jnp.clip(jnp.linalg.norm(final - centers, axis=-1) / 2, 0.0, 1.0))
    other_displacement = jnp.max(jnp.where(others, moved, 0.0))
    frozen_clock = merge_time / time_scale
    frozen_angle = 2 * jnp.arctan(jnp.tan(theta0 / 2) * jnp.exp(-frozen_clock))
    return PairingPhase(
        pair=jnp.array([i, j]),
        initial_angle=jnp.asarray(theta0, dtype),
        time_scale=jnp.asarray(time_scale, dtype),
        merge_time=merge_time,
        predicted_merge_time=jnp.asarray(predicted, dtype),
        rescaled_merge_time=merge_time / predicted,
        frozen_clock_merge_time=frozen_clock,
        frozen_limit_angle=frozen_angle,
        other_displacement=other_displacement,
        centers=final,
    )
