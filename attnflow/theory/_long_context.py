r"""Long-context attention on equiangular tokens (§6.3 and Thm 7 of Rigollet, arXiv:2512.01868;
Chen–Lin–Polyanskiy–Rigollet, *Critical attention scaling in long-context transformers*,
arXiv:2510.05554), exact at finite n.

Tokens x_1, …, x_n on the sphere with ⟨x_i, x_j⟩ = ρ (i ≠ j) and β = γ log n
(:func:`attnflow.theory.long_context_beta`). With w = e^{−β(1−ρ)} = n^{−γ(1−ρ)} the softmax
attention matrix (Q = K = V = I) has A_ii = 1/(1 + (n−1)w), A_ij = w/(1 + (n−1)w). A pre-LN layer
adds h·Σ_j A_ij x_j to its normalised input; with S = Σ_k x_k,

    y_i = c x_i + e S,   c = 1 + h(A_ii − A_ij),   e = h A_ij,

and, with s = 1 + (n−1)ρ (so ⟨x_i, S⟩ = s, |S|² = ns),

    ⟨y_i, y_j⟩ = c²ρ + 2ces + e²ns,   |y_i|² = c² + 2ces + e²ns,

an equiangular configuration again, at ρ' = ⟨y_i, y_j⟩/|y_i|². The model of arXiv:2510.05554 and
of Thm 7 omits the residual (its Fig.: "tokens first normalized by a pre-layer normalization and
then passed through a single self-attention layer, with residual connections and MLP layers
omitted"): the attention output alone, the limit h → ∞, where c = 1 − w and e = w up to a common
factor. Every term is evaluated in log form, so that the formula holds for any n a float can
hold (n = 10^300 included): the limits n → ∞ are tested by evaluating it there.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._check import (
    check_positive_scalar,
    check_real_values,
    check_size,
    expected,
    is_traced,
    model_parameters_keyword_only,
)
from ._clustering import _check_n, _check_nonnegative, _float_array


def _check_rho(rho, n, name: str = "rho"):
    low = -1.0 / (n - 1)
    rho = _float_array(rho, name, low=max(low, -1.0), high=1.0)
    if not is_traced(rho) and bool(jnp.any(jnp.asarray(rho) <= low)):
        expected(
            name,
            f"an inner product in (-1/(n-1), 1] = ({low:.3g}, 1] (equiangular unit vectors)",
            float(jnp.asarray(rho)[jnp.asarray(rho) <= low].ravel()[0]),
        )
    return rho


def _check_step(step):
    if step is None:
        return None
    return float(check_positive_scalar(step, "step", what="residual step"))


class EquiangularAttentionWeights(eqx.Module):
    r"""The softmax attention matrix of equiangular tokens (:func:`equiangular_attention_weights`):
    ``diagonal`` A_ii and ``off_diagonal`` A_ij (i ≠ j), A_ii + (n−1)A_ij = 1."""

    diagonal: Float[Array, "*shape"]
    off_diagonal: Float[Array, "*shape"]


def _log_weights(rho, beta, log_n1):
    """log A_ii, log A_ij for log_n1 = log(n − 1), stable for any n."""
    log_w = -beta * (1.0 - rho)
    log_diag = -jnp.logaddexp(0.0, log_n1 + log_w)
    return log_diag, log_diag + log_w


@model_parameters_keyword_only("rho", "n", "beta")
def equiangular_attention_weights(
    rho: ArrayLike, *, beta: ArrayLike, n: int
) -> EquiangularAttentionWeights:
    r"""The attention weights of n equiangular tokens (⟨x_i, x_j⟩ = ρ, i ≠ j), softmax, Q = K = I:

        A_ii = 1/(1 + (n−1)w),   A_ij = w/(1 + (n−1)w),   w = e^{−β(1−ρ)}.

    With β = γ log n (:func:`long_context_beta`) w = n^{−γ(1−ρ)}, and the three regimes of Thm 7
    (arXiv:2512.01868; arXiv:2510.05554) read off: with κ = γ(1−ρ),

    - κ < 1: n A_ij → 1 and A_ii ~ n^{κ−1} → 0 (attention averages all tokens);
    - κ = 1: n A_ij → ½ and A_ii → ½;
    - κ > 1: n^κ A_ij → 1 and A_ii → 1 (attention is the identity).

    Computed in log form (any n up to the largest float; ``n`` a Python integer).

    Args:
        rho: inner product in (−1/(n−1), 1]; broadcast against ``beta``.
        beta: β ≥ 0 (keyword-only).
        n: number of tokens (≥ 2; keyword-only).

    Example:
        >>> import attnflow.theory as th
        >>> n = 10**12
        >>> a = th.equiangular_attention_weights(0.5, beta=th.long_context_beta(2.0, n), n=n)
        >>> round(float(a.diagonal), 6), round(float(a.off_diagonal) * 10**12, 6)  # κ = 1
        (0.5, 0.5)
    """
    n = _check_n(n)
    rho = _check_rho(rho, n)
    beta = _check_nonnegative(beta, "beta")
    dtype = jnp.result_type(rho, beta, float)
    rho, beta = jnp.broadcast_arrays(rho.astype(dtype), beta.astype(dtype))
    log_diag, log_off = _log_weights(rho, beta, math.log(n - 1))
    return EquiangularAttentionWeights(diagonal=jnp.exp(log_diag), off_diagonal=jnp.exp(log_off))


def _log_s(rho, n, log_n1):
    """log(1 + (n−1)ρ), for any n."""
    positive = jnp.log(jnp.where(rho > 0, rho, 1.0))
    return jnp.where(
        rho > 0,
        jnp.logaddexp(0.0, log_n1 + positive),
        jnp.log1p(jnp.where(rho > 0, 0.0, (n - 1) * rho)),
    )


def _layer(rho, beta, n, log_n, log_n1, scale):
    """One layer: (ρ', log|y|²) with y_i = x_i + scale·Σ_j A_ij x_j (scale = h/r), or the
    attention output alone for ``scale is None``."""
    log_diag, log_off = _log_weights(rho, beta, log_n1)
    log_s = _log_s(rho, n, log_n1)
    if scale is None:
        # c = A_ii − A_ij, e = A_ij; divided by A_ii: c = 1 − w, e = w.
        log_w = log_off - log_diag
        log_c = jnp.log(-jnp.expm1(log_w))
        log_e = log_w
    else:
        log_c = jnp.log1p(scale * (jnp.exp(log_diag) - jnp.exp(log_off)))
        log_e = jnp.log(scale) + log_off
    terms = jnp.stack([2 * log_c, math.log(2.0) + log_c + log_e + log_s, 2 * log_e + log_n + log_s])
    top = jnp.max(terms, axis=0)
    parts = jnp.exp(terms - top)
    numerator = rho * parts[0] + parts[1] + parts[2]
    denominator = parts[0] + parts[1] + parts[2]
    return numerator / denominator, top + jnp.log(denominator)


@model_parameters_keyword_only("rho", "n", "beta")
def pre_ln_equiangular_map(
    rho: ArrayLike, *, beta: ArrayLike, n: int, step: float | None = None
) -> Float[Array, "*shape"]:
    r"""ρ' = ⟨θ_i, θ_j⟩ after one pre-LN attention layer on equiangular tokens (⟨x_i, x_j⟩ = ρ),
    exact at finite n (§6.3 of arXiv:2512.01868; arXiv:2510.05554).

    θ_i = y_i/|y_i| with y_i = Σ_j A_ij x_j (``step=None``: the attention output alone, the model
    of Thm 7, residual omitted) or y_i = x_i + h Σ_j A_ij x_j (``step=h``: attnflow's
    :class:`attnflow.PreLN` layer z ← z + h·g(z/|z|) from unit-norm z). Writing y_i = c x_i + e S
    (S = Σ_k x_k, s = 1 + (n−1)ρ, A from :func:`equiangular_attention_weights`),

        ρ' = (c²ρ + 2ces + e²ns) / (c² + 2ces + e²ns),
        c = A_ii − A_ij, e = A_ij (no residual);  c = 1 + h(A_ii − A_ij), e = h A_ij (step h).

    With β = γ log n (:func:`long_context_beta`) and n → ∞ this tends to the limits of
    :func:`long_context_limit` (1, 4ρ/(1+3ρ) or ρ without the residual); the convergence is slow
    near the threshold (the error is of order n^{1−γ(1−ρ)} above it), so at small n use this
    finite-n form. Evaluated in log form: valid for any n up to the largest float.

    Args:
        rho: inner product in (−1/(n−1), 1]; broadcast against ``beta``.
        beta: β ≥ 0 (keyword-only).
        n: number of tokens (≥ 2; keyword-only), a Python integer (huge values allowed).
        step: the residual step h > 0 (the layer's input has unit norm), or None for the
            attention output alone.

    Example:
        >>> import attnflow.theory as th
        >>> n = 10**200
        >>> [round(float(th.pre_ln_equiangular_map(0.5, beta=th.long_context_beta(g, n), n=n)), 6)
        ...  for g in (1.0, 2.0, 3.0)]  # below, at, above γ = 1/(1−ρ) = 2: 1, 4ρ/(1+3ρ), ρ
        [1.0, 0.8, 0.5]
    """
    n = _check_n(n)
    rho = _check_rho(rho, n)
    beta = _check_nonnegative(beta, "beta")
    step = _check_step(step)
    dtype = jnp.result_type(rho, beta, float)
    rho, beta = jnp.broadcast_arrays(rho.astype(dtype), beta.astype(dtype))
    value, _ = _layer_jit(rho, beta, float(n), math.log(n), math.log(n - 1), step)
    return value


_layer_jit = jax.jit(_layer, static_argnums=5)


class PreLNEquiangularLayers(eqx.Module):
    r"""Repeated pre-LN layers on equiangular tokens (:func:`pre_ln_equiangular_layers`):
    ``inner_products`` ρ_k and stream ``radii`` r_k = |z_k| (all tokens alike), k = 0 … L."""

    inner_products: Float[Array, " layers"]
    radii: Float[Array, " layers"]


def _residual_layers(rho0, beta, n, log_n, log_n1, step, num):
    def one(carry, _):
        rho, r = carry
        rho1, log_norm2 = _layer(rho, beta, n, log_n, log_n1, step / r)
        out = (rho1, r * jnp.exp(0.5 * log_norm2))
        return out, out

    _, (rhos, radii) = jax.lax.scan(one, (rho0, jnp.ones_like(rho0)), length=num)
    return rhos, radii


def _plain_layers(rho0, beta, n, log_n, log_n1, num):
    def one(rho, _):
        rho1 = _layer(rho, beta, n, log_n, log_n1, None)[0]
        return rho1, rho1

    return jax.lax.scan(one, rho0, length=num)[1]


_plain_layers_jit = jax.jit(_plain_layers, static_argnums=5)
_residual_layers_jit = jax.jit(_residual_layers, static_argnums=6)


@model_parameters_keyword_only("rho0", "n", "beta", "num_layers")
def pre_ln_equiangular_layers(
    rho0: float,
    num_layers: int,
    *,
    beta: float,
    n: int,
    step: float | None = None,
) -> PreLNEquiangularLayers:
    r"""L pre-LN attention layers on equiangular tokens, exact at finite n: the iterate of
    :func:`pre_ln_equiangular_map` (symmetry keeps the tokens equiangular, with one common radius).

    ``step=None`` (the model of Thm 7, residual omitted): θ ← N(Σ_j A_ij θ_j), ρ_{k+1} = Φ(ρ_k);
    radii stay 1. ``step=h``: attnflow's :class:`attnflow.PreLN` stream z ← z + h Σ_j A_ij x_j,
    x = z/|z|, from unit z_0: a layer at radius r is the unit-radius layer with step h/r, and
    r_{k+1} = |r_k x + h A x|, so the residual stream grows (r_k ≈ 1 + kh once clustered) and
    slows the directions down.

    What repeated layers do at β = γ log n: every layer increases ρ (attention averages), so at
    finite n the tokens always collapse, ρ_k → 1. As n → ∞ the no-residual map tends to
    Φ_∞(ρ) = ρ for ρ < ρ_c = 1 − 1/γ (supercritical: a fixed point, the geometry is kept),
    4ρ_c/(1+3ρ_c) > ρ_c at ρ_c, and 1 above: configurations at or above ρ_c collapse within two
    layers, those below are frozen, and at finite n they creep up at a speed ~n^{1−γ(1−ρ)} per
    layer until they cross ρ_c.

    Args:
        rho0: initial inner product in (−1/(n−1), 1] (a scalar).
        num_layers: L ≥ 0.
        beta: β ≥ 0 (a scalar; keyword-only), e.g. :func:`long_context_beta` (γ, n).
        n: number of tokens (≥ 2; keyword-only).
        step: residual step h > 0, or None for the attention output alone.

    Returns:
        :class:`PreLNEquiangularLayers` with arrays of shape (L + 1,), layer 0 first.

    Example:
        >>> import attnflow.theory as th
        >>> n = 10**100
        >>> out = th.pre_ln_equiangular_layers(0.3, 3, beta=th.long_context_beta(2.0, n), n=n)
        >>> [round(float(r), 6) for r in out.inner_products]  # ρ₀ < 1 − 1/γ = 0.5: frozen
        [0.3, 0.3, 0.3, 0.3]
    """
    n = _check_n(n)
    rho0 = _check_rho(rho0, n, "rho0")
    beta = _check_nonnegative(beta, "beta")
    for name, value in (("rho0", rho0), ("beta", beta)):
        if jnp.ndim(value) != 0:
            expected(name, "a scalar", f"= an array of shape {jnp.shape(value)}")
    # Two (L + 1,) arrays are returned: an absurd L is refused before anything is traced.
    num_layers = check_size(num_layers, "num_layers", low=0, per_unit=2)
    step = _check_step(step)
    dtype = jnp.result_type(rho0, beta, float)
    rho0, beta = jnp.asarray(rho0, dtype), jnp.asarray(beta, dtype)
    logs = (float(n), math.log(n), math.log(n - 1))
    if step is None:
        rhos = _plain_layers_jit(rho0, beta, *logs, num_layers)
        radii = jnp.ones((num_layers + 1,), dtype)
    else:
        rhos, radii = _residual_layers_jit(rho0, beta, *logs, jnp.asarray(step, dtype), num_layers)
        radii = jnp.concatenate([jnp.ones((1,), dtype), radii])
    return PreLNEquiangularLayers(inner_products=jnp.concatenate([rho0[None], rhos]), radii=radii)


@model_parameters_keyword_only("rho", "gamma")
def long_context_limit(
    rho: ArrayLike, *, gamma: ArrayLike, step: float | None = None
) -> Float[Array, "*shape"]:
    r"""The n → ∞ limit of :func:`pre_ln_equiangular_map` at β = γ log n (Thm 7 of
    arXiv:2512.01868; arXiv:2510.05554), for 0 < ρ < 1 and κ = γ(1 − ρ):

    - κ < 1: 1 (attention output alone); ρ(1+h)² / (1 + 2hρ + h²ρ) (residual step h);
    - κ = 1: 4ρ/(1 + 3ρ); ρ(1+h)² / ((1+h/2)² + hρ(1+h/2) + h²ρ/4);
    - κ > 1: ρ; ρ.

    (A_ii → 0, ½, 1 and n·A_ij → 1, ½, 0; the residual columns tend to the others as h → ∞.)
    The threshold γ = 1/(1 − ρ) is matched to a relative 1e-12 (κ within 1e-12 of 1).

    Args:
        rho: inner product in (0, 1); broadcast against ``gamma``.
        gamma: γ ≥ 0 (keyword-only).
        step: residual step h > 0, or None for the attention output alone.

    Example:
        >>> import attnflow.theory as th
        >>> [float(th.long_context_limit(0.5, gamma=g)) for g in (1.0, 2.0, 3.0)]
        [1.0, 0.8, 0.5]
    """
    rho = _float_array(rho, "rho", low=0.0, high=1.0)
    if not is_traced(rho) and bool(jnp.any((jnp.asarray(rho) <= 0) | (jnp.asarray(rho) >= 1))):
        expected("rho", "an inner product in the open interval (0, 1)", rho)
    gamma = check_real_values(gamma, "gamma", low=0.0)
    step = _check_step(step)
    dtype = jnp.result_type(rho, gamma, float)
    rho, gamma = jnp.broadcast_arrays(rho.astype(dtype), jnp.asarray(gamma).astype(dtype))
    kappa = gamma * (1 - rho)
    if step is None:
        below, at = jnp.ones_like(rho), 4 * rho / (1 + 3 * rho)
    else:
        h = step
        below = rho * (1 + h) ** 2 / (1 + 2 * h * rho + h * h * rho)
        at = rho * (1 + h) ** 2 / ((1 + h / 2) ** 2 + h * rho * (1 + h / 2) + h * h * rho / 4)
    critical = jnp.abs(kappa - 1) <= 1e-12
    return jnp.where(critical, at, jnp.where(kappa < 1, below, rho))
