"""Lost in the middle: the closed-form retrieval profile of the causal ALiBi particle system
(Duerinckx, Geshkovski, Rossi 2026, arXiv:2605.09213).

The model (:class:`attnflow.CausalALiBiAttention`) on the circle reads

    θ̇_j = Σ_{k<j} w_jk · (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}),
    w_jk = e^{−λ(j−k)/N} / Σ_{k'<j} e^{−λ(j−k')/N},

from i.i.d. uniform angles. Expanding e^{β cos} = Σ_m I_m(β) e^{imθ} and keeping the terms of
first order in the correlations, the Fourier correlations C_n(j, k; t) = E e^{in(θ_j(t) − θ_k(0))}
solve the linear causal system dC_n(j, k)/dt = a_n Σ_{l<j} w_jl C_n(l, k), C_n(j, k; 0) = δ_jk,
with a_n = n² I_n(β) [D]. With j = N (the last token), k = sN and N → ∞, N·C_n → g_{a_n}(t; s),
and the weighted sum over Fourier modes is the "soft accuracy" of retrieving source position s:

    S_t(s) = Σ_{n=1}^{n_max} ω_n · (λ e^{λs} / (e^λ − 1)) · ψ_{a_n t}(Y_λ(s)),
    ω_n = exp(−π² n² / (2M²)),   Y_λ(s) = log((e^λ − 1) / (e^{λs} − 1))   (log(1/s) at λ = 0),
    ψ_c(y) = Σ_{k≥0} c^{k+1} y^k / (k! (k+1)!) = √(c/y) I_1(2√(cy)).

ω_n are the Fourier coefficients of a wrapped Gaussian of width π/M: S_t(s) = lim N·E K(θ_N(t) −
θ_{sN}(0)) with K(θ) = Σ_{n=1}^{n_max} ω_n cos(nθ). Conventions (M = 8, n_max = 20) follow the
authors' public scripts.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._check import (
    MAX_ARRAY_ELEMENTS,
    check_beta,
    check_budget,
    check_positive_scalar,
    check_real_values,
    is_traced,
)


def _scalar(value, name, *, positive):
    if is_traced(value) or jnp.ndim(value) != 0:
        raise ValueError(f"{name}: expected a Python/NumPy scalar, got {value!r}")
    if positive:
        return float(check_positive_scalar(value, name, what="number"))
    return float(check_beta(value, name=name))


def _check_modes(M, n_max):
    M = _scalar(M, "M", positive=True)
    if isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer)) or n_max < 1:
        raise ValueError(f"n_max: expected an integer number of Fourier modes >= 1, got {n_max!r}")
    check_budget("n_max", n_max, MAX_ARRAY_ELEMENTS, what="Fourier modes")
    return M, int(n_max)


def _check_values(x, name, ok, expected):
    if is_traced(x):
        return
    values = np.asarray(x)
    good = ok(values)
    if not np.all(good):
        raise ValueError(f"{name}: expected {expected}, got {values[~good].ravel()[0]}")


def _float(x, name):
    x = check_real_values(x, name)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


def log_bessel_i(n: int, beta: float, dtype=None) -> Float[Array, " n"]:
    """log I_m(β) for m = 1, …, n, from the power series
    I_m(β) = Σ_k (β/2)^{2k+m} / (k! (k+m)!) summed in the log domain (positive terms: full relative
    accuracy for every m, no overflow for large β). Shape (n,).

    Example:
        >>> import math
        >>> from attnflow.theory._kinetic import log_bessel_i
        >>> round(math.exp(float(log_bessel_i(2, 1.0)[0])), 6)  # I_1(1)
        0.565159
    """
    dtype = dtype or jnp.result_type(float)
    terms = 32 * math.ceil((beta / 2 + 10 * math.sqrt(beta) + 40) / 32)  # few distinct compiles
    return _log_bessel_i(n, terms, jnp.asarray(beta, dtype))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _log_bessel_i(n, terms, beta):
    dtype = beta.dtype
    k = jnp.arange(terms, dtype=dtype)[:, None]
    m = jnp.arange(1, n + 1, dtype=dtype)[None, :]
    log_half = jnp.log(beta / 2)
    logs = (2 * k + m) * log_half - jax.scipy.special.gammaln(k + 1)
    logs = logs - jax.scipy.special.gammaln(k + m + 1)
    return jax.scipy.special.logsumexp(logs, axis=0)


def _log_psi_ratio(z):
    """log F(z) with F(z) = 2 I_1(z)/z = ψ_c(y)/c at z = 2√(cy); F(0) = 1. Uses i1e, so it is
    finite for every z ≥ 0; the series 1 + z²/8 + z⁴/192 below z = 1e-2."""
    small = z < 1e-2
    safe = jnp.where(small, 1.0, z)
    large = jnp.log(2 * jax.scipy.special.i1e(safe) / safe) + safe
    z2 = z * z
    return jnp.where(small, jnp.log1p(z2 / 8 + z2 * z2 / 192), large)


def psi(c: ArrayLike, y: ArrayLike) -> Float[Array, "*shape"]:
    """ψ_c(y) = Σ_{k≥0} c^{k+1} y^k / (k! (k+1)!) = √(c/y) I_1(2√(cy)), elementwise (broadcast).

    The resolvent of the causal ALiBi correlation equation (Duerinckx–Geshkovski–Rossi). Evaluated
    as c·F(2√(cy)) with F(z) = 2I_1(z)/z = 2 i1e(z) e^z / z, so it is accurate for large c·y
    (no Bessel overflow; the value itself overflows only where it exceeds the largest float) and
    smooth at y = 0, where ψ_c(0) = c.

    Args:
        c: c ≥ 0, any shape.
        y: y ≥ 0, any shape broadcastable with ``c``.

    Returns:
        ψ_c(y), the broadcast shape.

    Example:
        >>> import attnflow.theory as th
        >>> round(float(th.psi(2.0, 0.0)), 12), round(float(th.psi(1.0, 1.0)), 6)
        (2.0, 1.590637)
    """
    c, y = jnp.broadcast_arrays(_float(c, "c"), _float(y, "y"))
    z = 2 * jnp.sqrt(jnp.maximum(c * y, 0.0))
    return c * jnp.exp(_log_psi_ratio(z))


def _fourier(beta, M, n_max, dtype):
    """log a_n = log(n² I_n(β)) and ω_n = exp(−π²n²/(2M²)), n = 1..n_max."""
    n = jnp.arange(1, n_max + 1, dtype=dtype)
    log_a = 2 * jnp.log(n) + log_bessel_i(n_max, beta, dtype)
    omega = jnp.exp(-0.5 * (jnp.pi * n / M) ** 2)
    return log_a, omega


def _y_lambda(s, lam):
    if lam == 0:
        return jnp.maximum(-jnp.log(s), 0.0), jnp.ones_like(s)
    # log((e^λ − 1)/(e^{λs} − 1)) and λ e^{λs}/(e^λ − 1), with expm1 for small λ and λs.
    y = jnp.maximum(math.log(math.expm1(lam)) - jnp.log(jnp.expm1(lam * s)), 0.0)
    return y, lam * jnp.exp(lam * s) / math.expm1(lam)


@jax.jit
def _profile_terms(y, pref, t, log_a, omega):
    modes = (1,) * t.ndim + (-1,)
    log_a, omega = log_a.reshape(modes), omega.reshape(modes)
    c = jnp.exp(log_a) * t[..., None]
    z = 2 * jnp.sqrt(c * y[..., None])
    log_terms = jnp.log(omega) + jnp.log(pref)[..., None] + log_a + _log_psi_ratio(z)
    return jnp.sum(t[..., None] * jnp.exp(log_terms), axis=-1)


def lost_in_the_middle_profile(
    s: ArrayLike,
    t: ArrayLike,
    beta: float,
    lam: float,
    *,
    M: float = 8.0,
    n_max: int = 20,
) -> Float[Array, "*shape"]:
    """The soft-accuracy profile S_t(s) of the causal ALiBi model: the U-shaped retrieval curve
    of "lost in the middle" (Duerinckx–Geshkovski–Rossi, closed-form solution of the limiting
    correlation equation):

        S_t(s) = Σ_{n=1}^{n_max} ω_n · (λ e^{λs} / (e^λ − 1)) · ψ_{a_n t}(Y_λ(s)),
        a_n = n² I_n(β),  ω_n = exp(−π² n² / (2M²)),  Y_λ(s) = log((e^λ − 1)/(e^{λs} − 1)),

        (prefactor 1 and Y_0(s) = log(1/s) at λ = 0), ψ as in :func:`psi`.

    It is the N → ∞ limit of the particle system's soft accuracy,
    S_t(s) = lim_{N→∞} N·Σ_n ω_n E cos(n(θ_N(t) − θ_{sN}(0))) (arXiv:2605.09213, the closed-form
    solution of the limiting correlation equation): how much the last token at time (depth) t
    still remembers the token at relative position s, for every fixed t (the paper's next-order
    characterisation of the correlations, abstract of arXiv:2605.09213). At
    finite N the particles sit below it and approach it slowly, the more slowly the larger t.
    Measured with :func:`attnflow.figures.lost_in_the_middle.particle_convergence` at β = λ = 1,
    s = 1/2 (closed form 1.27, 3.18, 5.90 at t = 1, 2, 3; ± one standard error), N = 8, 16, 32,
    64, 128:

    * t = 1: 1.16, 1.11, 1.11, 1.24, 1.16 (± 0.05 to 0.11);
    * t = 2: 1.34, 1.46, 2.04, 2.47, 2.59 (± 0.10 to 0.27): the gap falls about as N^{−0.4};
    * t = 3: 0.84, 1.12, 2.19, 2.55, 3.15 (± 0.10 to 0.52): half the limit at N = 128.

    The finite-N linear response (a matrix exponential, ``linear_response_profile`` in that
    module) converges to it as 1/N. Below :func:`lost_in_the_middle_threshold` the profile
    has a unique interior minimum (primacy and recency). Multi-head profiles are weighted sums of
    single-head ones.

    Args:
        s: source positions in (0, 1], any shape.
        t: times t ≥ 0, any shape broadcastable with ``s``.
        beta: β > 0 (scalar).
        lam: ALiBi slope λ ≥ 0 (scalar; the positional bias is −λ(j − k)/N).
        M: width parameter of the retrieval kernel (ω_n); default 8 as in the authors' code.
        n_max: number of Fourier modes; default 20.

    Returns:
        S_t(s), the broadcast shape of ``s`` and ``t``.

    Example:
        >>> import jax.numpy as jnp, attnflow.theory as th
        >>> S = th.lost_in_the_middle_profile(jnp.linspace(0.05, 1.0, 5), 1.0, 1.0, 1.0)
        >>> bool(S[2] < S[0] and S[2] < S[-1])  # U-shaped at t = 1 < t_crit = 2.4575
        True
        >>> two = th.lost_in_the_middle_profile(0.5, 1.0, 1.0, 1.0) + 0.5 * (
        ...     th.lost_in_the_middle_profile(0.5, 1.0, 2.0, 3.0))  # a two-head profile
    """
    beta = _scalar(beta, "beta", positive=True)
    lam = _scalar(lam, "lam", positive=False)
    M, n_max = _check_modes(M, n_max)
    s, t = jnp.broadcast_arrays(_float(s, "s"), _float(t, "t"))
    dtype = jnp.promote_types(s.dtype, t.dtype)
    s, t = s.astype(dtype), t.astype(dtype)
    _check_values(s, "s", lambda v: (v > 0) & (v <= 1), "source positions in (0, 1]")
    _check_values(t, "t", lambda v: np.isfinite(v) & (v >= 0), "finite times >= 0")
    log_a, omega = _fourier(beta, M, n_max, s.dtype)
    y, pref = _y_lambda(s, lam)
    return _profile_terms(y, pref, t, log_a, omega)


def lost_in_the_middle_threshold(
    beta: float, lam: float, *, M: float = 8.0, n_max: int = 20
) -> float:
    """The time t_crit below which :func:`lost_in_the_middle_profile` has a unique interior
    minimum (Duerinckx–Geshkovski–Rossi):

        t_crit = 2 (1 − e^{−λ}) Σ_n ω_n a_n / Σ_n ω_n a_n²,   a_n = n² I_n(β).

    It is the time at which the slope of S_t at s = 1 changes sign (positive before: recency).
    From ψ_c(y) = c + c²y/2 + O(y²), Y_λ'(1) = −λ/(1 − e^{−λ}) and d/ds(λe^{λs}/(e^λ − 1)) = λ·(·):
    ∂_s S_t(1) ∝ Σ ω_n (λ a_n t − (a_n t)² λ / (2(1 − e^{−λ}))). At λ = 0 it is 0 (the slope is
    negative for every t > 0).

    Args:
        beta: β > 0.
        lam: λ ≥ 0.
        M, n_max: as in :func:`lost_in_the_middle_profile`.

    Returns:
        t_crit as a Python float.

    Example:
        >>> import attnflow.theory as th
        >>> round(th.lost_in_the_middle_threshold(1.0, 1.0), 4), round(
        ...     th.lost_in_the_middle_threshold(2.0, 1.0), 4)
        (2.4575, 0.6007)
    """
    beta = _scalar(beta, "beta", positive=True)
    lam = _scalar(lam, "lam", positive=False)
    M, n_max = _check_modes(M, n_max)
    from scipy.special import ive

    n = np.arange(1, n_max + 1)
    with np.errstate(divide="ignore"):
        log_a = 2 * np.log(n) + np.log(ive(n, beta)) + beta
    omega = np.exp(-0.5 * (np.pi * n / M) ** 2)
    top = log_a.max()
    a = np.exp(log_a - top)  # a_n e^{−top}: the ratio below is scale-free up to one factor
    ratio = np.sum(omega * a) / np.sum(omega * a * a)
    return float(-2 * math.expm1(-lam) * ratio * math.exp(-top))
