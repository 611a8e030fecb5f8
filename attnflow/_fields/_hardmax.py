"""The singular β → ∞ limit of attention: hardmax attention, paper (9.5)–(9.6)."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import (
    accepts_array_likes,
    check_finite_array,
    check_shape_tokens,
    is_traced,
)
from ._base import AbstractAttention, AbstractPureField, check_field_input, weights_from_args
from ._kernel import attention_matrix
from ._self_attention import SelfAttention


def hardmax(logits: Float[Array, "*batch n"], *, tol=0.0) -> Float[Array, "*batch n"]:
    """Row-wise hardmax: the uniform distribution on the argmax set of each row (last axis),

        h_j = 1{ℓ_j ≥ max_k ℓ_k − tol} / #{k : ℓ_k ≥ max ℓ − tol}.

    The β → ∞ limit of softmax(β ℓ): a row with a unique maximum becomes one-hot, and tied
    maxima share the mass equally, which is also the limit of softmax at a tie. Away from ties,
    max_j |softmax(βℓ)_j − h_j| ≤ (n − 1) e^{−β·gap}, gap = top-1 minus top-2 logit
    (docs/maths.md §1.9).

    Args:
        logits: (…, n) scores.
        tol: ≥ 0; logits within ``tol`` of the row maximum count as tied (0: exact ties only).

    Its derivative is zero wherever it exists (a piecewise-constant map).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.hardmax(jnp.array([[0.0, 2.0, 2.0], [3.0, 1.0, 0.0]])).tolist()
        [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]
    """
    if not is_traced(tol) and not float(tol) >= 0:  # NaN too
        raise ValueError(f"tol: expected a non-negative tie tolerance, got {tol}")
    logits = check_finite_array(logits, "logits", allow_negative_infinity=True)
    if jnp.ndim(logits) < 1:
        raise ValueError(f"logits: expected scores of shape (..., n), got {jnp.shape(logits)}")
    if not jnp.issubdtype(jnp.result_type(logits), jnp.floating):
        logits = jnp.asarray(logits, float)  # integer scores: compared as numbers, as JAX does
    logits = jnp.asarray(logits)
    if not is_traced(logits):
        empty = np.all(np.asarray(logits) == -np.inf, axis=-1)
        if np.any(empty):
            where = tuple(int(i) for i in np.argwhere(empty)[0])
            raise ValueError(
                f"logits: the row at index {where} is all −inf (every entry masked): it has no "
                "maximum to select"
            )
    flat = logits.reshape(-1, logits.shape[-1])
    # A hardmax row is the kernel's "hardmax" normalisation of scores s = 0 + bias.
    zeros = jnp.zeros((flat.shape[0], 1), flat.dtype)
    keys = jnp.zeros((flat.shape[1], 1), flat.dtype)
    a = attention_matrix(zeros, keys, bias=flat, normalization="hardmax", hardmax_tol=tol)
    return a.reshape(logits.shape)


class HardmaxSelfAttention(AbstractAttention):
    r"""The β → ∞ limit of (SA) (2.3) on the sphere: each token follows the mean of its leaders,

        ẋ_i = P^⊥_{x_i} ( (1/|C_i|) Σ_{j ∈ C_i} V x_j ),
        C_i = { j : ⟨Q x_i, K x_j⟩ ≥ ⟨Q x_i, K x_k⟩ − tol  ∀k }   (the argmax set, (9.6)).

    Ties are averaged (the limit of softmax at a tie). The field is discontinuous where C_i
    changes, so Filippov solutions need not be unique (Example 9.3): use it in discrete time,
    ``attnflow.layers(HardmaxSelfAttention(...), x0, L, h)``, rather than with adaptive solvers.

    Args:
        Q, K: (k, d) query and key matrices (identity when omitted).
        V: (d, d) value matrix (identity when omitted).
        tol: tie tolerance on ⟨Q x_i, K x_j⟩ (absolute, ≥ 0).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 6, 3)
        >>> f = af.HardmaxSelfAttention()
        >>> bool(jnp.allclose(f(0.0, x), 0.0))  # with Q = K = I every token leads itself
        True
    """

    attention: SelfAttention
    tol: float = eqx.field(static=True)

    def __init__(self, Q=None, K=None, V=None, *, tol=0.0):
        if not float(tol) >= 0:  # NaN too
            raise ValueError(f"tol: expected a non-negative tie tolerance, got {tol}")
        self.attention = SelfAttention(1.0, Q, K, V)
        self.tol = float(tol)

    @property
    def dim(self) -> int | None:
        """The token dimension d fixed by Q, K or V (None when all are the identity)."""
        return self.attention.dim

    def scores(self, x, weights):
        """⟨Q x_i, K x_j⟩ with the kernel's "hardmax" normalisation (ties averaged)."""
        return self.attention.scores(x, weights)._replace(
            normalization="hardmax", hardmax_tol=self.tol
        )


class HardmaxRescaledAttention(AbstractPureField):
    r"""The hardmax dynamics of paper (9.5)–(9.6) on R^d:

        ż_i = (1/|C_i(t)|) Σ_{j ∈ C_i(t)} V (z_j − z_i),
        C_i(t) = { j : ⟨Q z_i, K z_j⟩ ≥ ⟨Q z_i, K z_k⟩ − tol  ∀k },

    the β → ∞ limit of (9.4), i.e. of ``RescaledSelfAttention(β, Q, K, V, logits_at="z")``. Ties
    are averaged. The field is discontinuous, and its Filippov solutions are not unique
    (Example 9.3): use it in discrete time with :func:`attnflow.residual_layers`.

    Args:
        Q, K: (k, d) query and key matrices (identity when omitted).
        V: (d, d) value matrix (identity when omitted).
        tol: tie tolerance on ⟨Q z_i, K z_j⟩ (absolute, ≥ 0).

    Example (Example 9.3 of the paper: z_1, z_2 lead themselves, z_3 ties all three):
        >>> import jax.numpy as jnp, attnflow as af
        >>> z = jnp.array([[1.0, 1.0], [-1.0, 1.0], [0.0, 0.0]])
        >>> v = af.HardmaxRescaledAttention()(0.0, z)
        >>> [round(float(c), 4) for c in v.ravel()]
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.6667]
    """

    attention: HardmaxSelfAttention

    def __init__(self, Q=None, K=None, V=None, *, tol=0.0):
        self.attention = HardmaxSelfAttention(Q, K, V, tol=tol)

    @property
    def tol(self) -> float:
        return self.attention.tol

    def attention_matrix(
        self, z: Float[Array, "n d"], weights: Float[Array, " n"] | None = None
    ) -> Float[Array, "n n"]:
        """The hardmax attention matrix of (9.5): 1/|C_i| on C_i, 0 elsewhere."""
        check_shape_tokens(z, "z")
        return self.attention.attention_matrix(z, weights)

    @accepts_array_likes("z")
    def __call__(self, t, z: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        check_field_input(z, "z", nonzero=False)
        out = self.attention.attention_output(z, weights_from_args(args, z.shape[0]))
        return out - self.attention.attention.scores(z, None).values
