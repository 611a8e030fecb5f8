"""Sinkhorn (doubly stochastic) attention, as in Sinkformers (Sander, Ablin, Blondel, Peyré, 2022),
and the entropic optimal-transport energy it descends.

GLPR Rem. 3.5 (docs/maths.md §10): replacing the softmax row normalisation by Sinkhorn iterations
gives a doubly stochastic attention matrix, and under Assumption 1 of Sinkformers (QᵀK
symmetric, V = ±QᵀK) the dynamics is a Wasserstein gradient flow — in the plain Wasserstein
metric, without the Z_i factors that (SA) needs (§3.4).

The energy is derived here [D] (Sinkformers' own functional was not retrieved; docs/maths.md §10):
with ε = 1/β, W = QᵀK symmetric and the cost c(x, y) = −⟨Wx, y⟩,

    F(μ) = ½ OT_ε(μ, μ),   OT_ε(μ, ν) = min_{π ∈ Π(μ, ν)} ∫ c dπ + ε KL(π ‖ μ ⊗ ν).

By the envelope theorem ∇_{x_i} F = −w_i Σ_j A_ij W x_j, with A the doubly stochastic attention
matrix (π_ij = w_i A_ij), so the Sinkhorn field with V = W is −grad F in the metric
⟨a, b⟩ = Σ_i w_i ⟨a_i, b_i⟩: ``SinkhornAttention(β, V=W)`` is
``GradientFlow(SinkhornEnergy(β, W), WassersteinMetric(), descent=True)``, and V = −W ascends F.
"""

import functools

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import (
    MAX_STEPS_LIMIT,
    accepts_array_likes,
    check_beta,
    check_finite_array,
    check_matrix,
    check_shape_tokens,
    check_size,
    check_symmetric,
    check_weights,
    hyperparameter,
    is_traced,
)
from .._energy import AbstractEnergy, default_weights
from ._base import AbstractAttention
from ._self_attention import SelfAttention


def _check_iterations(iterations, tolerance):
    # A loop count (the sweeps of a while loop): bounded like a solver's steps, before any work.
    check_size(iterations, "iterations", limit=MAX_STEPS_LIMIT, what="Sinkhorn sweeps")
    if tolerance is not None and not float(tolerance) >= 0:
        raise ValueError(
            f"tolerance: expected a marginal tolerance >= 0 (or None for "
            f"100·machine epsilon), got {tolerance}"
        )
    if tolerance is not None:
        check_beta(tolerance, name="tolerance")  # a finite real >= 0 (0: fixed sweeps)


def _sweep_v(logits, log_w, u):
    """The column update: v_j = −logsumexp_i(L_ij + log w_i + u_i) makes the columns exact."""
    return -jax.nn.logsumexp(logits + (log_w + u)[:, None], axis=0)


def _row_error(logits, log_w, u, v):
    """max_i |Σ_j A_ij − 1| for A_ij = π_ij / w_i, from Σ_j A_ij = exp(u_i + lse_j(…))."""
    lse_rows = jax.nn.logsumexp(logits + (log_w + v)[None, :], axis=1)
    return jnp.max(jnp.abs(jnp.expm1(u + lse_rows)))


def _default_tolerance(logits):
    # The logits carry a rounding error of eps·|L_ij|, which the marginals inherit: a fixed
    # 100·eps is below that floor once |L| ≳ 100 (measured: ≈ 1–2·eps·max|L|).
    eps = jnp.finfo(logits.dtype).eps
    return 10 * eps * jnp.maximum(10.0, jnp.max(jnp.abs(logits)))


def _sinkhorn_or_newton(logits, log_w, u, v):
    """One Sinkhorn sweep and one Newton step on the row sums from (u, v): the better of the two
    by the row error, as (u, v, error)."""
    n = logits.shape[0]
    w = jnp.exp(log_w)
    u_sinkhorn = -jax.nn.logsumexp(logits + (log_w + v)[None, :], axis=1)
    v_sinkhorn = _sweep_v(logits, log_w, u_sinkhorn)
    error_sinkhorn = _row_error(logits, log_w, u_sinkhorn, v_sinkhorn)
    plan = jnp.exp(logits + (log_w + u)[:, None] + (log_w + v)[None, :])
    rows = plan.sum(axis=1)
    jacobian = jnp.diag(rows) - (plan / w[None, :]) @ plan.T + jnp.mean(w) / n
    u_newton = u + jnp.linalg.solve(jacobian, w - rows)
    v_newton = _sweep_v(logits, log_w, u_newton)
    error_newton = _row_error(logits, log_w, u_newton, v_newton)
    # A NaN Newton error (singular Jacobian in float32) compares False: Sinkhorn is taken.
    newton = error_newton < error_sinkhorn
    return (
        jnp.where(newton, u_newton, u_sinkhorn),
        jnp.where(newton, v_newton, v_sinkhorn),
        jnp.where(newton, error_newton, error_sinkhorn),
    )


@accepts_array_likes("logits", "log_weights")  # outside the jit: a list is not a pytree of arrays
@functools.partial(jax.jit, static_argnames=("iterations", "tolerance"))
def sinkhorn_potentials(
    logits: Float[Array, "n n"],
    log_weights: Float[Array, " n"],
    iterations: int,
    tolerance: float | None,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    """Log-domain scalings u, v with π_ij = w_i w_j exp(L_ij + u_i + v_j) of marginals (w, w).

    Every exponential is of a log-sum-exp-shifted quantity, so any β is finite in float32. Each
    iteration takes whichever of two candidates leaves the smaller row-marginal error
    max_i |Σ_j A_ij − 1| (A_ij = π_ij / w_i; the columns are exact after each step):

    - a Sinkhorn sweep u_i = −logsumexp_j(L_ij + log w_j + v_j), v_j = −logsumexp_i(L_ij +
      log w_i + u_i), which converges from anywhere but linearly, at a rate that tends to 1
      when the plan nears a permutation (moderate β: measured 5·10⁻⁷ after 20 000 sweeps for
      6 tokens at β = 10);
    - a Newton step on the semi-dual u ↦ v(u): (diag(π1) − π diag(1/w) πᵀ) δu = w − π1, whose
      matrix is the Jacobian of the row sums (null vector 1, fixed by adding 11ᵀ·mean(w)/n),
      quadratically convergent near the solution (3–7 iterations measured, n ≤ 128).

    The loop stops when the row error of the current plan is within ``tolerance`` (``None``:
    10·eps·max(10, max|L_ij|), just above the rounding floor of the logits) and **raises**
    (``eqx.error_if``, so also under ``jit``) if ``iterations`` are spent first. With
    ``tolerance=0`` it runs exactly ``iterations`` plain Sinkhorn sweeps through ``lax.scan``
    (no convergence check; forward-mode autodiff accepts it). The early-stopping loop is a
    checkpointed while loop: reverse mode only. Jitted, with ``iterations`` and ``tolerance``
    static.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> L = jnp.array([[2.0, 0.0], [1.0, 0.5]])
        >>> u, v = af.sinkhorn_potentials(L, jnp.log(jnp.array([0.5, 0.5])), 100, None)
        >>> A = 0.5 * jnp.exp(L + u[:, None] + v[None, :])
        >>> bool(jnp.allclose(A.sum(0), 1) and jnp.allclose(A.sum(1), 1))
        True
    """
    _check_iterations(iterations, tolerance)
    logits = check_finite_array(logits, "logits", allow_negative_infinity=True)
    log_weights = check_finite_array(log_weights, "log_weights", allow_negative_infinity=True)
    log_w = log_weights
    n = logits.shape[0]
    u = jnp.zeros(n, logits.dtype)
    if tolerance is not None and float(tolerance) == 0:

        def sweep(v, _):
            u = -jax.nn.logsumexp(logits + (log_w + v)[None, :], axis=1)
            return _sweep_v(logits, log_w, u), u

        v, us = jax.lax.scan(sweep, jnp.zeros(n, logits.dtype), None, length=iterations)
        return us[-1], v

    def step(carry):
        return _sinkhorn_or_newton(logits, log_w, carry[0], carry[1])

    v = _sweep_v(logits, log_w, u)
    init = (u, v, _row_error(logits, log_w, u, v))
    tol = _default_tolerance(logits) if tolerance is None else tolerance
    u, v, error = eqxi.while_loop(
        lambda c: c[2] > tol, step, init, max_steps=int(iterations), kind="checkpointed"
    )
    tol_text = "10·eps·max(10, max|logits|)" if tolerance is None else f"{tolerance:g}"
    u = eqx.error_if(
        u,
        error > tol,
        f"Sinkhorn attention did not converge: after iterations={iterations}, a row sum of "
        f"the attention matrix still misses 1 by more than tolerance={tol_text}. "
        "Increase `iterations`, loosen `tolerance`, or lower `beta` (the problem is "
        "ill-conditioned when near-identical tokens meet a large beta); tolerance=0 runs a "
        "fixed number of Sinkhorn sweeps without this check",
    )
    return u, v


class SinkhornAttention(AbstractAttention):
    r"""Self-attention with Sinkhorn (doubly stochastic) normalisation, as in Sinkformers:

        ẋ_i = P^⊥_{x_i} ( Σ_j A_ij V x_j ),   A = diag(e^u) exp(β⟨Q x_i, K x_j⟩) diag(e^v) / n,

    (for a weighted measure, ``args`` = weights w: the marginals are (w, w) and
    A_ij = e^{u_i + L_ij + v_j} w_j, rows and columns Σ_i w_i A_ij = 1 summing to one),

    with u, v the Sinkhorn scalings that make A doubly stochastic (rows and columns sum to 1)
    instead of the softmax's row normalisation of (2.4). With QᵀK = W symmetric, A is symmetric
    and V = ±W makes this the Wasserstein gradient descent/ascent of ½ OT_{1/β}(μ, μ) for the cost
    −⟨Wx, y⟩ (:class:`SinkhornEnergy`): the symmetric, Wasserstein-gradient alternative to (SA)
    of GLPR Rem. 3.5. A lower-triangular doubly stochastic matrix is the identity, so there is no
    causal variant. Computed in the log domain (finite for any β in float32).

    Args:
        beta: inverse temperature β ≥ 0 (scalar); ε = 1/β is the entropic regularisation.
        Q, K: (k, d) query and key matrices (identity when omitted).
        V: (d, d) value matrix (identity when omitted).
        iterations: maximum number of solver iterations (Sinkhorn sweep or Newton step, see
            :func:`sinkhorn_potentials`; 3–7 typically suffice). Reaching it without meeting
            ``tolerance`` raises an error (also under ``jit``) rather than return a matrix
            that is not doubly stochastic.
        tolerance: stop when every row sum is within this of 1; ``None``: 10·eps·max(10,
            max|logits|), just above the rounding floor; ``0``: run exactly ``iterations``
            plain Sinkhorn sweeps, unchecked (forward-mode differentiable).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 6, 3)
        >>> A = af.SinkhornAttention(2.0).attention_matrix(x)
        >>> bool(jnp.allclose(A.sum(0), 1) and jnp.allclose(A.sum(1), 1))
        True
    """

    attention: SelfAttention
    iterations: int = eqx.field(static=True)
    tolerance: float | None = eqx.field(static=True)

    def __init__(
        self,
        beta,
        Q=None,
        K=None,
        V=None,
        *,
        iterations: int = 10_000,
        tolerance: float | None = None,
    ):
        # β ≥ 0 (SelfAttention also takes β < 0): ε = 1/β is the entropic regularisation
        check_beta(beta)
        self.attention = SelfAttention(beta, Q, K, V)
        _check_iterations(iterations, tolerance)
        self.iterations = int(iterations)
        self.tolerance = None if tolerance is None else float(tolerance)

    @property
    def dim(self) -> int | None:
        """The token dimension d fixed by Q, K or V (None when all are the identity)."""
        return self.attention.dim

    def scores(self, x, weights):
        """Scores whose bias carries the Sinkhorn scalings: b_ij = u_i + v_j.

        With marginals w (``weights``; uniform when None) and log-domain scalings (u, v) of
        :func:`sinkhorn_potentials`, A_ij = w_j exp(L_ij + u_i + v_j): the kernel's "sum"
        normalisation with weights w and that bias. Columns are exact after the last v-update
        and rows are within ``tolerance`` of 1; w_j A_ij ≤ 1, so nothing overflows.
        """
        base = self.attention.scores(x, None)
        logits = base.queries @ base.keys.T
        n = x.shape[0]
        if weights is None:
            weights = jnp.full((n,), 1.0 / n, dtype=logits.dtype)
        else:
            message = "args (weights): Sinkhorn attention needs positive marginals w_j > 0"
            if is_traced(weights):
                weights = eqx.error_if(weights, jnp.any(weights <= 0), message)
            elif bool(jnp.any(weights <= 0)):
                raise ValueError(f"{message}, got {weights}")
            weights = weights.astype(logits.dtype)
        u, v = sinkhorn_potentials(logits, jnp.log(weights), self.iterations, self.tolerance)
        return base._replace(weights=weights, bias=u[:, None] + v[None, :], normalization="sum")


class SinkhornEnergy(AbstractEnergy):
    r"""Half the entropic self-transport cost, the energy that Sinkhorn attention descends [D]:

        F(x) = ½ OT_ε(μ, μ),   μ = Σ_i w_i δ_{x_i},   ε = 1/β,   cost c(x, y) = −xᵀ A y,

    OT_ε(μ, μ) = min_π Σ_ij π_ij c(x_i, x_j) + ε KL(π ‖ w ⊗ w) = ε Σ_i w_i (u_i + v_i) at the
    Sinkhorn scalings (see :func:`sinkhorn_potentials`). It is evaluated as the dual objective
    with the potentials held fixed, so autodiff returns the envelope-theorem gradient
    ∇_{x_i}F = −w_i Σ_j A_ij A x_j exactly at convergence. Weights must be positive.

    ``GradientFlow(SinkhornEnergy(β, W), WassersteinMetric(), descent=True)`` is
    ``SinkhornAttention(β, V=W)`` for W = QᵀK symmetric (module docstring).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 6, 3)
        >>> flow = af.GradientFlow(af.SinkhornEnergy(2.0), af.WassersteinMetric(), descent=True)
        >>> bool(jnp.allclose(flow(0.0, x), af.SinkhornAttention(2.0)(0.0, x), atol=1e-6))
        True
    """

    beta: float | Float[Array, ""]
    A: Float[Array, "d d"] | None
    iterations: int = eqx.field(static=True)
    tolerance: float | None = eqx.field(static=True)

    def __init__(self, beta, A=None, *, iterations: int = 10_000, tolerance: float | None = None):
        # A number is a hyperparameter (fixed under training), an array a parameter
        # (docs/conventions.md, "Which parameters are trained").
        self.beta = hyperparameter(check_beta(beta, positive=True))
        if A is not None:
            A = check_matrix(A, "A", "(d, d)")
            check_symmetric(
                A, "A", "the Sinkhorn energy is a gradient only for a symmetric bilinear form"
            )
            A = jnp.asarray(A)
        self.A = A
        _check_iterations(iterations, tolerance)
        self.iterations = int(iterations)
        self.tolerance = None if tolerance is None else float(tolerance)

    def __call__(self, x, weights=None):
        check_shape_tokens(x)
        n, d = x.shape
        if self.A is not None and self.A.shape != (d, d):
            raise ValueError(
                f"A: expected shape ({d}, {d}) to match tokens of dimension d = "
                f"{d}, got {self.A.shape}"
            )
        w = default_weights(n, x.dtype) if weights is None else check_weights(weights, n)
        message = "weights: the Sinkhorn energy needs positive weights (log w enters the scalings)"
        if is_traced(w):
            w = eqx.error_if(w, jnp.any(w <= 0), message)
        elif bool(jnp.any(w <= 0)):
            raise ValueError(f"{message}, got {w}")
        log_w = jnp.log(w)
        similarity = x @ x.T if self.A is None else x @ self.A @ x.T
        logits = self.beta * similarity
        u, v = sinkhorn_potentials(
            jax.lax.stop_gradient(logits), log_w, self.iterations, self.tolerance
        )
        u, v = jax.lax.stop_gradient(u), jax.lax.stop_gradient(v)
        coupling = jnp.exp(logits + (u + log_w)[:, None] + (v + log_w)[None, :])
        dual = jnp.sum(w * (u + v)) - jnp.sum(coupling) + 1.0
        return dual / (2 * self.beta)


__all__ = ["SinkhornAttention", "SinkhornEnergy", "sinkhorn_potentials"]
