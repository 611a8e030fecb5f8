r"""The equiangular reduction (§6.1 of Rigollet, *The Mean-Field Dynamics of Transformers*,
arXiv:2512.01868): tokens with ⟨x_i(0), x_j(0)⟩ = ρ₀ for all i ≠ j stay equiangular, and the
common inner product ρ(t) solves one separable ODE (docs/maths.md §4, any ρ₀ instead of 0):

    (SA)   ρ' = 2(1−ρ)(1+(n−1)ρ) / (e^{β(1−ρ)} + n − 1),
    (USA)  ρ' = (2/n) e^{βρ} (1−ρ)(1+(n−1)ρ).

The time to go from ρ₀ = a to 1 − δ = b is the one integral T = ∫_a^b dρ/ρ'. By partial fractions
it has the closed form (Ei the exponential integral, E₁(z) = ∫_z^∞ e^{−s}/s ds)

    T_USA = ½ [e^{−βa} G(a) − e^{−βb} G(b)],   G(r) = ŝ(β(1−r)) + ê(β/(n−1) + βr),
    T_SA  = (n−1)/(2n) · ln[(1−a)(1+(n−1)b) / ((1−b)(1+(n−1)a))] + (e^β/n) T_USA,

with the bounded scaled functions ŝ(x) = e^{−x} Ei(x) and ê(z) = e^{z} E₁(z) of
``attnflow.theory._clustering``. Every exponential is carried next to the function it
multiplies, so no term overflows unless T itself does (SA: e^{β(1−a)}/β, past float64 only for
β(1−a) ≳ 709), and the difference is taken between the two ends of the one interval [a, b],
never between two times measured from ρ = 0: those are both ≈ e^β/(2β) at large β and their
difference is lost to rounding (``clustering_time`` at n = 2, β = 80 gives the same value for
δ = 1e-3 and δ = 0.5).
"""

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._check import (
    check_delta,
    check_sa_normalization,
    check_static,
    expected,
    is_traced,
    model_parameters_keyword_only,
)
from ._clustering import (
    _EULER_GAMMA,
    _bisect,
    _check_n,
    _check_nonnegative,
    _float_array,
    _iterations,
    _scaled_e1,
    _scaled_ei,
    check_inner_product_arguments,
)


def _check_rho0(rho0, n):
    """ρ₀ in the open interval (−1/(n−1), 1): the equiangular Gram matrix (1−ρ₀)I + ρ₀11ᵀ is
    positive definite exactly there (ρ₀ = −1/(n−1) is the regular simplex, an equilibrium)."""
    low = -1.0 / (n - 1)
    rho0 = _float_array(rho0, "rho0", low=low, high=1.0)
    if not is_traced(rho0):
        values = jnp.asarray(rho0)
        if bool(jnp.any(values <= low)) or bool(jnp.any(values >= 1.0)):
            bad = float(values[(values <= low) | (values >= 1.0)].ravel()[0])
            expected(
                "rho0",
                f"an initial inner product in the open interval (-1/(n-1), 1) = ({low:.6g}, 1) "
                "(the equiangular Gram matrix is positive definite there)",
                bad,
            )
    return rho0


def _g(beta, n, r, one_minus_r):
    """G(r) = ŝ(β(1−r)) + ê(β/(n−1) + βr), for β > 0."""
    return _scaled_ei(beta * one_minus_r) + _scaled_e1(beta * (1.0 / (n - 1) + r))


def _log_ratio(n, a, delta):
    """ln[(1−a)(1+(n−1)b) / ((1−b)(1+(n−1)a))] with b = 1 − δ, without cancellation."""
    gap = (1.0 - delta) - a
    return jnp.log1p(gap / delta) + jnp.log1p((n - 1) * gap / (1 + (n - 1) * a))


def _time(beta, n, a, delta, normalization):
    """T(a → 1 − δ), elementwise; 0 where a ≥ 1 − δ (already there)."""
    b = 1.0 - delta
    ahead = a >= b
    a = jnp.where(ahead, b - 0.5 * delta, a)  # a harmless point; the result is masked below
    positive = beta > 0
    bp = jnp.where(positive, beta, 1.0)
    # The two ends of [a, b], each scaled by its own exponential.
    g_a = _g(bp, n, a, 1.0 - a)
    g_b = _g(bp, n, b, delta)
    log_ratio = _log_ratio(n, a, delta)
    if normalization == "n":
        value = 0.5 * (jnp.exp(-bp * a) * g_a - jnp.exp(-bp * b) * g_b)
    else:
        exp_part = (jnp.exp(bp * (1.0 - a)) * g_a - jnp.exp(bp * delta) * g_b) / (2 * n)
        value = (n - 1) / (2 * n) * log_ratio + exp_part
    value = jnp.where(positive, value, 0.5 * log_ratio)
    return jnp.where(ahead, 0.0, value)


_time_jit = jax.jit(_time, static_argnums=4)


@model_parameters_keyword_only("beta", "n", "rho0", "delta", "normalization")
def equiangular_time(
    rho0: ArrayLike,
    *,
    beta: ArrayLike,
    n: int,
    delta: float = 1e-3,
    normalization: Literal["softmax", "n"] = "softmax",
) -> Float[Array, "*shape"]:
    r"""The time at which equiangular tokens with ⟨x_i(0), x_j(0)⟩ = ρ₀ reach ⟨x_i, x_j⟩ = 1 − δ,
    §6.1 of arXiv:2512.01868: the one integral T = ∫_{ρ₀}^{1−δ} dρ/ρ', in closed form.

    With ρ' as in :func:`equiangular_inner_product`, a = ρ₀, b = 1 − δ,
    G(r) = e^{−β(1−r)} Ei(β(1−r)) + e^{β/(n−1)+βr} E₁(β/(n−1) + βr):

        T_USA = ½ [e^{−βa} G(a) − e^{−βb} G(b)],
        T_SA  = (n−1)/(2n) ln[(1−a)(1+(n−1)b) / ((1−b)(1+(n−1)a))] + (e^β/n) T_USA,

    and ½ ln[…] for both at β = 0. At ρ₀ = 0 this is :func:`clustering_time`. Overflow-safe:
    each exponential multiplies the bounded scaled function of its own end of [a, b], so the
    result is finite wherever T is representable (SA grows like e^{β(1−ρ₀)}/(2β(1−ρ₀²)) for
    n = 2; float64 holds it up to β(1−ρ₀) ≈ 700), and no two large times are subtracted: at
    n = 2, β = 80, ρ₀ = 0.5 the difference of two ``clustering_time`` values is exactly 0 while
    T = 2.00e15 (rescaled by e^{−β(1−ρ₀)}: 0.00848).

    Args:
        rho0: initial inner product in (−1/(n−1), 1), any shape.
        beta: β ≥ 0 (keyword-only); broadcast against ``rho0``.
        n: number of tokens (≥ 2; keyword-only).
        delta: the threshold δ of ⟨x_i, x_j⟩ ≥ 1 − δ, 0 < δ < 2. The time is 0 where
            ρ₀ ≥ 1 − δ already.
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).

    Returns:
        T, the broadcast shape of ``beta`` and ``rho0``.

    Example:
        >>> import math, attnflow.theory as th
        >>> # β = 0: ½ ln[(1−a)(1+3b)/((1−b)(1+3a))]
        >>> t = th.equiangular_time(0.5, beta=0.0, n=4, delta=1e-2)
        >>> abs(float(t) - 0.5 * math.log(0.5 * 3.97 / (0.01 * 2.5))) < 1e-14
        True
        >>> round(float(th.equiangular_time(0.5, beta=80.0, n=2) * math.exp(-40.0)), 5)
        0.00848
    """
    n = _check_n(n)
    delta = float(check_delta(check_static(delta, "delta", "the threshold 1 − δ is an end point")))
    check_sa_normalization(normalization)
    beta = _check_nonnegative(beta, "beta")
    rho0 = _check_rho0(rho0, n)
    dtype = jnp.result_type(beta, rho0, float)
    beta, rho0 = jnp.broadcast_arrays(beta.astype(dtype), rho0.astype(dtype))
    return _time_jit(beta, jnp.asarray(n, dtype), rho0, jnp.asarray(delta, dtype), normalization)


def _inner_product(t, beta, n, a, normalization):
    t, beta, a = jnp.broadcast_arrays(t, beta, a)
    # β = 0: (1+(n−1)ρ)/(1−ρ) = K e^{2t}, K = (1+(n−1)a)/(1−a).
    k = (1 + (n - 1) * a) / (1 - a)
    decay = jnp.exp(-2 * t)
    beta0 = (k - decay) / (k + (n - 1) * decay)

    # ρ(t) = 1 − δ exactly when T(a → 1 − δ) = t; T increases in u = −log δ.
    def excess(u):
        return _time(beta, n, a, jnp.exp(-u), normalization) - t

    umax = -math.log(jnp.finfo(t.dtype).tiny)
    lo = -jnp.log1p(-a)
    u = _bisect(excess, lo, jnp.full_like(t, umax), _iterations(t.dtype) + 8)
    rho = jnp.where(t > 0, -jnp.expm1(-u), a)
    return jnp.where(beta > 0, rho, beta0)


_inner_product_jit = jax.jit(_inner_product, static_argnums=4)


@model_parameters_keyword_only("t", "n", "beta", "rho0", "normalization")
def equiangular_inner_product(
    t: ArrayLike,
    rho0: ArrayLike,
    *,
    beta: ArrayLike,
    n: int,
    normalization: Literal["softmax", "n"] = "softmax",
) -> Float[Array, "*shape"]:
    r"""ρ(t) = ⟨x_i(t), x_j(t)⟩ (i ≠ j) for equiangular initial tokens, ⟨x_i(0), x_j(0)⟩ = ρ₀:
    the equiangular reduction of §6.1 of arXiv:2512.01868 (docs/maths.md §4 with any ρ₀):

        (SA)   ρ' = 2(1−ρ)(1+(n−1)ρ) / (e^{β(1−ρ)} + n − 1),
        (USA)  ρ' = (2/n) e^{βρ} (1−ρ)(1+(n−1)ρ),    ρ(0) = ρ₀ ∈ (−1/(n−1), 1).

    Permutation symmetry keeps the tokens equiangular, and the ODE is separable: ρ(t) = 1 − δ
    exactly when t = :func:`equiangular_time` (ρ₀, β, n, δ), inverted here by bisection on
    −log δ to full precision (no time-stepping error; no time shift from the orthogonal curve,
    which loses everything to rounding at large β). At β = 0,
    ρ(t) = (K − e^{−2t})/(K + (n−1)e^{−2t}) with K = (1+(n−1)ρ₀)/(1−ρ₀). ρ increases to 1 at the
    rate of :func:`equiangular_asymptotics`. Tested against :func:`attnflow.solve` on tokens
    built from a Cholesky factor of (1−ρ₀)I + ρ₀11ᵀ to 1e-9.

    Args:
        t: times ≥ 0; broadcast against ``rho0`` and ``beta``.
        rho0: initial inner product in (−1/(n−1), 1).
        beta: β ≥ 0 (keyword-only).
        n: number of tokens (≥ 2; keyword-only; the reduction holds in any d ≥ n − 1 that fits
            the tokens).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).

    Example:
        >>> import jax.numpy as jnp, attnflow.theory as th
        >>> rho = th.equiangular_inner_product(jnp.array([0.0, 1.0, 30.0]), 0.3, beta=2.0, n=4)
        >>> [round(float(r), 4) for r in rho]
        [0.3, 0.7162, 1.0]
    """
    t, n, beta = check_inner_product_arguments(t, n, beta, normalization)
    rho0 = _check_rho0(rho0, n)
    dtype = jnp.result_type(t, beta, rho0, float)
    return _inner_product_jit(
        t.astype(dtype),
        beta.astype(dtype),
        jnp.asarray(n, dtype),
        rho0.astype(dtype),
        normalization,
    )


class EquiangularAsymptotics(eqx.Module):
    r"""1 − ρ(t) ~ C e^{−λt} as t → ∞ (:func:`equiangular_asymptotics`): ``rate`` λ and
    ``log_constant`` log C (C itself overflows at large β: take ``exp`` where it fits)."""

    rate: Float[Array, "*shape"]
    log_constant: Float[Array, "*shape"]


def _log_constant(beta, n, a, normalization):
    positive = beta > 0
    bp = jnp.where(positive, beta, 1.0)
    beta0 = jnp.log(n * (1 - a) / (1 + (n - 1) * a))
    # log C_USA = Ei(β(1−a)) + e^{β(1−a)} ê(β/(n−1) + βa) − γ − log β − ê(βn/(n−1)).
    usa = (
        jnp.exp(bp * (1 - a)) * _g(bp, n, a, 1 - a)
        - _EULER_GAMMA
        - jnp.log(bp)
        - _scaled_e1(bp * n / (n - 1))
    )
    if normalization == "softmax":
        usa = (n - 1) / n * beta0 + usa / n
    return jnp.where(positive, usa, beta0)


@model_parameters_keyword_only("beta", "n", "rho0", "normalization")
def equiangular_asymptotics(
    rho0: ArrayLike,
    *,
    beta: ArrayLike,
    n: int,
    normalization: Literal["softmax", "n"] = "softmax",
) -> EquiangularAsymptotics:
    r"""The rate λ and constant C of 1 − ρ(t) ~ C e^{−λt} for the equiangular reduction
    (:func:`equiangular_inner_product`), §6.1 of arXiv:2512.01868.

    Near ρ = 1 the right-hand sides are λ(1 − ρ) + O((1−ρ)²) with

        λ = 2 (SA),      λ = 2 e^β (USA; the 1/n of USA cancels the n of 1 + (n−1)ρ),

    the survey's λ_β in attnflow's normalisation (USA divides by n, not by n e^β). Then
    t = −log(1−ρ)/λ + log(C)/λ + o(1) with, from the closed form of :func:`equiangular_time`
    (a = ρ₀, G as there, γ_E Euler's constant),

        log C_USA = e^{β(1−a)} G(a) − γ_E − log β − e^{βn/(n−1)} E₁(βn/(n−1)),
        log C_SA  = ((n−1)/n) log[n(1−a)/(1+(n−1)a)] + log(C_USA)/n,

    and log C = log[n(1−a)/(1+(n−1)a)] for both at β = 0 (ρ₀ = 0: C = n). C is huge at large β
    (the flow waits ~e^{β(1−ρ₀)} before its exponential regime), so the result carries log C.

    Args:
        rho0: initial inner product in (−1/(n−1), 1).
        beta: β ≥ 0 (keyword-only); broadcast against ``rho0``.
        n: number of tokens (≥ 2; keyword-only).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).

    Returns:
        :class:`EquiangularAsymptotics` (``rate``, ``log_constant``).

    Example:
        >>> import math, attnflow.theory as th
        >>> a = th.equiangular_asymptotics(0.0, beta=0.0, n=8)
        >>> float(a.rate), round(math.exp(float(a.log_constant)), 12)
        (2.0, 8.0)
        >>> usa = th.equiangular_asymptotics(0.0, beta=1.0, n=8, normalization="n")
        >>> round(float(usa.rate), 6)  # 2e
        5.436564
    """
    n = _check_n(n)
    check_sa_normalization(normalization)
    beta = _check_nonnegative(beta, "beta")
    rho0 = _check_rho0(rho0, n)
    dtype = jnp.result_type(beta, rho0, float)
    beta, rho0 = jnp.broadcast_arrays(beta.astype(dtype), rho0.astype(dtype))
    rate = 2 * jnp.exp(beta) if normalization == "n" else jnp.full_like(beta, 2.0)
    log_c = _log_constant_jit(beta, jnp.asarray(n, dtype), rho0, normalization)
    return EquiangularAsymptotics(rate=rate, log_constant=log_c)


_log_constant_jit = jax.jit(_log_constant, static_argnums=3)
