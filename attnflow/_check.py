"""Input validation with messages that name the argument, what was expected and what came.

Shape checks are static and raise ``ValueError`` at trace time. Value checks (finite, unit norm,
sign of β) raise ``ValueError`` immediately for concrete arrays and go through
``equinox.error_if`` for traced ones, so they also fire under ``jit``, ``vmap`` and ``grad``.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def is_traced(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def unit_norm_tolerance(dtype) -> float:
    """Accepted deviation of ||x_i|| from 1: sqrt(machine epsilon) (3e-4 float32, 1e-8 float64)."""
    return float(np.sqrt(np.finfo(dtype).eps))


def check_shape_tokens(x, name: str = "x"):
    """Static checks: a floating (n, d) array with n >= 1 and d >= 2."""
    shape = jnp.shape(x)
    if len(shape) != 2:
        raise ValueError(
            f"{name}: expected tokens of shape (n, d) (one system; batch with jax.vmap), "
            f"got an array of shape {shape}"
        )
    n, d = shape
    if d < 2:
        raise ValueError(f"{name}: the sphere S^(d-1) needs d >= 2, got d = {d} (shape {shape})")
    if n < 1:
        raise ValueError(f"{name}: expected at least one token, got shape {shape}")
    if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
        raise ValueError(f"{name}: expected a floating-point array, got dtype {jnp.result_type(x)}")


def check_tokens(x, name: str = "x", *, unit: bool = True):
    """Check that ``x`` is one system of finite tokens, of unit norm when ``unit``.

    Returns ``x`` (wrapped with ``eqx.error_if`` when traced); use the returned value.
    """
    check_shape_tokens(x, name)
    if is_traced(x):
        x = eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), f"{name}: tokens contain NaN or inf")
        if unit:
            norms = jnp.linalg.norm(x, axis=-1)
            tol = unit_norm_tolerance(jnp.result_type(x))
            x = eqx.error_if(
                x,
                jnp.any(jnp.abs(norms - 1) > tol),
                f"{name}: tokens must lie on the unit sphere (|x_i| = 1 to {tol:.1e}); "
                "project them first with attnflow.normalize",
            )
        return x
    values = np.asarray(x)
    if not np.all(np.isfinite(values)):
        bad = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(f"{name}: tokens contain NaN or inf (first at row {bad[0]}, col {bad[1]})")
    if unit:
        norms = np.linalg.norm(values, axis=-1)
        tol = unit_norm_tolerance(values.dtype)
        worst = int(np.argmax(np.abs(norms - 1)))
        if abs(norms[worst] - 1) > tol:
            raise ValueError(
                f"{name}: tokens must lie on the unit sphere (|x_i| = 1 to {tol:.1e}), "
                f"but |x_{worst}| = {norms[worst]:.6g}; project them first with attnflow.normalize"
            )
    return x


def check_nonzero_rows(x, name: str = "x"):
    """Rows must be non-zero to be projected onto the sphere."""
    if is_traced(x):
        return eqx.error_if(
            x, jnp.any(jnp.all(x == 0, axis=-1)), f"{name}: a zero row cannot be normalised"
        )
    zero = np.all(np.asarray(x) == 0, axis=-1)
    if np.any(zero):
        raise ValueError(f"{name}: row {int(np.argmax(zero))} is zero and cannot be normalised")
    return x


def check_beta(beta, *, positive: bool = False, name: str = "beta"):
    """β must be a finite real scalar, >= 0 (> 0 when ``positive``)."""
    if jnp.ndim(beta) != 0:
        raise ValueError(f"{name}: expected a scalar, got shape {jnp.shape(beta)}")
    bound = "> 0" if positive else ">= 0"
    if is_traced(beta):
        bad = ~jnp.isfinite(beta) | ((beta <= 0) if positive else (beta < 0))
        return eqx.error_if(beta, bad, f"{name}: expected a finite value {bound}")
    value = float(beta)
    if not np.isfinite(value) or (value <= 0 if positive else value < 0):
        raise ValueError(f"{name}: expected a finite value {bound}, got {value}")
    return beta


def check_matrix(matrix, name: str, shape_hint: str, *, ndim: int = 2):
    if jnp.ndim(matrix) != ndim:
        raise ValueError(
            f"{name}: expected a matrix of shape {shape_hint}, got shape {jnp.shape(matrix)}"
        )
    if not is_traced(matrix) and not np.all(np.isfinite(np.asarray(matrix))):
        raise ValueError(f"{name}: contains NaN or inf")


def check_symmetric(matrix, name: str, why: str):
    """Static check of symmetry for concrete matrices (traced ones are taken on trust)."""
    if is_traced(matrix):
        return
    values = np.asarray(matrix)
    if values.shape[0] != values.shape[1]:
        raise ValueError(f"{name}: expected a square matrix, got shape {values.shape}")
    scale = max(1.0, float(np.max(np.abs(values))))
    asym = float(np.max(np.abs(values - values.T)))
    if asym > 1e3 * np.finfo(values.dtype if values.dtype.kind == "f" else np.float64).eps * scale:
        raise ValueError(f"{name}: must be symmetric ({why}); max |A - A^T| = {asym:.3g}")


def check_weights(weights, n: int, name: str = "weights"):
    """Weights of an empirical measure: shape (n,), finite, non-negative."""
    if weights is None:
        return None
    if jnp.shape(weights) != (n,):
        raise ValueError(
            f"{name}: expected shape ({n},) to match the {n} tokens, got {jnp.shape(weights)}"
        )
    if is_traced(weights):
        return eqx.error_if(
            weights,
            ~jnp.all(jnp.isfinite(weights)) | jnp.any(weights < 0),
            f"{name}: expected finite non-negative weights",
        )
    values = np.asarray(weights)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"{name}: expected finite non-negative weights, got {values}")
    return weights
