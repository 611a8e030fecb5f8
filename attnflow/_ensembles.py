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

_BILINEAR = ("identity", "ginibre", "goe")
_VALUE = ("identity", "ginibre", "wishart", "qk", "kq")


class AttentionEnsemble(eqx.Module):
    r"""A distribution of (B = QᵀK, V) for random-matrix phase diagrams (paper Fig. 5).

    Bilinear form B (``bilinear``):

    - ``"identity"``: B = I (Q = K = I).
    - ``"ginibre"``: B = G₁G₂/√d, i.e. Q = d^{-1/4} G₁ᵀ and K = d^{-1/4} G₂ real Ginibre; the
      entries of B have variance 1 (the code's ``randomKQ=1``).
    - ``"goe"``: B = (G + Gᵀ)/√2, Wigner/GOE: off-diagonal variance 1, diagonal variance 2
      (``randomKQ=3``).

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

    The four panels of Fig. 5 are in :data:`FIG5_ENSEMBLES`.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> B, V = af.AttentionEnsemble("goe", "qk").sample(jr.key(0), 6)
        >>> B.shape, bool((abs(B - B.T) < 1e-12).all()), bool((abs(V - B / 7**0.5) < 1e-12).all())
        ((6, 6), True, True)
    """

    bilinear: Literal["identity", "ginibre", "goe"] = eqx.field(static=True)
    value: Literal["identity", "ginibre", "wishart", "qk", "kq"] = eqx.field(static=True)

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
        if d < 2:
            raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
        dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
        k1, k2, k3 = jr.split(key, 3)
        eye = jnp.eye(d, dtype=dtype)
        if self.bilinear == "identity":
            B, norm = eye, 1.0
        elif self.bilinear == "ginibre":
            B = jr.normal(k1, (d, d), dtype) @ jr.normal(k2, (d, d), dtype) / jnp.sqrt(d)
            norm = d**0.5
        else:
            g = jr.normal(k1, (d, d), dtype)
            B, norm = (g + g.T) / jnp.sqrt(2.0), (d + 1) ** 0.5
        if self.value == "identity":
            V = eye
        elif self.value == "ginibre":
            V = jr.normal(k3, (d, d), dtype) / jnp.sqrt(d)
        elif self.value == "wishart":
            g = jr.normal(k3, (d, d), dtype)
            V = g @ g.T / jnp.sqrt(d)
        elif self.value == "qk":
            V = B / norm
        else:
            V = B.T / norm
        return B.astype(dtype), V.astype(dtype)


FIG5_ENSEMBLES: dict[str, AttentionEnsemble] = {
    "a": AttentionEnsemble("ginibre", "ginibre"),
    "b": AttentionEnsemble("goe", "wishart"),
    "c": AttentionEnsemble("ginibre", "qk"),
    "d": AttentionEnsemble("goe", "qk"),
}
"""Fig. 5's panels: (a) Q, K, V Ginibre; (b) QᵀK Wigner, V ⪰ 0 Wishart; (c) Q, K Ginibre,
V = QᵀK; (d) QᵀK Wigner, V = QᵀK (conventions in :class:`AttentionEnsemble`)."""
