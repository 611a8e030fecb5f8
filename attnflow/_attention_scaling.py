"""Long-context attention scaling β = γ log n (Chen–Lin–Polyanskiy–Rigollet, arXiv:2510.05554;
§6.3 of Rigollet, arXiv:2512.01868): the one place where β is built from γ and the context
length n, shared by :meth:`attnflow.SelfAttention.long_context`, ``phase_diagram`` sweeps over γ
and the closed forms of ``attnflow.theory``."""

import math

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._check import check_int, check_real_values, expected


def long_context_beta(gamma: ArrayLike, n: int) -> float | Float[Array, "*shape"]:
    r"""β = γ log n: the attention scaling of YaRN and Qwen that arXiv:2510.05554 (Thm 7 of the
    survey arXiv:2512.01868) shows to be critical for long contexts.

    With β = γ log n the logits of tokens at inner product ρ weigh n^{γρ}: for equiangular tokens
    the off-diagonal attention weight is n^{−γ(1−ρ)}/(1 + (n−1)n^{−γ(1−ρ)}), of order 1/n (all
    tokens mixed) when γ < 1/(1−ρ) and n^{−γ(1−ρ)} ≪ 1/n (attention is the identity) when
    γ > 1/(1−ρ) (:func:`attnflow.theory.equiangular_attention_weights`).

    Use it wherever β goes: ``SelfAttention.long_context(γ, n)`` (the field),
    ``phase_diagram(key, n=n, betas=long_context_beta(gammas, n), ...)`` (a phase diagram over γ)
    and the closed forms of ``attnflow.theory`` (``equiangular_inner_product(t, ρ₀,
    beta=long_context_beta(γ, n), n=n)``, :func:`attnflow.theory.pre_ln_equiangular_map`).

    Args:
        gamma: γ ≥ 0, a number or an array (broadcast).
        n: the context length (number of tokens), an integer ≥ 1.

    Returns:
        γ log n: a Python float for a number γ (so that a field keeps β as a hyperparameter),
        else an array of γ's shape.

    Example:
        >>> import math, attnflow as af
        >>> af.theory.long_context_beta(2.0, 1024) == 2.0 * math.log(1024)
        True
        >>> b = af.theory.long_context_beta([0.5, 1.0], 16)
        >>> b.tolist() == [0.5 * math.log(16), math.log(16)]
        True
    """
    n = check_int(n, "n", low=1)
    scalar = isinstance(gamma, int | float | np.integer | np.floating) and not isinstance(
        gamma, bool
    )
    gamma = check_real_values(gamma, "gamma", low=0.0)
    if scalar:
        beta = float(gamma) * math.log(n)
        if not math.isfinite(beta):  # γ log n past float64 (issue 44 item 5: was inf)
            expected(
                "gamma",
                f"γ with β = γ log n finite (log n = {math.log(n):.6g}: γ <= "
                f"{np.finfo(np.float64).max / math.log(n):.3g})",
                float(gamma),
            )
        return beta
    gamma = jnp.asarray(gamma)
    if not jnp.issubdtype(gamma.dtype, jnp.floating):
        gamma = gamma.astype(jnp.result_type(float))
    return gamma * jnp.asarray(math.log(n), gamma.dtype)
