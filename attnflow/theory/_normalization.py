"""Closed forms of normalisation as speed regulation: the equiangular (ρ, r) equations of each
normalisation scheme (Karagodin, Ge, Polyanskiy, Rigollet, arXiv:2510.22026; Rigollet,
arXiv:2512.01868 §6.2)."""

import jax.numpy as jnp

from .._check import (
    check_beta,
    check_finite_scalar,
    check_int,
    check_positive_scalar,
    check_real_values,
    expected,
    is_traced,
)

_SCHEMES = ("post-LN", "pre-LN", "peri-LN", "nGPT", "residual", "Mix-LN", "sqrt-scaling")


def _equiangular_attention(rho, beta, n):
    """For n tokens with ⟨θ_i, θ_j⟩ = ρ (i ≠ j) and SA with Q = K = V = I at inverse
    temperature β: (ρ̇ of post-LN, c = ⟨θ_i, A_i⟩, |A_i|), computed with the weights divided by
    e^β (no overflow at large β)."""
    w = jnp.exp(beta * (rho - 1))  # e^{βρ}/e^β: an off-diagonal weight over the diagonal one
    z = 1 + (n - 1) * w
    post = 2 * w * (1 - rho) * (1 + (n - 1) * rho) / z
    c = (1 + (n - 1) * rho * w) / z
    norm2 = 1 + 2 * (n - 1) * rho * w + w**2 * (n - 1) * (1 + (n - 2) * rho)
    return post, c, jnp.sqrt(norm2) / z


def normalized_equiangular_rhs(
    t,
    rho,
    r,
    *,
    scheme: str = "post-LN",
    beta,
    n: int,
    rate=1.0,
    switch_time=2.5,
    offset=1.0,
):
    r"""The right-hand side (ρ̇, ṙ) of a normalisation scheme's flow on equiangular tokens.

    n tokens z_i = r θ_i with ⟨θ_i, θ_j⟩ = ρ for i ≠ j and |z_i| = r stay so under every
    scheme's flow driven by self-attention with Q = K = V = I (the symmetry is kept), and
    eq. (7) of arXiv:2512.01868, θ̇_i = (1/s_i) P^⊥_{θ_i} A_i, reduces to two scalar ODEs:

        ρ̇ = (2/s) · e^{βρ}(1 − ρ)(1 + (n − 1)ρ) / (e^β + (n − 1)e^{βρ}),
        ṙ = the radial speed of the scheme,

    with c = ⟨θ_i, A_i⟩ = (e^β + (n − 1)ρe^{βρ})/Z and ‖A‖ = |A_i| (Z = e^β + (n − 1)e^{βρ}):

    | scheme         | s                 | ṙ               |
    |----------------|-------------------|-----------------|
    | post-LN        | 1                 | 0               |
    | pre-LN         | r                 | c               |
    | peri-LN        | r ‖A‖             | c/‖A‖           |
    | nGPT           | ‖A‖/rate          | 0               |
    | Mix-LN         | 1 (t < t*), r     | 0 (t < t*), c   |
    | sqrt-scaling   | r √(t + offset)   | c/√(t + offset) |
    | residual       | 1 at β r²         | r c at β r²     |

    (Residual-only reads the attention at the stream z = rθ, whose logits are βr²⟨θ_i, θ_j⟩:
    its s_i = r_i against A(z) = r A_{βr²}(θ), i.e. post-LN's flow at inverse temperature βr².)
    As ρ → 1, ρ̇ → 2(1 − ρ)/s: post-LN gives 1 − ρ ~ e^{−2t}; pre-LN, with r ~ t, gives
    1 − ρ ~ 1/t² (arXiv:2512.01868 §6.2); sqrt-scaling, with s ~ 2t, gives 1 − ρ ~ 1/t.

    Args:
        t: time (used by Mix-LN and sqrt-scaling).
        rho: the common inner product ρ ∈ (−1/(n − 1), 1].
        r: the common radius r > 0 (1 for the on-sphere schemes post-LN and nGPT).
        scheme: one of ``"post-LN"``, ``"pre-LN"``, ``"peri-LN"``, ``"nGPT"``,
            ``"residual"``, ``"Mix-LN"``, ``"sqrt-scaling"`` (the names of
            :func:`attnflow.layers`).
        beta: inverse temperature β ≥ 0.
        n: the number of tokens, n ≥ 2.
        rate: nGPT's step rate (:class:`attnflow.NGPT`), > 0.
        switch_time: Mix-LN's t* (:class:`attnflow.MixLN`), ≥ 0.
        offset: sqrt-scaling's layer offset (:class:`attnflow.SqrtScaling`), > 0.

    Returns:
        (ρ̇, ṙ), arrays broadcast over t, ρ and r. Called with concrete values the state is
        checked; traced (inside an ODE solve) it is not (NaN propagates).

    Example:
        >>> import attnflow as af
        >>> drho, dr = af.theory.normalized_equiangular_rhs(0.0, 0.5, 1.0, beta=1.0, n=2)
        >>> round(float(drho), 5), float(dr)  # 2(1 − ρ)(1 + ρ)e^{βρ}/(e^β + e^{βρ})
        (0.56631, 0.0)
        >>> drho, dr = af.theory.normalized_equiangular_rhs(
        ...     0.0, 0.5, 2.0, scheme="pre-LN", beta=1.0, n=2)
        >>> round(float(drho), 5), round(float(dr), 5)  # post-LN's ρ̇ / r, ṙ = c
        (0.28316, 0.81123)
    """
    if scheme not in _SCHEMES:
        expected("scheme", f"one of {', '.join(map(repr, _SCHEMES))}", scheme)
    beta = check_beta(beta)
    n = check_int(n, "n", low=2)
    rate = check_positive_scalar(rate, "rate", what="step rate")
    switch_time = check_finite_scalar(switch_time, "switch_time")
    offset = check_positive_scalar(offset, "offset", what="layer offset")
    if not any(map(is_traced, (t, rho, r))):
        t = check_real_values(t, "t")
        rho = check_real_values(rho, "rho", low=-1.0 / (n - 1), high=1.0)
        r = check_real_values(r, "r")
        if not bool(jnp.all(r > 0)):
            expected("r", "radii r > 0", r)
        if scheme == "sqrt-scaling" and not is_traced(offset):
            # The layer index t + offset of 1/√(t + offset) must be > 0 (issue 44 item 3).
            low = float(jnp.min(jnp.asarray(t)))
            if not low + float(offset) > 0:
                expected("t", f"times with t + offset > 0 (offset = {float(offset):g})", low)
    t, rho, r = jnp.asarray(t), jnp.asarray(rho), jnp.asarray(r)
    if scheme == "residual":
        post, c, _ = _equiangular_attention(rho, beta * r**2, n)
        return post, r * c
    post, c, norm = _equiangular_attention(rho, beta, n)
    zero = jnp.zeros_like(post)
    if scheme == "post-LN":
        return post, zero
    if scheme == "pre-LN":
        return post / r, c
    if scheme == "peri-LN":
        return post / (r * norm), c / norm
    if scheme == "nGPT":
        return rate * post / norm, zero
    if scheme == "Mix-LN":
        before = t < switch_time
        return jnp.where(before, post, post / r), jnp.where(before, zero, c)
    scale = 1 / jnp.sqrt(t + offset)  # sqrt-scaling
    return scale * post / r, scale * c


__all__ = ["normalized_equiangular_rhs"]
