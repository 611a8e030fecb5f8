"""Array type aliases shared across attnflow (jaxtyping)."""

from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray, Real

Tokens = Float[Array, "n d"]
"""One system of n tokens in R^d (rows on the unit sphere S^{d-1})."""

TangentVectors = Float[Array, "n d"]
"""One tangent vector per token: row i is orthogonal to token i."""

Weights = Float[Array, " n"]
"""Weights of an empirical measure sum_i w_i delta_{x_i}."""

Scalar = Real[ArrayLike, ""]

__all__ = [
    "Array",
    "ArrayLike",
    "Float",
    "PRNGKeyArray",
    "Real",
    "Scalar",
    "Tokens",
    "TangentVectors",
    "Weights",
]
