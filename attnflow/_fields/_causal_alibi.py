"""The kinetic causal ALiBi model of the lost-in-the-middle paper (Duerinckx, Geshkovski, Rossi
2026, arXiv:2605.09213)."""

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import check_beta, hyperparameter, is_traced
from ._base import AbstractAttention, AttentionScores


class CausalALiBiAttention(AbstractAttention):
    r"""Strictly causal attention with ALiBi positional weights normalised over the past:

        ẋ_j = P^⊥_{x_j} Σ_{k<j} w_jk β e^{β⟨x_j, x_k⟩} x_k,
        w_jk = e^{−λ(j−k)/N} / Σ_{k'<j} e^{−λ(j−k')/N},   N = n,

    which on the circle (x = (cos θ, sin θ)) reads
    θ̇_j = Σ_{k<j} w_jk (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}). In words: a token does not
    attend to itself (token 1 does not move); the positional weights are normalised over the
    strict past only; the content factor e^{β⟨x_j, x_k⟩} is not normalised; the ALiBi slope is
    λ/N. This follows the authors' public code, which is the reference for the conventions.

    It is not ``PositionalAttention(β, alibi_bias(n, m))``: that is softmax attention over the
    past *including* the token itself, with the bias inside the softmax.

    In kernel terms: scores β⟨x_j, x_k⟩ + b_jk with b_jk = −λ(j−k)/N − log Σ_{k'<j}
    μ_{k'} e^{−λ(j−k')/N}, the "strict" mask, the "sum" normalisation and values β x_k. For a
    weighted measure μ (``args`` = weights) the positional weights become
    w_jk = μ_k e^{−λ(j−k)/N} / Σ_{k'<j} μ_{k'} e^{−λ(j−k')/N}; uniform μ gives the model above.
    The content factor overflows float32 past β ≈ 88 (use float64).

    Args:
        beta: inverse temperature β ≥ 0.
        lam: the ALiBi slope λ ≥ 0 (the per-position slope is λ/N).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> theta = jnp.array([0.0, 1.0, 2.0])
        >>> x = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)
        >>> v = af.CausalALiBiAttention(1.0, 1.0)(0.0, x)
        >>> bool(jnp.allclose(v[0], 0.0))  # the first token has no past
        True
    """

    beta: float | Float[Array, ""]
    lam: float | Float[Array, ""]

    def __init__(self, beta, lam):
        # Numbers are hyperparameters (fixed under training), arrays parameters: the
        # convention of every attention field (docs/conventions.md, "Which parameters are trained").
        self.beta = hyperparameter(check_beta(beta))
        if jnp.ndim(lam) != 0:
            raise ValueError(f"lam: expected a scalar ALiBi slope, got shape {jnp.shape(lam)}")
        check_beta(lam, name="lam")  # a real scalar (not a string or complex)
        if not is_traced(lam) and not (np.isfinite(float(lam)) and float(lam) >= 0):
            raise ValueError(f"lam: expected a finite slope λ >= 0, got {float(lam)}")
        self.lam = hyperparameter(lam)

    def positional_bias(
        self, n: int, weights: Float[Array, " n"] | None = None, dtype=None
    ) -> Float[Array, "n n"]:
        """b_jk = log w_jk − log μ_k: the log positional weights (zero on and above the diagonal,
        where the strict mask applies)."""
        dtype = jnp.result_type(float) if dtype is None else dtype
        j = jnp.arange(n)[:, None]
        k = jnp.arange(n)[None, :]
        past = k < j
        decay = -jnp.asarray(self.lam, dtype) * (j - k).astype(dtype) / n
        log_mu = jnp.full((n,), -jnp.log(n), dtype) if weights is None else jnp.log(weights)
        log_norm = jax.nn.logsumexp(jnp.where(past, decay + log_mu[None, :], -jnp.inf), axis=1)
        log_norm = jnp.where(jnp.isfinite(log_norm), log_norm, 0.0)
        return jnp.where(past, decay - log_norm[:, None], 0.0)

    def scores(self, x, weights):
        beta = jnp.asarray(self.beta, x.dtype)
        return AttentionScores(
            queries=beta * x,
            keys=x,
            values=beta * x,
            weights=weights,
            bias=self.positional_bias(x.shape[0], weights, x.dtype),
            mask="strict",
            normalization="sum",
        )


__all__ = ["CausalALiBiAttention"]
