"""Closed forms of GLPR §4–§6: pairwise-orthogonal tokens (Thm 6.8), the curve Γ_∞,δ (6.12),
Wendel's theorem (Thm 6.7) and the cone-collapse rates of Lemma 6.4 (docs/maths.md §4, §5).

The clustering time of Thm 6.8 is the separable integral t*(β) = ∫_0^{1-δ} dγ / RHS(γ), written
with exponential integrals. Every exponential that can overflow is carried in scaled form
(e^{-x} Ei(x) and e^{z} E_1(z), both bounded), so USA's curve is finite for every β and SA's
overflows only where t* itself exceeds the largest float (β ≳ 709 in float64, ≳ 88 in float32).
"""

import math
from fractions import Fraction
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._check import (
    check_budget,
    check_delta,
    check_formula_count,
    check_real_values,
    check_sa_normalization,
    expected,
    is_traced,
    model_parameters_keyword_only,
)

_EULER_GAMMA = 0.57721566490153286061


def _check_n(n, minimum=2):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"n: expected an integer number of tokens >= {minimum}, got {n!r}")
    return check_formula_count(n, "n", low=minimum, what="a number of tokens")


def _check_delta(delta):
    """δ through the one validator (0 < δ < 2), then the closed forms' own domain δ < 1."""
    if is_traced(delta) or jnp.ndim(delta) != 0:
        raise ValueError(f"delta: expected a Python/NumPy scalar in (0, 1), got {delta!r}")
    value = float(check_delta(delta))
    if value >= 1.0:
        raise ValueError(
            f"delta: expected 0 < delta < 1 here, got {value}: pairwise-orthogonal tokens have "
            "<x_i, x_j> = 0 >= 1 - delta, so they start delta-clustered and the clustering "
            "time (6.12) is 0 for every beta"
        )
    return value


def _float_array(x, name, **bounds):
    x = check_real_values(x, name, **bounds)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


def _as(x, *values):
    return tuple(jnp.asarray(v, x.dtype) for v in values)


def _check_nonnegative(x, name):
    """Finite and >= 0, elementwise; eqx.error_if when traced."""
    return _float_array(x, name, low=0)


def check_inner_product_arguments(t, n, beta, normalization):
    """``(t, n, beta)`` of an inner-product curve γ_β(t) (orthogonal or equiangular start)
    checked: n an integer ≥ 2, the normalisation "softmax" or "n", t and β finite and ≥ 0
    (float arrays; ``eqx.error_if`` when traced)."""
    n = _check_n(n)
    check_sa_normalization(normalization)
    t = _check_nonnegative(t, "t")
    beta = _check_nonnegative(beta, "beta")
    return t, n, beta


def _series(x, terms, update):
    """Σ_{k=1}^{terms-1} p_k / k with p_0 = 1 and p_k = update(p_{k-1}, k), elementwise."""

    def body(k, carry):
        total, power = carry
        power = update(power, k)
        return total + power / k, power

    total, _ = jax.lax.fori_loop(1, terms, body, (jnp.zeros_like(x), jnp.ones_like(x)))
    return total


def _scaled_ei(x):
    """e^{-x} Ei(x) for x > 0 (bounded, ~1/x at infinity), to ~1e-15 relative in float64.

    x < 40: Ei(x) = γ + ln x + Σ_k x^k/(k·k!), all terms positive (150 terms suffice at x = 40).
    x ≥ 40: the asymptotic series Σ_{k<40} k!/x^{k+1}, truncated near its smallest term (~e^{-40}).
    jax.scipy.special.expi/exp1 are avoided on purpose: their batched while-loops can fail to
    terminate on arrays mixing small and large arguments (jax 0.10).
    """
    small = x < 40.0
    xs = jnp.where(small, x, 1.0)
    xl = jnp.where(small, 40.0, x)
    series = _EULER_GAMMA + jnp.log(xs) + _series(xs, 150, lambda p, k: p * xs / k)

    def asym(k, carry):
        total, term = carry
        term = term * k / xl
        return total + term, term

    asymptotic, _ = jax.lax.fori_loop(1, 40, asym, (1.0 / xl, 1.0 / xl))
    return jnp.where(small, jnp.exp(-xs) * series, asymptotic)


def _scaled_e1(z):
    """e^{z} E_1(z) for z > 0 (bounded, ~1/z at infinity), to ~1e-14 relative in float64.

    z ≤ 1.5: E_1(z) = −γ − ln z − Σ_k (−z)^k/(k·k!) (40 terms); z > 1.5: the continued fraction
    e^{z}E_1(z) = 1/(z + 1 − 1²/(z + 3 − 2²/(z + 5 − …))) evaluated backwards from depth 60.
    """
    small = z <= 1.5
    zs = jnp.where(small, z, 1.0)
    zl = jnp.where(small, 2.0, z)
    series = -_EULER_GAMMA - jnp.log(zs) - _series(zs, 40, lambda p, k: -p * zs / k)
    depth = 60

    def fraction(i, f):
        k = depth - i
        return zl + (2 * k - 1) - k * k / f

    f = jax.lax.fori_loop(0, depth, fraction, zl + (2 * depth + 1))
    return jnp.where(small, jnp.exp(zs) * series, 1.0 / f)


def _time_positive(beta, n, delta, normalization):
    """t*(β) of docs/maths.md §4 for β > 0 (elementwise in β and δ), in scaled form."""
    m = n - (n - 1) * delta
    decay = jnp.exp(-beta * (1 - delta))
    ei_part = _scaled_ei(beta) - decay * _scaled_ei(beta * delta)
    e1_part = _scaled_e1(beta / (n - 1)) - decay * _scaled_e1(beta * m / (n - 1))
    usa = 0.5 * (ei_part + e1_part)
    if normalization == "n":
        return usa
    log_ratio = jnp.log1p(n * (1 - delta) / delta)  # ln(m/δ)
    return (n - 1) / (2 * n) * log_ratio + jnp.exp(beta) * usa / n


def _clustering_time(beta, n, delta, normalization):
    positive = beta > 0
    value = _time_positive(jnp.where(positive, beta, 1.0), n, delta, normalization)
    return jnp.where(positive, value, 0.5 * jnp.log1p(n * (1 - delta) / delta))


def clustering_time(
    beta: ArrayLike,
    n: int,
    delta: float = 1e-3,
    normalization: Literal["softmax", "n"] = "softmax",
) -> Float[Array, "*shape"]:
    r"""The time t*(β) at which pairwise-orthogonal tokens reach ⟨x_i, x_j⟩ = 1 − δ: the curve
    Γ_∞,δ = {(t, β): γ_β(t) = 1 − δ} of paper (6.12), in closed form (docs/maths.md §4).

    With m = n − (n−1)δ, z₁ = β/(n−1), z₂ = βm/(n−1), Ei the exponential integral and
    E₁(z) = ∫_z^∞ e^{-s}/s ds, integrating (6.9)/(6.10) by partial fractions gives

        t*_USA(β) = ½ e^{-β}[Ei(β) − Ei(βδ)] + ½ e^{β/(n−1)}[E₁(z₁) − E₁(z₂)],
        t*_SA(β)  = (n−1)/(2n) ln(m/δ) + (e^β/n) t*_USA(β),

    the second identity being the SA form of docs/maths.md §4 rewritten (SA's integrand is
    e^β/n times USA's plus (n−1)/(2(1−γ)(1+(n−1)γ))). At β = 0 both equal ½ ln(m/δ). t*_SA
    increases with β (the clustered region of Fig. 3 is β ≤ β*(t), see :func:`clustering_beta`),
    t*_USA decreases. Large β: t*_SA ~ e^β/(2β) once β ≫ n.

    Fig. 3's published curve was drawn for n = 128 on an n = 32 figure (docs/maths.md §9, §11.7);
    this is the exact curve for the n given.

    Args:
        beta: β ≥ 0, any shape.
        n: number of tokens (≥ 2).
        delta: the clustering threshold δ in (0, 1).
        normalization: ``"softmax"`` (SA, (6.9)) or ``"n"`` (USA, (6.10)).

    Returns:
        t*(β), the shape of ``beta``.

    Example:
        >>> import math, attnflow.theory as th
        >>> round(float(th.clustering_time(6.0, 32, 1e-3)), 1)  # docs/maths.md §9: t*(6) = 16.0
        16.0
        >>> round(float(th.clustering_time(0.0, 2, 0.5)), 6) == round(0.5 * math.log(3.0), 6)
        True
    """
    n = _check_n(n)
    delta = _check_delta(delta)
    check_sa_normalization(normalization)
    beta = _check_nonnegative(beta, "beta")
    return _clustering_time_jit(beta, *_as(beta, n, delta), normalization)


_clustering_time_jit = jax.jit(_clustering_time, static_argnums=3)


def _bisect(f, lo, hi, iterations):
    """Root of a function increasing on [lo, hi] with f(lo) ≤ 0 ≤ f(hi), elementwise."""

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        above = f(mid) > 0
        return jnp.where(above, lo, mid), jnp.where(above, mid, hi)

    lo, hi = jax.lax.fori_loop(0, iterations, body, (lo, hi))
    return 0.5 * (lo + hi)


def _iterations(dtype) -> int:
    return jnp.finfo(dtype).nmant + 12


def _beta0_inner_product(t, n):
    decay = jnp.exp(-2 * t)
    return -jnp.expm1(-2 * t) / (1 + (n - 1) * decay)


def _orthogonal_inner_product(t, beta, n, normalization):
    t, beta = jnp.broadcast_arrays(t, beta)
    positive = beta > 0
    b = jnp.where(positive, beta, 1.0)

    # γ(t) = 1 − δ where t*(β, δ) = t; t* decreases in δ, so bisect on u = −log δ.
    def excess(u):
        return _time_positive(b, n, jnp.exp(-u), normalization) - t

    umax = -math.log(jnp.finfo(t.dtype).tiny)
    u = _bisect(excess, jnp.zeros_like(t), jnp.full_like(t, umax), _iterations(t.dtype) + 8)
    return jnp.where(positive, -jnp.expm1(-u), _beta0_inner_product(t, n))


_orthogonal_inner_product_jit = jax.jit(_orthogonal_inner_product, static_argnums=3)


@model_parameters_keyword_only("t", "n", "beta", "normalization")
def orthogonal_inner_product(
    t: ArrayLike,
    *,
    beta: ArrayLike,
    n: int,
    normalization: Literal["softmax", "n"] = "softmax",
) -> Float[Array, "*shape"]:
    r"""γ_β(t) = ⟨x_i(t), x_j(t)⟩ (i ≠ j) for pairwise-orthogonal initial tokens, Thm 6.8.

    By permutation symmetry all pairwise inner products are equal and solve, from γ(0) = 0,

        (SA, (6.9))   γ' = 2(1−γ)(1+(n−1)γ) / (e^{β(1−γ)} + n − 1),
        (USA, (6.10)) γ' = (2/n) e^{βγ} (1−γ)(1+(n−1)γ).

    The ODE is separable: γ_β(t) = 1 − δ exactly when t = t*(β, δ) (:func:`clustering_time`),
    so γ is obtained by inverting that closed form in δ (bisection on −log δ to full precision:
    absolute error of a few ulps, no time-stepping error). At β = 0 it is the closed form
    (e^{2t} − 1)/(e^{2t} + n − 1) (:func:`orthogonal_inner_product_beta0`).

    Args:
        t: times ≥ 0; broadcast against ``beta``.
        beta: β ≥ 0 (keyword-only).
        n: number of tokens (≥ 2; keyword-only; orthogonality needs d ≥ n, but γ does not
            depend on d).
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).

    Returns:
        γ_β(t), the broadcast shape of ``t`` and ``beta``; increasing in t, → 1.

    Example:
        >>> import jax.numpy as jnp, attnflow.theory as th
        >>> g = th.orthogonal_inner_product(jnp.array([0.0, 1.0, 20.0]), beta=2.0, n=8)
        >>> [round(float(v), 4) for v in g]
        [0.0, 0.2307, 1.0]
    """
    t, n, beta = check_inner_product_arguments(t, n, beta, normalization)
    dtype = jnp.result_type(t, beta)
    t, beta = t.astype(dtype), beta.astype(dtype)
    return _orthogonal_inner_product_jit(t, beta, jnp.asarray(n, dtype), normalization)


@model_parameters_keyword_only("t", "n")
def orthogonal_inner_product_beta0(t: ArrayLike, *, n: int) -> Float[Array, "*shape"]:
    r"""γ_0(t) = (e^{2t} − 1)/(e^{2t} + n − 1): Thm 6.8 at β = 0, where SA and USA coincide
    (γ' = (2/n)(1−γ)(1+(n−1)γ), docs/maths.md §4). For n = 2 it is tanh t.

    Evaluated as (1 − e^{-2t})/(1 + (n−1)e^{-2t}), finite for every t ≥ 0.

    Example:
        >>> import math, attnflow.theory as th
        >>> abs(float(th.orthogonal_inner_product_beta0(0.7, n=2)) - math.tanh(0.7)) < 1e-15
        True
    """
    n = _check_n(n)
    t = _check_nonnegative(t, "t")
    return _beta0_inner_product(t, n)


def _clustering_beta(t, n, delta, normalization):
    dtype = t.dtype
    t_zero = 0.5 * jnp.log1p(n * (1 - delta) / delta)
    # t* overflows past β ≈ log(max float); the bracket stops there.
    beta_max = math.log(jnp.finfo(dtype).max) - 1.0
    sign = 1.0 if normalization == "softmax" else -1.0

    def excess(s):
        return sign * (_clustering_time(jnp.expm1(s), n, delta, normalization) - t)

    lo = jnp.zeros_like(t)
    hi = jnp.full_like(t, math.log1p(beta_max))
    beta = jnp.expm1(_bisect(excess, lo, hi, _iterations(dtype) + 8))
    if normalization == "softmax":
        return jnp.where(t >= t_zero, beta, jnp.nan)
    t_far = _clustering_time(jnp.asarray(beta_max, dtype), n, delta, normalization)
    return jnp.where(t >= t_zero, 0.0, jnp.where(t > t_far, beta, jnp.nan))


_clustering_beta_jit = jax.jit(_clustering_beta, static_argnums=3)


def clustering_beta(
    t: ArrayLike,
    n: int,
    delta: float = 1e-3,
    normalization: Literal["softmax", "n"] = "softmax",
) -> Float[Array, "*shape"]:
    r"""β*(t): the inverse of :func:`clustering_time`, i.e. the curve Γ_∞,δ as a function of t.

    For SA, t*(β) increases strictly from t*(0) = ½ ln(m/δ) (m = n − (n−1)δ) to ∞, so
    orthogonal tokens are δ-clustered at time t exactly for β ≤ β*(t) — the region under the
    curve of Fig. 3. For t < t*(0) no β clusters and the result is NaN.
    For USA, t*(β) decreases; clustered means β ≥ β*(t): the result is 0 for t ≥ t*(0), and NaN
    for t below t*_USA(β_max) (β_max ≈ log of the largest float).

    Computed by bisection on log(1 + β) to full precision.

    Args:
        t: times ≥ 0, any shape.
        n, delta, normalization: as in :func:`clustering_time`.

    Example:
        >>> import attnflow.theory as th
        >>> round(float(th.clustering_beta(30.0, 32, 1e-3)), 2)  # docs/maths.md §9: β*(30) = 6.91
        6.91
    """
    n = _check_n(n)
    delta = _check_delta(delta)
    check_sa_normalization(normalization)
    t = _check_nonnegative(t, "t")
    return _clustering_beta_jit(t, *_as(t, n, delta), normalization)


def wendel(n: int, d: int) -> float:
    r"""Probability that n i.i.d. uniform points on S^{d−1} lie in an open hemisphere
    (Wendel 1962; paper Thm 6.7):

        P(∃w: ⟨x_i, w⟩ > 0 ∀i) = 2^{−(n−1)} Σ_{k=0}^{d−1} C(n−1, k),   = 1 when d ≥ n.

    When it happens, Lemma 6.4 gives exponential collapse to one cluster (for SA, USA, and any
    Q, K with V = I). Computed exactly in rational arithmetic, returned as a float.

    Example:
        >>> import attnflow.theory as th
        >>> th.wendel(4, 2), th.wendel(5, 3), th.wendel(3, 8)
        (0.5, 0.6875, 1.0)
    """
    n = _check_n(n, minimum=1)
    # Exact rational arithmetic on 2^(n−1): a million tokens is already far in the asymptotics.
    check_budget("n", n, 2**20, what="tokens (exact rational arithmetic on 2^(n-1))")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
        raise ValueError(f"d: expected an integer dimension >= 2 (the sphere S^(d-1)), got {d!r}")
    d = int(d)
    if d >= n:
        return 1.0
    return float(Fraction(sum(math.comb(n - 1, k) for k in range(d)), 2 ** (n - 1)))


def _weight_exponent(normalization) -> int:
    # Lemma 6.4: a_ij ≥ e^{-2β}/n for SA (numerator ≥ e^{-β}, Z_i ≤ n e^{β}); e^{-β}/n for USA.
    check_sa_normalization(normalization)
    return 2 if normalization == "softmax" else 1


def cone_collapse_rate(
    beta: ArrayLike, n: int, normalization: Literal["softmax", "n"] = "softmax"
) -> Float[Array, "*shape"]:
    r"""The exponential rate λ of Lemma 6.4 / Thm 6.3: ‖x_i(t) − x*‖ ≤ C e^{−λt} when all tokens
    start in an open hemisphere (any Q, K with V = I),

        λ = 1/(4 n e^{2β})  (SA),      λ = 1/(4 n e^{β})  (USA).

    From the attention-weight bounds a_ij ≥ e^{−2β}/n (SA) and e^{−β}/n (USA), (6.7) gives
    α' ≥ κ(1 − α) with κ = 1/(2n e^{2β}) (SA) for α = min_i ⟨x_i, x*⟩ ≥ ½, hence
    1 − α(t) ≤ ½ e^{−κ(t−t₀)} (:func:`cone_collapse_bound`) and, by ‖x_i − x*‖² = 2(1 − ⟨x_i, x*⟩),
    λ = κ/2. [Typo, docs/maths.md §11.2: the printed (6.8) has e^{β}, inconsistent with (6.7) for
    SA; e^{2β} is used here, and e^{β} is the USA rate.] These are worst-case bounds, far slower
    than typical runs.

    Example:
        >>> import math, attnflow.theory as th
        >>> math.isclose(float(th.cone_collapse_rate(1.0, 4)), 1 / (16 * math.e**2))
        True
    """
    n = _check_n(n, minimum=1)
    power = _weight_exponent(normalization)
    beta = _check_nonnegative(beta, "beta")
    return jnp.exp(-power * beta) / (4 * n)


@model_parameters_keyword_only("t", "beta", "n", "t0", "normalization")
def cone_collapse_bound(
    t: ArrayLike,
    *,
    beta: ArrayLike,
    n: int,
    t0: ArrayLike = 0.0,
    normalization: Literal["softmax", "n"] = "softmax",
) -> Float[Array, "*shape"]:
    r"""Lemma 6.4's bound (6.8), corrected: for t ≥ t₀, where t₀ is a time with α(t₀) ≥ ½ and
    α(t) = min_i ⟨x_i(t), x*⟩,

        1 − α(t) ≤ ½ exp(−(t − t₀) / (2 n e^{2β}))   (SA;  e^{β} for USA).

    See :func:`cone_collapse_rate` for the derivation and the typo in the printed (6.8).

    Example:
        >>> import attnflow.theory as th
        >>> float(th.cone_collapse_bound(0.0, beta=3.0, n=8))
        0.5
    """
    n = _check_n(n, minimum=1)
    power = _weight_exponent(normalization)
    beta = _check_nonnegative(beta, "beta")
    t = _float_array(t, "t")
    _float_array(t0, "t0")  # checked; a Python number stays weakly typed
    if not is_traced(t) and not is_traced(t0) and bool(jnp.any(t < t0)):
        # The bound holds for t ≥ t₀ only (issue 44 item 7: one time policy, docs/conventions.md)
        expected("t", f"times t >= t0 = {float(jnp.min(jnp.asarray(t0))):g}", float(jnp.min(t)))
    return 0.5 * jnp.exp(-(t - t0) * jnp.exp(-power * beta) / (2 * n))
