"""Critical points of energies on (S^{d-1})^n: Newton-type search and Hessian classification.

Same conventions as :func:`attnflow.riemannian_hessian`: product round metric, ``weights``
handed to the energy (None: its default).
"""

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._check import (
    check_bool,
    check_callable,
    check_int,
    check_tokens,
    check_tolerance,
    check_weights,
    is_traced,
)
from .._energy import AbstractEnergy
from .._sphere import _tangent_basis, retract
from ._hessian import _orbit_frame, _riemannian_hessian

Kind = Literal["local maximum", "local minimum", "strict saddle", "degenerate"]


class CriticalPoint(eqx.Module):
    """The result of :func:`find_critical_point`.

    Attributes:
        x: (n, d) final tokens (on the sphere).
        grad_norm: ‖grad E(x)‖ in the product round metric, √(Σ_i |P_{x_i}∇_i E|²).
        converged: whether ``grad_norm <= gtol``.
        num_steps: Newton / Levenberg–Marquardt iterations taken (accepted or not).
        gtol: the tolerance that was asked for.
        max_steps: the iteration cap that was given.
    """

    x: Float[Array, "n d"]
    grad_norm: Float[Array, ""]
    converged: Bool[Array, ""]
    num_steps: Int[Array, ""]
    gtol: Float[Array, ""]
    max_steps: int = eqx.field(static=True)

    @property
    def message(self) -> str:
        """A sentence saying whether the search converged, with the final gradient norm."""
        if self.converged.ndim:
            return "; ".join(
                CriticalPoint(*args, self.max_steps).message
                for args in zip(
                    self.x, self.grad_norm, self.converged, self.num_steps, self.gtol, strict=True
                )
            )
        grad, tol, steps = float(self.grad_norm), float(self.gtol), int(self.num_steps)
        if bool(self.converged):
            return f"converged: |grad E| = {grad:.3e} <= gtol = {tol:.1e} after {steps} steps"
        head = f"did not converge: |grad E| = {grad:.3e} > gtol = {tol:.1e} after {steps} steps"
        if steps >= self.max_steps:
            return f"{head} (max_steps = {self.max_steps} reached)"
        return (
            f"{head}: stalled, no step lowers |grad E| any more (gtol below the rounding "
            "floor of the gradient, or a non-critical local minimum of |grad E|)"
        )


def _grad_coords(energy, x, weights, basis):
    """Riemannian gradient in tangent coordinates: ⟨b_ik, ∇_i E⟩ (b_ik ⟂ x_i: no projection)."""
    return jnp.einsum("nkd,nd->nk", basis, jax.grad(energy)(x, weights)).ravel()


def _retract(x, basis, step):
    return retract(x, jnp.einsum("nk,nkd->nd", step.reshape(x.shape[0], -1), basis))


@eqx.filter_jit
def _search(energy, x0, weights, gtol, max_steps):
    dtype = x0.dtype
    eps = jnp.finfo(dtype).eps

    def grad_norm(x):
        return jnp.linalg.norm(_grad_coords(energy, x, weights, _tangent_basis(x)))

    def cond(state):
        x, gnorm, damping, step, newton = state
        resolvable = newton > 10 * eps  # a Newton step below rounding cannot lower |grad| more
        return (gnorm > gtol) & (step < max_steps) & (damping < 1e12) & resolvable

    def body(state):
        x, gnorm, damping, step, _ = state
        basis = _tangent_basis(x)
        g = _grad_coords(energy, x, weights, basis)
        lam, q = jnp.linalg.eigh(_riemannian_hessian(energy, x, weights))
        # Levenberg–Marquardt on the residual grad E with symmetric Jacobian Hess E:
        # s = −(H² + μ)⁻¹ H g. μ → 0 gives the (pseudo-inverse) Newton step, which converges
        # quadratically to critical points of any index. Eigenvalues at rounding level (the
        # orbit zero modes) get no step; μ may fall to eps² so that eigenvalues that are small
        # but real (far clusters interact through e^{−β(1−cos)}) still get their Newton step.
        top = jnp.max(jnp.abs(lam))
        live = jnp.abs(lam) > 100 * eps * top
        coords = q.T @ g
        newton = jnp.linalg.norm(jnp.where(live, coords / jnp.where(live, lam, 1.0), 0.0))
        gain = jnp.where(live, lam / jnp.where(live, lam**2 + damping * top**2, 1.0), 0.0)
        trial = _retract(x, basis, -q @ (gain * coords))
        trial_norm = grad_norm(trial)
        better = trial_norm < gnorm
        x = jnp.where(better, trial, x)
        gnorm = jnp.where(better, trial_norm, gnorm)
        damping = jnp.where(better, jnp.maximum(damping / 10, eps**2), damping * 10)
        return x, gnorm, damping, step + 1, newton

    state = (x0, grad_norm(x0), jnp.asarray(1e-6, dtype), jnp.asarray(0), jnp.asarray(1.0, dtype))
    x, gnorm, _, steps, _ = jax.lax.while_loop(cond, body, state)
    return x, gnorm, steps


def find_critical_point(
    energy: AbstractEnergy,
    x0: Float[Array, "n d"],
    weights: Float[Array, " n"] | None = None,
    *,
    gtol: float | None = None,
    max_steps: int = 100,
    throw: bool = True,
) -> CriticalPoint:
    """Converge to a critical point of ``energy`` near x0 (any index: saddles included).

    Riemannian Levenberg–Marquardt on the residual grad E (a trust-region Newton method on
    ‖grad E‖): with the Riemannian Hessian H = Q Λ Qᵀ (:func:`attnflow.riemannian_hessian`) and
    the gradient g in tangent coordinates, the step is s = −Q Λ(Λ² + μ)⁻¹ Qᵀ g, retracted by
    x_i ↦ (x_i + s_i)/|x_i + s_i|. A step is accepted only if it lowers ‖grad E‖; μ shrinks
    tenfold on success and grows tenfold on failure. Near a critical point μ → 0 and this is the
    Newton step (pseudo-inverse on the O(d)-orbit zero modes), so convergence is quadratic to
    maxima, minima and saddles alike, unlike gradient flows, which only find maxima.

    Each step forms the dense (n(d−1))² Hessian: meant for the small systems of landscape
    surveys. Jittable and vmappable (with ``throw=False``).

    Args:
        energy: a differentiable energy ``energy(x, weights) -> scalar``.
        x0: (n, d) starting tokens on the sphere.
        weights: handed to the energy (None: its default).
        gtol: stop when ‖grad E‖ ≤ gtol (absolute, product round metric). Default 1e-10 in
            float64 and 1e-5 in float32; it must lie above the rounding floor of the gradient.
        max_steps: iteration cap.
        throw: raise ``RuntimeError`` (``EquinoxRuntimeError`` under ``jit``) if not converged;
            with ``throw=False`` inspect ``.converged`` and ``.message``.

    Returns:
        a :class:`attnflow.landscape.CriticalPoint` with the final x, ``grad_norm``, ``converged``,
        ``num_steps``.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> theta = 2 * jnp.pi * jnp.arange(5.0) / 5 + 0.05 * jnp.sin(jnp.arange(5.0))
        >>> x0 = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)  # perturbed pentagon
        >>> crit = af.find_critical_point(af.InteractionEnergy(1.0), x0)
        >>> bool(crit.grad_norm < 1e-10), int(af.count_clusters(crit.x)) == 5
        (True, True)
    """
    check_callable(
        energy, "energy", "a callable energy(x, weights)", "e.g. attnflow.InteractionEnergy(1.0)"
    )
    x0 = check_tokens(x0, "x0")
    weights = check_weights(weights, x0.shape[0])
    max_steps = check_int(max_steps, "max_steps", low=1)
    throw = check_bool(throw, "throw")
    if gtol is None:
        gtol = 1e-10 if x0.dtype == jnp.float64 else 1e-5
    if not is_traced(gtol) and not float(gtol) >= 0:
        raise ValueError(f"gtol: expected a tolerance >= 0, got {gtol}")
    gtol = jnp.asarray(gtol, x0.dtype)
    x, gnorm, steps = _search(energy, x0, weights, gtol, jnp.asarray(max_steps))
    result = CriticalPoint(
        x=x,
        grad_norm=gnorm,
        converged=gnorm <= gtol,
        num_steps=steps,
        gtol=gtol,
        max_steps=max_steps,
    )
    if throw:
        if is_traced(gnorm):
            x = eqx.error_if(
                x,
                ~result.converged,
                "find_critical_point did not converge (|grad E| > gtol); pass "
                "throw=False and read .message",
            )
            result = eqx.tree_at(lambda r: r.x, result, x)
        elif not bool(result.converged):
            raise RuntimeError(f"find_critical_point {result.message}")
    return result


class Classification(eqx.Module):
    """The result of :func:`classify_critical_point`.

    Attributes:
        kind: "local maximum" (all remaining eigenvalues < 0), "local minimum" (all > 0),
            "strict saddle" (both signs), or "degenerate" (some are zero, the rest of one sign).
        eigenvalues: the Hessian spectrum, ascending, with the orbit zero modes removed:
            n(d−1) − orbit_dimension values.
        num_positive, num_negative, num_zero: counts in ``eigenvalues`` (|λ| ≤ tol·‖H‖ is zero).
        orbit_dimension: number of O(d)-orbit directions removed.
        grad_norm: ‖grad E(x)‖ at the classified point.
    """

    kind: Kind = eqx.field(static=True)
    eigenvalues: Float[Array, " k"]
    num_positive: int = eqx.field(static=True)
    num_negative: int = eqx.field(static=True)
    num_zero: int = eqx.field(static=True)
    orbit_dimension: int = eqx.field(static=True)
    grad_norm: float = eqx.field(static=True)

    @property
    def is_paper_strict_saddle(self) -> bool:
        """The paper's "strict saddle" for the ascent flow: Hess E has an eigenvalue > 0.

        GLPR (Thms 4.1, 4.3, 5.1, Problem 3) call a critical point a strict saddle when the
        Hessian has at least one positive eigenvalue, so that gradient *ascent* escapes it for
        almost every start; local minima (e.g. the regular n-gon on the circle at small β) count.
        ``kind == "strict saddle"`` is the narrower notion with both signs present.
        """
        return self.num_positive >= 1


@eqx.filter_jit
def _grad_norm(energy, x, weights):
    return jnp.linalg.norm(_grad_coords(energy, x, weights, _tangent_basis(x)))


def classify_critical_point(
    energy: AbstractEnergy,
    x: Float[Array, "n d"],
    weights: Float[Array, " n"] | None = None,
    *,
    tol: float = 1e-12,
    grad_rtol: float = 1e-6,
    orbit_rtol: float = 1e-6,
    remove_orbit: bool = True,
) -> Classification:
    """Classify a critical point of an O(d)-invariant energy by its Hessian spectrum.

    Computes the Riemannian Hessian H (:func:`attnflow.riemannian_hessian`), removes the zero
    modes of the rotation orbit — the span of (B x_i)_i, B skew, which H annihilates at a
    critical point because E(e^{tB}x) is constant
    (:func:`attnflow.landscape.rotation_orbit_basis`) — and
    diagonalises H on the orthogonal complement W: eigenvalues of Wᵀ H W. Then

    - all < 0: "local maximum"; all > 0: "local minimum"; both signs: "strict saddle";
    - otherwise "degenerate" (a zero eigenvalue beyond the orbit: second order is inconclusive).

    Mind the paper's wording (docs/conventions.md#landscape): GLPR call a point a strict saddle when
    H has one positive eigenvalue (ascent escapes it), local minima included; that is
    ``.is_paper_strict_saddle``.

    Args:
        energy: an O(d)-invariant energy ``energy(x, weights)`` (e.g. InteractionEnergy with A = I).
        x: (n, d) a critical point, n ≥ 2 (refine a numerical one with :func:`find_critical_point`).
        weights: handed to the energy (None: its default). Positive uniform weights do not change
            the kind.
        tol: an eigenvalue is zero when |λ| ≤ tol · ‖H‖₂.
        grad_rtol: raise ``ValueError`` if ‖grad E(x)‖ > grad_rtol · max(‖H‖₂, tiny): x is not
            critical and its Hessian says nothing about the landscape.
        orbit_rtol: relative singular-value cut that decides the orbit dimension.
        remove_orbit: remove the O(d)-orbit directions (checked: they must be zero modes, else
            ``ValueError``). Pass False for energies without the full O(d) symmetry, e.g.
            InteractionEnergy with A ≠ I, whose symmetry group {R : RᵀAR = A} is smaller; its
            zero modes then count in ``num_zero``.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> theta = 2 * jnp.pi * jnp.arange(4.0) / 4
        >>> square = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)
        >>> c = af.classify_critical_point(af.InteractionEnergy(0.5), square)
        >>> c.kind, c.num_positive, c.orbit_dimension, c.is_paper_strict_saddle
        ('local minimum', 3, 1, True)
    """
    tol = float(check_tolerance(tol, "tol"))
    grad_rtol = float(check_tolerance(grad_rtol, "grad_rtol"))
    orbit_rtol = float(check_tolerance(orbit_rtol, "orbit_rtol"))
    remove_orbit = check_bool(remove_orbit, "remove_orbit")
    hessian, orbit, scale, grad_norm = _hessian_and_orbit(
        energy, x, weights, grad_rtol, orbit_rtol, remove_orbit
    )
    eigenvalues = _transverse_spectrum(hessian, orbit)
    num_positive = int(np.sum(eigenvalues > tol * scale))
    num_negative = int(np.sum(eigenvalues < -tol * scale))
    num_zero = eigenvalues.size - num_positive - num_negative
    return Classification(
        kind=_kind(num_positive, num_negative, num_zero),
        eigenvalues=jnp.asarray(eigenvalues),
        num_positive=num_positive,
        num_negative=num_negative,
        num_zero=num_zero,
        orbit_dimension=orbit.shape[1],
        grad_norm=grad_norm,
    )


def _hessian_and_orbit(energy, x, weights, grad_rtol, orbit_rtol, remove_orbit):
    """The checked Hessian at x, the orbit columns to remove, ‖H‖ and |grad E|."""
    check_callable(
        energy, "energy", "a callable energy(x, weights)", "e.g. attnflow.InteractionEnergy(1.0)"
    )
    x = check_tokens(x, "x")
    weights = check_weights(weights, x.shape[0])
    if x.shape[0] < 2:
        raise ValueError(
            f"x: classification needs n >= 2 tokens (one token is a single orbit), "
            f"got shape {x.shape}"
        )
    # separately jitted pieces, shared with riemannian_hessian / rotation_orbit_basis calls
    hessian = np.asarray(_riemannian_hessian(energy, x, weights))
    grad_norm = float(_grad_norm(energy, x, weights))
    frame, mask = _orbit_frame(x, orbit_rtol)
    orbit = np.einsum(
        "nkd,pnd->nkp", np.asarray(_tangent_basis(x)), np.asarray(frame)[np.asarray(mask)]
    ).reshape(hessian.shape[0], -1)
    scale = float(np.max(np.abs(np.linalg.eigvalsh(hessian))))
    floor = float(np.finfo(hessian.dtype).tiny)
    if grad_norm > grad_rtol * max(scale, floor):
        raise ValueError(
            f"x: not a critical point: |grad E| = {grad_norm:.3e} > grad_rtol * |Hess E| = "
            f"{grad_rtol * scale:.3e}; refine it first with attnflow.find_critical_point"
        )
    if not remove_orbit:
        orbit = orbit[:, :0]
    residual = float(np.max(np.abs(hessian @ orbit), initial=0.0))
    if residual > grad_rtol * max(scale, floor):
        raise ValueError(
            f"energy: the rotation-orbit directions are not zero modes of the Hessian at x "
            f"(|H·(Bx)| = {residual:.3e}, relative {residual / max(scale, floor):.1e}): the energy "
            "is not O(d)-invariant; pass remove_orbit=False"
        )
    return hessian, orbit, scale, grad_norm


def _transverse_spectrum(hessian, orbit):
    """Eigenvalues of Wᵀ H W, W an orthonormal basis of the complement of the orbit columns."""
    full, _, _ = np.linalg.svd(orbit, full_matrices=True)
    complement = full[:, orbit.shape[1] :]
    return np.linalg.eigvalsh(complement.T @ hessian @ complement)


def _kind(num_positive: int, num_negative: int, num_zero: int) -> Kind:
    """Second-order classification: definite spectra are extrema, mixed signs a strict saddle,
    a zero band beside one sign only is inconclusive ("degenerate")."""
    if num_zero == 0 and num_positive == 0:
        return "local maximum"
    if num_zero == 0 and num_negative == 0:
        return "local minimum"
    if num_positive and num_negative:
        return "strict saddle"
    return "degenerate"


__all__ = ["CriticalPoint", "Classification", "find_critical_point", "classify_critical_point"]
