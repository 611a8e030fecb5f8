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


SUPPORTED_DTYPES = ("float32", "float64")


def as_tokens(x):
    """Python lists and tuples of numbers become arrays of the default floating dtype."""
    if isinstance(x, (list, tuple)):
        return jnp.asarray(x, dtype=float)
    return x


def check_dtype(x, name: str = "x"):
    """Tokens are float32 or float64: half precision cannot hold the unit norm to the accuracy the
    solvers need (float16 passes a 3e-2 norm check and then stalls the step-size controller)."""
    dtype = jnp.result_type(x)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(
            f"{name}: expected a floating-point array (float32 or float64), got dtype {dtype}"
        )
    if dtype.name not in SUPPORTED_DTYPES:
        raise ValueError(
            f"{name}: supported dtypes are float32 and float64, got {dtype}; "
            "convert with x.astype(jnp.float32)"
        )


def check_shape_tokens(x, name: str = "x"):
    """Static checks: a float32 or float64 (n, d) array with n >= 1 and d >= 2."""
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
    check_dtype(x, name)


def check_tokens(x, name: str = "x", *, unit: bool = True):
    """Check that ``x`` is one system of finite tokens, of unit norm when ``unit``.

    Python lists and tuples are converted to arrays of the default floating dtype. Returns ``x``
    (converted, and wrapped with ``eqx.error_if`` when traced); use the returned value.
    """
    x = as_tokens(x)
    check_shape_tokens(x, name)
    dtype = jnp.result_type(x)
    tol = unit_norm_tolerance(dtype)
    if is_traced(x):
        x = eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), f"{name}: tokens contain NaN or inf")
        if unit:
            norms = jnp.linalg.norm(x, axis=-1)
            x = eqx.error_if(
                x,
                jnp.any(jnp.abs(norms - 1) > tol),
                f"{name}: tokens must lie on the unit sphere (||x_i| - 1| <= {tol:.1e} in "
                f"{dtype}); project them first with attnflow.normalize",
            )
        return x
    values = np.asarray(x)
    if not np.all(np.isfinite(values)):
        bad = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(f"{name}: tokens contain NaN or inf (first at row {bad[0]}, col {bad[1]})")
    if unit:
        norms = np.linalg.norm(values.astype(np.float64), axis=-1)
        worst = int(np.argmax(np.abs(norms - 1)))
        gap = norms[worst] - 1
        if abs(gap) > tol:
            zero = " (a zero row)" if norms[worst] == 0 else ""
            raise ValueError(
                f"{name}: tokens must lie on the unit sphere (||x_i| - 1| <= {tol:.1e} in "
                f"{dtype}), but |x_{worst}| - 1 = {gap:.2e}{zero}; project them first with "
                "attnflow.normalize"
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


def _scalar(value, name: str):
    """A real scalar: static check of shape and kind (Python number or 0-d array)."""
    if isinstance(value, (bool, str)) or jnp.ndim(value) != 0:
        raise ValueError(f"{name}: expected a real scalar, got {value!r}")
    kind = jnp.result_type(value)
    if not (jnp.issubdtype(kind, jnp.floating) or jnp.issubdtype(kind, jnp.integer)):
        raise ValueError(f"{name}: expected a real scalar, got dtype {kind}")


def check_finite_scalar(value, name: str):
    """A finite real scalar (a time, for instance); traced values go through ``eqx.error_if``."""
    _scalar(value, name)
    if is_traced(value):
        return eqx.error_if(value, ~jnp.isfinite(value), f"{name}: expected a finite value")
    if not np.isfinite(float(value)):
        raise ValueError(f"{name}: expected a finite value, got {float(value)}")
    return value


def check_positive_scalar(value, name: str, *, what: str = "value"):
    """A finite real scalar > 0 (tolerances, steps); NaN is rejected with the rest."""
    _scalar(value, name)
    if is_traced(value):
        bad = ~(jnp.isfinite(value) & (value > 0))
        return eqx.error_if(value, bad, f"{name}: expected a finite {what} > 0")
    if not (np.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"{name}: expected a finite {what} > 0, got {float(value)}")
    return value


def check_max_steps(max_steps, name: str = "max_steps"):
    """A Python integer >= 1 (diffrax's step cap is static), or None for no cap."""
    if max_steps is None:
        return None
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)):
        raise ValueError(f"{name}: expected a positive integer or None, got {max_steps!r}")
    if max_steps < 1:
        raise ValueError(f"{name}: expected a positive integer or None, got {max_steps}")
    return int(max_steps)


def check_delta(delta, name: str = "delta", *, low: float = 0.0, high: float = 2.0):
    """Clustering threshold δ of ⟨x_i, x_j⟩ >= 1 − δ: finite, in [low, high]."""
    _scalar(delta, name)
    expected = f"a threshold {low:g} <= {name} <= {high:g}"
    if is_traced(delta):
        bad = ~(jnp.isfinite(delta) & (delta >= low) & (delta <= high))
        return eqx.error_if(delta, bad, f"{name}: expected {expected}")
    value = float(delta)
    if not (np.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name}: expected {expected}, got {value}")
    return delta


def check_save_times(ts, t0, t1, name: str = "ts"):
    """Save times: a non-empty 1-d array of finite times from t0 to t1, monotone in the direction
    of integration (non-decreasing when t1 >= t0, non-increasing when t1 < t0)."""
    if jnp.ndim(ts) != 1 or jnp.shape(ts)[0] == 0:
        raise ValueError(
            f"{name}: expected a non-empty 1-d array of save times, got shape {jnp.shape(ts)}"
        )
    expected = f"{name}: expected finite save times between t0 and t1, monotone from t0 to t1"
    if is_traced(ts) or is_traced(t0) or is_traced(t1):
        sign = jnp.where(t1 >= t0, 1, -1)
        lo, hi = jnp.minimum(t0, t1), jnp.maximum(t0, t1)
        bad = (
            ~jnp.all(jnp.isfinite(ts))
            | jnp.any((ts < lo) | (ts > hi))
            | jnp.any(sign * jnp.diff(ts) < 0)
        )
        return eqx.error_if(ts, bad, expected)
    values, a, b = np.asarray(ts, np.float64), float(t0), float(t1)
    if not np.all(np.isfinite(values)):
        bad = int(np.argmax(~np.isfinite(values)))
        raise ValueError(f"{expected}; {name}[{bad}] = {values[bad]}")
    outside = (values < min(a, b)) | (values > max(a, b))
    if np.any(outside):
        bad = int(np.argmax(outside))
        raise ValueError(f"{expected}; {name}[{bad}] = {values[bad]} is outside [{a}, {b}]")
    steps = np.diff(values) * (1 if b >= a else -1)
    if np.any(steps < 0):
        bad = int(np.argmax(steps < 0))
        order = "non-decreasing" if b >= a else "non-increasing (t1 < t0)"
        raise ValueError(
            f"{expected}; they must be {order}, but {name}[{bad}] = {values[bad]} and "
            f"{name}[{bad + 1}] = {values[bad + 1]}"
        )
    return ts
