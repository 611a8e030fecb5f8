"""Random query/key/value ensembles of the paper's Fig. 5 (docs/maths.md §9).

Only the bilinear form B = QᵀK enters the dynamics (⟨Q x, K y⟩ = xᵀ B y), so an ensemble draws
the pair (B, V). Conventions are column vectors throughout: the field is
ẋ_i = P^⊥_{x_i}(Σ_j a_ij V x_j) with a_ij ∝ exp(β x_iᵀ B x_j). G, G₁, G₂, G₃ denote independent
d × d matrices with i.i.d. N(0, 1) entries.

The authors' code (``phase-diagrams.py``) multiplies row vectors by V from the right, so its
effective value matrix is Vᵀ; this matters only for V = QᵀK with a non-symmetric B (panel (c)),
and the ``"kq"`` value option reproduces it. The code has no Ginibre V: panel (a) is new here.
"""

from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ._check import (
    MAX_ARRAY_ELEMENTS,
    check_budget,
    check_dtype_option,
    check_key,
    check_size,
)

_BILINEAR = ("identity", "ginibre", "goe", "gpt2")
_VALUE = ("identity", "ginibre", "wishart", "qk", "kq", "gpt2")

GPT2_STD = 0.02
"""Standard deviation of GPT-2's initial weights (Radford et al. 2019: N(0, 0.02²) entries)."""


class AttentionEnsemble(eqx.Module):
    r"""A distribution of (B = QᵀK, V) for random-matrix phase diagrams (paper Fig. 5).

    Bilinear form B (``bilinear``):

    - ``"identity"``: B = I (Q = K = I).
    - ``"ginibre"``: B = G₁G₂/√d, i.e. Q = d^{-1/4} G₁ᵀ and K = d^{-1/4} G₂ real Ginibre; the
      entries of B have variance 1 (the code's ``randomKQ=1``).
    - ``"goe"``: B = (G + Gᵀ)/√2, Wigner/GOE: off-diagonal variance 1, diagonal variance 2
      (``randomKQ=3``).
    - ``"gpt2"``: B = QᵀK with Q, K i.i.d. N(0, σ²) entries, σ = 0.02 (GPT-2's initialisation,
      without the d^{-1/2} of practice, which β absorbs): E B = 0, Var B_ij = dσ⁴.

    Value matrix V (``value``):

    - ``"identity"``: V = I; the flow then stays in the span of the initial tokens.
    - ``"ginibre"``: V = G₃/√d, real Ginibre with spectrum filling the unit disc (circular law).
      Not available in the authors' code (docs/maths.md §9); this scaling, ‖V x‖ ≈ |x|, is the one
      of the ``"qk"`` panels.
    - ``"wishart"``: V = G₃G₃ᵀ/√d, positive semi-definite (``randomV=1``; the caption's "GOE"
      for panel (b) is this Wishart matrix).
    - ``"qk"``: V = B/c, the caption's V = QᵀK, with the code's normalisation c = √d for
      ``"ginibre"`` and c = √(d+1) for ``"goe"`` (``randomV=2``); c = 1 for ``"identity"``.
    - ``"kq"``: V = Bᵀ/c = KᵀQ/c, the value matrix the authors' code effectively used for
      ``"qk"`` (row-vector convention); equal to ``"qk"`` when B is symmetric.
    - ``"gpt2"``: V with i.i.d. N(0, σ²) entries, σ = 0.02 (GPT-2's initialisation);
      ``"qk"`` with ``"gpt2"`` B is V = B (c = 1).

    The four panels of Fig. 5 are in :data:`FIG5_ENSEMBLES`.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> B, V = af.AttentionEnsemble("goe", "qk").sample(jr.key(0), 6)
        >>> B.shape, bool((abs(B - B.T) < 1e-12).all()), bool((abs(V - B / 7**0.5) < 1e-12).all())
        ((6, 6), True, True)
    """

    bilinear: Literal["identity", "ginibre", "goe", "gpt2"] = eqx.field(static=True)
    value: Literal["identity", "ginibre", "wishart", "qk", "kq", "gpt2"] = eqx.field(static=True)

    def __check_init__(self):
        if self.bilinear not in _BILINEAR:
            raise ValueError(f"bilinear: expected one of {_BILINEAR}, got {self.bilinear!r}")
        if self.value not in _VALUE:
            raise ValueError(f"value: expected one of {_VALUE}, got {self.value!r}")

    @property
    def value_is_identity(self) -> bool:
        return self.value == "identity" or (
            self.value in ("qk", "kq") and self.bilinear == "identity"
        )

    def sample(
        self, key: PRNGKeyArray, d: int, dtype=None
    ) -> tuple[Float[Array, "d d"], Float[Array, "d d"]]:
        """Draw (B, V), both (d, d); deterministic given ``key``."""
        key = check_key(key)
        d = check_size(d, "d", low=2)
        check_budget("d", 3 * d * d, MAX_ARRAY_ELEMENTS, what="numbers in three (d, d) draws")
        dtype = check_dtype_option(dtype, "dtype")
        dtype = dtype if dtype is not None else jnp.result_type(float)
        k1, k2, k3 = jr.split(key, 3)
        eye = jnp.eye(d, dtype=dtype)
        if self.bilinear == "identity":
            B, norm = eye, 1.0
        elif self.bilinear == "ginibre":
            B = jr.normal(k1, (d, d), dtype) @ jr.normal(k2, (d, d), dtype) / jnp.sqrt(d)
            norm = d**0.5
        elif self.bilinear == "gpt2":
            Q = GPT2_STD * jr.normal(k1, (d, d), dtype)
            B, norm = Q.T @ (GPT2_STD * jr.normal(k2, (d, d), dtype)), 1.0
        else:
            g = jr.normal(k1, (d, d), dtype)
            B, norm = (g + g.T) / jnp.sqrt(2.0), (d + 1) ** 0.5
        if self.value == "identity":
            V = eye
        elif self.value == "ginibre":
            V = jr.normal(k3, (d, d), dtype) / jnp.sqrt(d)
        elif self.value == "gpt2":
            V = GPT2_STD * jr.normal(k3, (d, d), dtype)
        elif self.value == "wishart":
            g = jr.normal(k3, (d, d), dtype)
            V = g @ g.T / jnp.sqrt(d)
        elif self.value == "qk":
            V = B / norm
        else:
            V = B.T / norm
        return B.astype(dtype), V.astype(dtype)


GPT2_ENSEMBLE = AttentionEnsemble("gpt2", "gpt2")
"""GPT-2-style random weights: Q, K, V with i.i.d. N(0, 0.02²) entries."""

FIG5_ENSEMBLES: dict[str, AttentionEnsemble] = {
    "a": AttentionEnsemble("ginibre", "ginibre"),
    "b": AttentionEnsemble("goe", "wishart"),
    "c": AttentionEnsemble("ginibre", "qk"),
    "d": AttentionEnsemble("goe", "qk"),
}
"""Fig. 5's panels: (a) Q, K, V Ginibre; (b) QᵀK Wigner, V ⪰ 0 Wishart; (c) Q, K Ginibre,
V = QᵀK; (d) QᵀK Wigner, V = QᵀK (conventions in :class:`AttentionEnsemble`)."""
