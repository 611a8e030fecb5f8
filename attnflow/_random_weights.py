"""Random deep multi-head attention: Gaussian weights resampled independently per layer and head.

A random model of deep multi-head self-attention in which the weights are resampled
independently across layers and heads, as at the initialisation of training. The scalings below
are the two that give a non-trivial depth limit; they are derived and stated in full here.
"""

import math
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import PRNGKeyArray

from ._check import (
    check_beta,
    check_finite_array,
    check_finite_scalar,
    check_int,
    check_key,
    check_positive_scalar,
    check_size,
)
from ._fields._piecewise import PiecewiseConstant
from ._fields._self_attention import MultiHeadAttention


def random_multihead_attention(
    key: PRNGKeyArray,
    d: int,
    *,
    num_layers: int,
    num_heads: int,
    t1=1.0,
    beta=1.0,
    k: int | None = None,
    scaling: Literal["diffusive", "ode"] = "diffusive",
    value_mean=0.0,
    fixed: dict | None = None,
    dtype=None,
) -> PiecewiseConstant:
    r"""Random deep multi-head attention: a :class:`PiecewiseConstant` stack of
    :class:`MultiHeadAttention` layers (stacked heads, ``MultiHeadAttention(beta=β, Q=Q, K=K,
    V=V, scale=c)``) with Gaussian weights drawn independently per layer and per head. Run it
    as the discrete Transformer with step τ = t1/L::

        xs = attnflow.layers(field, x0, num_layers, t1 / num_layers)

    i.e. x_{l+1} = normalize(x_l + τ c P_x Σ_h A_{l,h}(x_l) V_{l,h} x_l) with, for every layer l and
    head h independently (G's have i.i.d. N(0, 1) entries, k defaults to d):

    * Q_{l,h}, K_{l,h} = G / k^{1/4} (k × d): the logits ⟨Q x, K y⟩ of unit vectors have mean 0
      and variance 1 (the d^{-1/2} of practice, footnote 2, is absorbed), so β is the logit scale;
    * V_{l,h} = μ_l I + G / √d: the random part maps a unit vector to N(0, I/d), |V x| ≈ 1.

    The two scalings of depth L, step τ and heads H (derived here), with T = t1 the depth-time:

    * ``"diffusive"`` (default): c = 1/√(Hτ), μ_l = μ √(τ/H). The per-layer increment is
      τ·field = μ τ (1/H) Σ_h A_h x + √τ (1/√H) Σ_h A_h G_h x/√d: a drift O(τ) and a zero-mean
      fluctuation with E|Δx_i|² = τ (d−1)/d · E|Σ_j ā_ij x_j|² (ā: one head's attention), the same
      for every H. As L → ∞ this has a **stochastic** limit with **common noise** (the same weights
      move every token): for a single token it is Brownian motion on S^{d-1} with generator
      Δ/(2d), so E⟨x(T), x(0)⟩ = e^{−(d−1)T/(2d)}; the centred Gaussian weights contribute no
      drift (μ = 0), only noise.
    * ``"ode"``: c = 1/H, μ_l = μ. The fluctuations have variance O(τ²/H) per layer and vanish
      in the limit: the **deterministic** limit ẋ_i = μ P^⊥_{x_i} Σ_j E[a_ij] x_j, which is
      trivial (x(t) = x(0)) for centred Gaussian weights (μ = 0).

    Args:
        key: PRNG key; the weights are a deterministic function of it.
        d: token dimension.
        num_layers: L, the number of pieces (layers) on [0, t1].
        num_heads: H.
        t1: depth-time T; the layers switch at τ, 2τ, …, (L−1)τ with τ = t1/L.
        beta: logit scale β (finite, either sign).
        k: rows of Q and K (head dimension); default d.
        scaling: ``"diffusive"`` or ``"ode"`` (above).
        value_mean: μ, the mean of V along the identity.
        fixed: matrices held fixed in every layer and head instead of drawn, e.g.
            ``{"Q": I, "K": I}`` (deterministic attention, random values: the model of
            :func:`attnflow.solve_homogenized`). Keys among ``"Q"``, ``"K"`` (k × d) and ``"V"``
            (d × d, used as given: ``value_mean`` and the scaling of V do not apply to it; the
            scale c does). The other matrices are drawn as above, from the same key split.
        dtype: float dtype of the weights (default: JAX's default float).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> f = af.random_multihead_attention(jr.key(0), 3, num_layers=8, num_heads=4)
        >>> f.field.Q.shape, f.num_pieces
        ((8, 4, 3, 3), 8)
        >>> af.layers(f, af.random_tokens(jr.key(1), 5, 3), 8, 1.0 / 8).shape
        (9, 5, 3)
        >>> import jax.numpy as jnp
        >>> g = af.random_multihead_attention(
        ...     jr.key(0), 3, num_layers=8, num_heads=4, fixed={"Q": jnp.eye(3), "K": jnp.eye(3)})
        >>> bool((g.field.Q[0, 0] == jnp.eye(3)).all())
        True
    """
    key = check_key(key)
    L = check_size(num_layers, "num_layers", low=1)
    H = check_size(num_heads, "num_heads", low=1)
    d = check_size(d, "d", low=2)
    k = None if k is None else check_int(k, "k", low=1)
    fixed, k = _check_fixed(fixed, d, k)
    if scaling not in ("diffusive", "ode"):
        raise ValueError(f"scaling: expected 'diffusive' or 'ode', got {scaling!r}")
    t1 = float(check_positive_scalar(t1, "t1", what="depth-time"))
    check_beta(beta, signed=True)
    value_mean = check_finite_scalar(value_mean, "value_mean")
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    tau = t1 / L
    if scaling == "diffusive":
        scale, mean = 1.0 / math.sqrt(H * tau), value_mean * math.sqrt(tau / H)
    else:
        scale, mean = 1.0 / H, value_mean
    kq, kk, kv = jr.split(key, 3)

    def draw(name, subkey, shape, random):
        if name in fixed:
            return jnp.broadcast_to(fixed[name].astype(dtype), shape)
        return random(jr.normal(subkey, shape, dtype))

    Q = draw("Q", kq, (L, H, k, d), lambda g: g / k**0.25)
    K = draw("K", kk, (L, H, k, d), lambda g: g / k**0.25)
    V = draw(
        "V",
        kv,
        (L, H, d, d),
        lambda g: mean * jnp.eye(d, dtype=dtype)[None, None] + g / math.sqrt(d),
    )
    stacked = eqx.filter_vmap(
        lambda q, kmat, v: MultiHeadAttention(beta=beta, Q=q, K=kmat, V=v, scale=scale)
    )(Q, K, V)
    # Switch times in the default float dtype, the dtype of the times t = k·τ that `layers`
    # computes: float32 times would round past a float64 k·τ and repeat a layer.
    return PiecewiseConstant(stacked, tau * jnp.arange(1, L, dtype=jnp.result_type(float)))


def _check_fixed(fixed, d: int, k) -> tuple[dict, int]:
    """The matrices held fixed (checked against d and the head dimension k) and k."""
    fixed = {} if fixed is None else dict(fixed)
    if not set(fixed) <= {"Q", "K", "V"}:
        raise ValueError(f"fixed: expected keys among 'Q', 'K', 'V', got {sorted(map(str, fixed))}")
    fixed = {
        name: jnp.asarray(check_finite_array(m, f"fixed[{name!r}]")) for name, m in fixed.items()
    }
    if "V" in fixed and fixed["V"].shape != (d, d):
        raise ValueError(f"fixed['V']: expected shape {(d, d)}, got {fixed['V'].shape}")
    for name in ("Q", "K"):
        if name not in fixed:
            continue
        m = fixed[name]
        if m.ndim != 2 or m.shape[1] != d:
            raise ValueError(f"fixed[{name!r}]: expected shape (k, {d}), got {m.shape}")
        if k is None:
            k = m.shape[0]
        elif m.shape[0] != int(k):
            raise ValueError(
                f"fixed[{name!r}]: expected {int(k)} rows (the head dimension k), got "
                f"shape {m.shape}"
            )
    k = d if k is None else int(k)
    if k < 1:
        raise ValueError(f"k: expected a positive head dimension, got {k}")
    return fixed, k
