"""Differentiable discrepancies between weighted empirical measures on the sphere."""

import contextlib
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import (
    check_beta,
    check_int,
    check_positive_scalar,
    check_tokens,
    check_tolerance,
    check_weights,
)


def _measure(x, weights, name):
    x = check_tokens(x, name)
    n = x.shape[0]
    if weights is None:
        return x, jnp.full((n,), 1.0 / n, dtype=x.dtype)
    weights = jnp.asarray(check_weights(weights, n, f"{name}_weights"), x.dtype)
    return x, weights / jnp.sum(weights)


def _check_same_dimension(x, y):
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"y: expected tokens of the same dimension as x (d = {x.shape[1]}), got shape {y.shape}"
        )


def squared_mmd(
    x: Float[Array, "n d"],
    y: Float[Array, "m d"],
    *,
    kappa=1.0,
    x_weights: Float[Array, " n"] | None = None,
    y_weights: Float[Array, " m"] | None = None,
) -> Float[Array, ""]:
    r"""Squared maximum mean discrepancy between μ = Σ_i a_i δ_{x_i} and ν = Σ_j b_j δ_{y_j}:

        MMD²_κ(μ, ν) = Σ_ii' a_i a_i' k(x_i, x_i') + Σ_jj' b_j b_j' k(y_j, y_j')
                       − 2 Σ_ij a_i b_j k(x_i, y_j),       k(x, y) = exp(κ(⟨x, y⟩ − 1)).

    The kernel is the interaction kernel of E_κ (paper (3.5)) divided by e^κ (so k ≤ 1 on the
    sphere and nothing overflows): MMD²_κ = 2κ e^{−κ} (E_κ[μ] + E_κ[ν] − 2 E_κ(μ, ν)) with
    the cross energy E_κ(μ, ν) = 1/(2κ) ∬ e^{κ⟨x,y⟩} dμ dν. Its Gegenbauer coefficients are all
    positive (docs/maths.md §8, the Prop. 3.4 argument), so MMD_κ is a metric on probability
    measures on S^{d−1}. Smooth in x, y and the weights; the square root is not taken because
    it is not differentiable at μ = ν.

    Args:
        x: (n, d) tokens of μ (unit rows).
        y: (m, d) tokens of ν (unit rows).
        kappa: kernel concentration κ > 0 (larger resolves finer scales).
        x_weights, y_weights: non-negative weights, normalised to sum to one; default uniform.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 6, 3)
        >>> mmd = af.measures.squared_mmd
        >>> bool(abs(mmd(x, x[::-1])) < 1e-12), bool(mmd(x, -x) > 0)
        (True, True)
    """
    x, a = _measure(x, x_weights, "x")
    y, b = _measure(y, y_weights, "y")
    _check_same_dimension(x, y)
    kappa = jnp.asarray(check_beta(kappa, positive=True, name="kappa"), x.dtype)

    def mean_kernel(u, wu, v, wv):
        return jnp.einsum("i,ij,j->", wu, jnp.exp(kappa * (u @ v.T - 1)), wv)

    return mean_kernel(x, a, x, a) + mean_kernel(y, b, y, b) - 2 * mean_kernel(x, a, y, b)


def sinkhorn_divergence(
    x: Float[Array, "n d"],
    y: Float[Array, "m d"],
    *,
    epsilon=0.05,
    x_weights: Float[Array, " n"] | None = None,
    y_weights: Float[Array, " m"] | None = None,
    threshold: float = 1e-4,
    max_iterations: int = 10_000,
) -> Float[Array, ""]:
    r"""Debiased entropic optimal-transport cost (Sinkhorn divergence, Feydy et al. 2019):

        S_ε(μ, ν) = OT_ε(μ, ν) − ½ OT_ε(μ, μ) − ½ OT_ε(ν, ν),
        OT_ε(μ, ν) = min_{π ∈ Π(a, b)} Σ_ij π_ij c(x_i, y_j) + ε KL(π ‖ a ⊗ b),

    with the squared chordal cost c(x, y) = |x − y|² = 2 − 2⟨x, y⟩ on the sphere (equal to the
    squared geodesic distance to fourth order). S_ε ≥ 0, S_ε(μ, μ) = 0, and S_ε → W₂²
    (chordal) as ε → 0. Computed with ott-jax (``ott.tools.sinkhorn_divergence``), which
    differentiates the Sinkhorn fixed point implicitly: gradients with respect to x, y and the
    weights are exact up to the Sinkhorn ``threshold``.

    Requires the optional dependency ott-jax (``pip install attnflow[ot]``).

    Args:
        x: (n, d) tokens of μ (unit rows).
        y: (m, d) tokens of ν (unit rows).
        epsilon: entropic regularisation ε > 0 (absolute, in units of the cost, which is ≤ 4).
        x_weights, y_weights: non-negative weights, normalised to sum to one; default uniform.
        threshold: Sinkhorn stopping tolerance on the marginal error.
        max_iterations: Sinkhorn iteration cap. Not converging raises an error (also under jit).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x, y = jnp.array([[1.0, 0.0]]), jnp.array([[0.0, 1.0]])
        >>> round(float(af.measures.sinkhorn_divergence(x, y)), 6)  # one coupling: |x − y|² = 2
        2.0
    """
    x, a = _measure(x, x_weights, "x")
    y, b = _measure(y, y_weights, "y")
    _check_same_dimension(x, y)
    epsilon = jnp.asarray(check_positive_scalar(epsilon, "epsilon"), x.dtype)
    threshold = float(check_tolerance(threshold, "threshold"))
    max_iterations = check_int(max_iterations, "max_iterations", low=1)
    value, converged = _jit_ott_divergence(x, y, a, b, epsilon, threshold, max_iterations)
    return eqx.error_if(
        value,
        ~converged,
        f"sinkhorn_divergence: Sinkhorn did not reach threshold={threshold} within "
        f"max_iterations={max_iterations}; raise max_iterations or epsilon",
    )


def _ott_divergence_and_convergence(x, y, a, b, epsilon, threshold, max_iterations):
    try:
        from ott.geometry import pointcloud
        from ott.tools import sinkhorn_divergence as ott_divergence
    except ImportError as error:
        raise ImportError(
            "sinkhorn_divergence needs ott-jax: pip install 'attnflow[ot]' (or ott-jax)"
        ) from error
    value, output = ott_divergence.sinkhorn_divergence(
        pointcloud.PointCloud,
        x,
        y,
        a=a,
        b=b,
        epsilon=epsilon,
        solve_kwargs={"threshold": threshold, "max_iterations": max_iterations},
    )
    return value, jnp.all(jnp.asarray([c for c in output.converged if c is not None]))


# ott-jax broadcasts across ranks internally, in its forward and in its implicit-differentiation
# backward pass, and promotes dtypes implicitly (its Sinkhorn raises the marginal error to the
# integer array norm_error=(1,)). Both passes are traced here under rank promotion "allow" and
# standard dtype promotion, so attnflow also works for users who run JAX with
# jax_numpy_rank_promotion="raise" or jax_numpy_dtype_promotion="strict".
@contextlib.contextmanager
def _promotion_ott_expects():
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        yield


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _ott_divergence(x, y, a, b, epsilon, threshold, max_iterations):
    with _promotion_ott_expects():
        return _ott_divergence_and_convergence(x, y, a, b, epsilon, threshold, max_iterations)


def _ott_divergence_fwd(x, y, a, b, epsilon, threshold, max_iterations):
    def value(*primals):
        return _ott_divergence_and_convergence(*primals, threshold, max_iterations)

    with _promotion_ott_expects():
        value, vjp, converged = jax.vjp(value, x, y, a, b, epsilon, has_aux=True)
    return (value, converged), vjp


def _ott_divergence_bwd(threshold, max_iterations, vjp, cotangents):
    del threshold, max_iterations
    with _promotion_ott_expects():
        return vjp(cotangents[0])


_ott_divergence.defvjp(_ott_divergence_fwd, _ott_divergence_bwd)
# Compiled once per shape: ott-jax run op by op costs seconds per call.
_jit_ott_divergence = jax.jit(_ott_divergence, static_argnums=(5, 6))
