"""Input validation with messages that name the argument, what was expected and what came.

Shape checks are static and raise ``ValueError`` at trace time. Value checks (finite, unit norm,
sign of β) raise ``ValueError`` immediately for concrete arrays and go through
``equinox.error_if`` for traced ones, so they also fire under ``jit``, ``vmap`` and ``grad``.
"""

import contextlib
import contextvars
import functools
import inspect
import re
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def is_traced(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def _dtype(x):
    """The dtype of an array (fast path) or of anything jnp.result_type understands."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype
    return jnp.result_type(x)


@functools.cache
def unit_norm_tolerance(dtype) -> float:
    """Accepted deviation of ||x_i|| from 1: sqrt(machine epsilon) (3e-4 float32, 1e-8 float64)."""
    return float(np.sqrt(np.finfo(dtype).eps))


SUPPORTED_DTYPES = ("float32", "float64")


def as_tokens(x, name: str = "x"):
    """Python lists and tuples of numbers become arrays of the default floating dtype; strings,
    None and other objects are rejected  with a message naming the argument."""
    return as_array(x, name)


def check_dtype(x, name: str = "x"):
    """Tokens are float32 or float64: half precision cannot hold the unit norm to the accuracy the
    solvers need (float16 passes a 3e-2 norm check and then stalls the step-size controller)."""
    dtype = _dtype(x)
    if dtype.name in SUPPORTED_DTYPES:
        return
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
    x = as_array(x, name)
    shape = jnp.shape(x)
    if len(shape) == 3:
        raise ValueError(
            f"{name}: expected tokens of shape (n, d), got (T, n, d) = {shape}: one system at a "
            "time; for a trajectory such as sol.ys use jax.vmap over the first axis (or "
            "attnflow.energy_along for energies)"
        )
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
    return x


def check_tokens(x, name: str = "x", *, unit: bool = True):
    """Check that ``x`` is one system of finite tokens, of unit norm when ``unit``.

    Python lists and tuples are converted to arrays of the default floating dtype. Returns ``x``
    (converted, and wrapped with ``eqx.error_if`` when traced); use the returned value.
    """
    x = as_tokens(x, name)
    check_shape_tokens(x, name)
    dtype = _dtype(x)
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
    # Fast path, one pass over the data: NaN and inf make the squared norms NaN or inf, which fail
    # both comparisons. The exact diagnosis below runs only when this fails.
    squares = np.einsum("ij,ij->i", values, values, dtype=np.float64)
    if unit:
        if np.all((squares >= (1 - tol) ** 2) & (squares <= (1 + tol) ** 2)):
            return x
    elif np.all(np.isfinite(squares)) and np.all(np.isfinite(values)):
        return x
    if not np.all(np.isfinite(values)):
        bad = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(f"{name}: tokens contain NaN or inf (first at row {bad[0]}, col {bad[1]})")
    if unit:
        norms = np.linalg.norm(values.astype(np.float64), axis=-1)
        worst = int(np.argmax(np.abs(norms - 1)))
        gap = norms[worst] - 1
        if abs(gap) > tol:
            columns = np.linalg.norm(values.astype(np.float64), axis=0)
            if values.shape[0] >= 2 and np.all(np.abs(columns - 1) <= tol):
                raise ValueError(
                    f"{name}: expected tokens of shape (n, d) with unit rows, got shape "
                    f"{values.shape} whose columns have unit norm: the array looks transposed "
                    f"(pass {name}.T)"
                )
            zero = " (a zero row)" if norms[worst] == 0 else ""
            raise ValueError(
                f"{name}: tokens must lie on the unit sphere (||x_i| - 1| <= {tol:.1e} in "
                f"{dtype}), but |x_{worst}| - 1 = {gap:.2e}{zero}; project them first with "
                "attnflow.normalize"
            )
    return x


# Inside an engine (solve, solve_sde, the layer loop, sharded solves) the fields run thousands of
# times per program: their traced checks are left out there (the engine checked x0 once at its
# entry), so that the engines' compiled programs gain no operation (docs/conventions.md,
# "Under jit"). Set while the engine traces its step; a Python-level flag, free at run time.
_INSIDE_ENGINE = contextvars.ContextVar("attnflow_inside_engine", default=False)


@contextlib.contextmanager
def inside_engine():
    """Mark the tracing of an engine's loop: the fields' traced value checks are skipped."""
    token = _INSIDE_ENGINE.set(True)
    try:
        yield
    finally:
        _INSIDE_ENGINE.reset(token)


def check_traced_field_input(x, name: str = "x", *, nonzero: bool = True):
    """A field called under ``jit`` by the user (not by an engine): NaN, inf and (``nonzero``)
    zero rows raise through ``eqx.error_if`` (issue 44 item 6). Inside an engine, or for
    concrete ``x``, returns ``x`` unchanged: no operation is added to the engines' programs."""
    if not is_traced(x) or _INSIDE_ENGINE.get():
        return x
    bad = ~jnp.all(jnp.isfinite(x))
    what = "NaN or inf"
    if nonzero:
        bad = bad | jnp.any(jnp.all(x == 0, axis=-1))
        what = "NaN, inf or a zero row (a zero token has no tangent space on the sphere)"
    return eqx.error_if(x, bad, f"{name}: tokens contain {what}")


def check_nonzero_rows(x, name: str = "x"):
    """Rows must be finite and non-zero to be projected onto the sphere."""
    x = as_array(x, name)
    check_real(x, name)
    if jnp.ndim(x) < 1:
        expected(name, "an array of shape (..., d)", x)
    if not is_traced(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError(f"{name}: expected finite values, got NaN or inf")
    if is_traced(x):
        return eqx.error_if(
            x, jnp.any(jnp.all(x == 0, axis=-1)), f"{name}: a zero row cannot be normalised"
        )
    values = np.asarray(x)
    zero = np.all(values == 0, axis=-1)
    if np.any(zero):
        raise ValueError(f"{name}: row {int(np.argmax(zero))} is zero and cannot be normalised")
    if values.dtype.kind == "f":
        # XLA flushes subnormal numbers to zero (CPU and GPU): such a row is zero to JAX.
        tiny = np.finfo(values.dtype).tiny
        flushed = np.all(np.abs(values) < tiny, axis=-1)
        if np.any(flushed):
            raise ValueError(
                f"{name}: row {int(np.argmax(flushed))} has only subnormal entries (below "
                f"{tiny:.3g} in {values.dtype}), which JAX flushes to zero: it cannot be "
                "normalised; rescale it first"
            )
    return x


def check_beta(beta, *, positive: bool = False, signed: bool = False, name: str = "beta"):
    """β must be a finite real scalar, >= 0 (> 0 when ``positive``).

    ``signed``: β < 0 is accepted too (attention that favours dissimilar tokens,
    docs/conventions.md "Negative β"); with ``positive`` as well, β ≠ 0 (where a formula
    divides by β). NaN and ±inf are refused in every case.
    """
    _scalar(beta, name)
    if signed:
        bound = "≠ 0 (of either sign)" if positive else "(of either sign)"
    else:
        bound = "> 0" if positive else ">= 0"
    if is_traced(beta):
        if signed:
            bad = ~jnp.isfinite(beta) | ((beta == 0) if positive else False)
        else:
            bad = ~jnp.isfinite(beta) | ((beta <= 0) if positive else (beta < 0))
        return eqx.error_if(beta, bad, f"{name}: expected a finite value {bound}")
    value = float(beta)
    if signed:
        bad = not np.isfinite(value) or (positive and value == 0)
    else:
        bad = not np.isfinite(value) or (value <= 0 if positive else value < 0)
    if bad:
        raise ValueError(f"{name}: expected a finite value {bound}, got {value}")
    return beta


def check_matrix(matrix, name: str, shape_hint: str, *, ndim: int = 2):
    """A real matrix of ``ndim`` dimensions with finite entries; lists and tuples are converted.
    Returns the matrix (converted: use the returned value)."""
    matrix = as_array(matrix, name)
    check_real(matrix, name)
    if jnp.ndim(matrix) != ndim:
        raise ValueError(
            f"{name}: expected a matrix of shape {shape_hint}, got shape {jnp.shape(matrix)}"
        )
    if not is_traced(matrix) and not np.all(np.isfinite(np.asarray(matrix))):
        raise ValueError(f"{name}: contains NaN or inf")
    return matrix


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
    """Weights of an empirical measure: see :func:`check_measure` (shape (n,), finite,
    non-negative, positive total mass)."""
    return check_measure(weights, n, name)


def _scalar(value, name: str):
    """A real scalar: static check of shape and kind (Python number or 0-d array)."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        expected(name, "a real scalar", value)
    if isinstance(value, (float, int)):
        return
    if not isinstance(value, (int, float, complex, np.number)) and not hasattr(value, "dtype"):
        expected(name, "a real scalar", value)
    if jnp.ndim(value) != 0:
        expected(name, "a real scalar", f"= an array of shape {jnp.shape(value)}")
    check_real(value, name)
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


def check_delta(delta, name: str = "delta"):
    """The one range of the clustering threshold δ of ⟨x_i, x_j⟩ >= 1 − δ: 0 < δ < 2.

    δ = 0 asks for bitwise-equal tokens (a count of floating-point coincidences) and δ >= 2
    puts every pair in one cluster: neither is a question about clustering.
    """
    _scalar(delta, name)
    what = f"a threshold 0 < {name} < 2"
    if is_traced(delta):
        bad = ~(jnp.isfinite(delta) & (delta > 0) & (delta < 2))
        return eqx.error_if(delta, bad, f"{name}: expected {what}")
    value = float(delta)
    if not (np.isfinite(value) and 0 < value < 2):
        raise ValueError(f"{name}: expected {what}, got {value}")
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


# ---------------------------------------------------------------------------------------------
# One message format: "<argument>: expected <what>, got <what came>[; <how to fix>]".


def describe(value) -> str:
    """What came, briefly: the value for scalars and strings, dtype and shape for arrays."""
    if isinstance(value, (str, bool, int, float, complex)) or value is None:
        return f"{value!r} ({type(value).__name__})"
    shape = getattr(value, "shape", None)
    if shape is not None:
        dtype = getattr(value, "dtype", None)
        return f"an array of shape {tuple(shape)} and dtype {dtype}"
    return f"{type(value).__name__} {value!r}"[:200]


def expected(name: str, what: str, value, hint: str = ""):
    """Raise ``error`` in the one format; ``value`` is described with :func:`describe`."""
    # A string starting with "= " is a ready-made description of what came.
    got = value[2:] if isinstance(value, str) and value.startswith("= ") else describe(value)
    raise ValueError(f"{name}: expected {what}, got {got}{'; ' + hint if hint else ''}")


def as_array(x, name: str, *, dtype=None):
    """Python lists, tuples and scalars become arrays (of the default floating dtype when the
    entries are real numbers); complex, string and object inputs are rejected with a message."""
    if isinstance(x, (str, bytes)) or x is None:
        expected(name, "an array", x)
    if isinstance(x, (list, tuple, int, float, complex)) and not isinstance(x, bool):
        try:
            values = np.asarray(x)
        except ValueError:
            expected(name, "a rectangular array", "= a ragged list")
        if values.dtype.kind not in "biufc":
            expected(name, "an array of numbers", f"= a list of {values.dtype}")
        if values.dtype.kind == "c":
            check_real(values, name)
        return jnp.asarray(values, dtype=dtype if dtype is not None else float)
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        expected(name, "an array", x)
    return x


def check_real(x, name: str):
    """Complex values would lose their imaginary part silently: reject them."""
    if isinstance(x, (str, bytes)) or x is None:
        expected(name, "real numbers", x)
    if isinstance(x, (float, int)):
        return x
    if isinstance(x, (list, tuple)):
        kind = np.asarray(x).dtype
    else:
        kind = _dtype(x)
    if jnp.issubdtype(kind, jnp.complexfloating):
        raise ValueError(
            f"{name}: expected real numbers, got complex dtype {kind} (the flow lives on the "
            "real sphere; pass the real part explicitly if that is what you mean)"
        )
    return x


def check_bool(value, name: str) -> bool:
    """A bool: True or False (a NumPy bool too). The string "False" is truthy, so it is an error."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if hasattr(value, "dtype") and jnp.ndim(value) == 0 and jnp.result_type(value) == jnp.bool_:
        if is_traced(value):
            expected(name, "a Python bool (it selects the program, so it is static)", value)
        return bool(value)
    expected(name, "a bool (True or False)", value)


def check_sa_normalization(normalization, name: str = "normalization") -> str:
    """The normalisation of the paper's dynamics: ``"softmax"`` (SA) or ``"n"`` (USA)."""
    if not isinstance(normalization, str) or normalization not in ("softmax", "n"):
        raise ValueError(f"{name}: expected 'softmax' (SA) or 'n' (USA), got {normalization!r}")
    return normalization


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """An integer (Python or NumPy, not a bool, not 2.5 nor "3") in [low, high]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if hasattr(value, "dtype") and jnp.ndim(value) == 0 and not is_traced(value):
            if jnp.issubdtype(jnp.result_type(value), jnp.integer):
                value = int(value)
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            expected(name, "an integer", value)
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        if low == 1 and high is None:
            what = "a positive integer"
        elif high is None:
            what = f"an integer >= {low}"
        elif low is None:
            what = f"an integer <= {high}"
        else:
            what = f"an integer in [{low}, {high}]"
        expected(name, what, value)
    return value


def check_block_size(block_size, name: str = "block_size"):
    """None or a positive Python integer (the block size of the blocked attention kernel)."""
    if block_size is not None and (
        not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1
    ):
        raise ValueError(f"{name}: expected None or a positive integer, got {block_size!r}")
    return block_size


def check_range(value, name: str, low: float, high: float, *, what: str = "a value"):
    """A finite real scalar in the closed interval [low, high] (e.g. a correlation ρ in [−1, 1])."""
    _scalar(value, name)
    if is_traced(value):
        bad = ~(jnp.isfinite(value) & (value >= low) & (value <= high))
        return eqx.error_if(value, bad, f"{name}: expected {what} in [{low:g}, {high:g}]")
    if not (np.isfinite(float(value)) and low <= float(value) <= high):
        expected(name, f"{what} in [{low:g}, {high:g}]", float(value))
    return value


def check_tolerance(value, name: str):
    """A tolerance: a finite real scalar > 0 (a negative tolerance silently accepts anything)."""
    return check_positive_scalar(value, name, what="tolerance")


def check_key(key, name: str = "key"):
    """A JAX PRNG key: a typed key from ``jax.random.key(seed)``, or a legacy uint32 key of shape
    (..., 2) from ``jax.random.PRNGKey(seed)``, which is wrapped into a typed key. An int seed is
    rejected with a message that says how to make a key."""
    if hasattr(key, "dtype") and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    hint = "make one with jax.random.key(seed), e.g. jax.random.key(0)"
    if hasattr(key, "dtype") and key.dtype == jnp.uint32 and jnp.shape(key)[-1:] == (2,):
        return jax.random.wrap_key_data(key)
    expected(name, "a JAX PRNG key", key, hint)


def check_dict_keys(mapping, name: str, known, *, allow_none: bool = True):
    """A dict of options whose keys are all known: a misspelt key would otherwise be ignored."""
    if mapping is None and allow_none:
        return None
    if not isinstance(mapping, dict):
        return mapping
    unknown = sorted(set(mapping) - set(known), key=str)
    if unknown:
        raise ValueError(
            f"{name}: unknown key(s) {unknown}; expected keys among {sorted(known)}, got "
            f"{sorted(mapping, key=str)}"
        )
    return mapping


def check_measure(weights, n: int, name: str = "weights"):
    """Weights of an empirical measure Σ_i w_i δ_{x_i}: shape (n,), real, finite, non-negative,
    with a positive total mass. None means uniform and is returned as None."""
    if weights is None:
        return None
    weights = as_array(weights, name)
    check_real(weights, name)
    if jnp.shape(weights) != (n,):
        raise ValueError(
            f"{name}: expected shape ({n},) to match the {n} tokens, got {jnp.shape(weights)}"
        )
    message = f"{name}: expected finite non-negative weights with a positive sum (a measure)"
    if is_traced(weights):
        bad = ~jnp.all(jnp.isfinite(weights)) | jnp.any(weights < 0) | ~(jnp.sum(weights) > 0)
        return eqx.error_if(weights, bad, message)
    values = np.asarray(weights)
    if not np.all(np.isfinite(values)) or np.any(values < 0) or not np.sum(values) > 0:
        raise ValueError(f"{message}, got {values}")
    return weights


# Work and memory that follow from an argument are checked before any compilation or allocation.
MAX_GRID_POINTS = 2**27  # 128 M evaluations of a kernel sum: minutes; more is a mistake
MAX_STEPS_LIMIT = 2**24  # 16.8 M solver steps: far beyond any horizon a clustered state needs
MAX_ARRAY_ELEMENTS = 2**28  # 268 M numbers (1 GiB in float32) in one array that an argument sizes
MAX_PYTHON_LOOP = 2**14  # 16,384 iterations of a Python-level loop (one dispatch each): seconds


def check_budget(name: str, requested, limit, *, what: str, hint: str = "", factors=None):
    """Refuse, before starting, a request whose size follows from an argument and exceeds
    ``limit``: say how large it is and by what factor it exceeds the limit. ``what`` names the
    quantity (e.g. "solver steps"), ``hint`` says how to make the request smaller, ``factors``
    (a dict name → value) the arguments the size is the product of, each named in the message."""
    if requested > limit:
        listed = ""
        if factors:
            listed = " from " + ", ".join(f"{k} = {v:.3g}" for k, v in factors.items())
        raise ValueError(
            f"{name}: expected a request of at most {limit:.3g} {what}, got {float(requested):.3g}"
            f"{listed} ({requested / limit:.3g} times the limit){'; ' + hint if hint else ''}"
        )


def check_size(value, name: str, *, low: int | None = 1, per_unit: float = 1, limit=None, what=""):
    """A count that sizes an allocation or a loop: an integer >= ``low`` (:func:`check_int`)
    with ``value * per_unit`` within ``limit`` (default :data:`MAX_ARRAY_ELEMENTS`), refused
    before any work."""
    value = check_int(value, name, low=low)
    check_budget(
        name,
        value * per_unit,
        MAX_ARRAY_ELEMENTS if limit is None else limit,
        what=what or f"numbers sized by {name}",
    )
    return value


def check_static(value, name: str, why: str = "it is read as a Python number"):
    """A value that must be concrete (not traced by ``jit``, ``vmap`` or ``grad``): refused
    with a message naming it, instead of JAX's ConcretizationTypeError (issue 44 item 9)."""
    if is_traced(value):
        expected(name, f"a concrete number, not a traced value ({why})", "= a tracer")
    return value


def check_formula_count(value, name: str, *, low: int = 1, what: str = "an integer") -> int:
    """A count that enters a closed form only as a number (n in log n, n − 1 as a power): any
    integer >= ``low`` that a float64 holds (up to 1.8e308) is valid, as no work or memory
    scales with it; a larger one (10**400) is refused here instead of raising OverflowError
    deep inside the formula (issue 44 items 8 and 9)."""
    value = check_int(value, name, low=low)
    if value > int(np.finfo(np.float64).max):
        expected(
            name,
            f"{what} a float64 can hold (<= 1.8e308)",
            f"= an integer of {len(str(value))} digits",
        )
    return value


def check_real_values(x, name: str, *, low: float | None = None, high: float | None = None):
    """A real scalar or array of finite values in [low, high] (either bound optional), for the
    closed forms that broadcast over their arguments: strings, None, complex and boolean inputs
    are refused, NaN and inf too. Lists become arrays; traced values go through ``eqx.error_if``.
    Returns the value as an array (use the returned value)."""
    if isinstance(x, (bool, np.bool_)):
        expected(name, "real numbers", x)
    x = as_array(x, name)
    check_real(x, name)
    kind = _dtype(x)
    if not (jnp.issubdtype(kind, jnp.floating) or jnp.issubdtype(kind, jnp.integer)):
        raise ValueError(f"{name}: expected real numbers, got dtype {kind}")
    bounds = [f">= {low:g}"] if low is not None else []
    bounds += [f"<= {high:g}"] if high is not None else []
    what = "finite values" + (" " + " and ".join(bounds) if bounds else "")
    if is_traced(x):
        ok = jnp.isfinite(x)
        ok = ok & (x >= low) if low is not None else ok
        ok = ok & (x <= high) if high is not None else ok
        return eqx.error_if(x, ~jnp.all(ok), f"{name}: expected {what}")
    values = np.asarray(x)
    ok = np.isfinite(values)
    ok = ok & (values >= low) if low is not None else ok
    ok = ok & (values <= high) if high is not None else ok
    if not np.all(ok):
        expected(name, what, float(values[~ok].ravel()[0]))
    return x


def check_beta_above_one(beta, why: str = "the staircase uses log β") -> float:
    """β a finite real scalar > 1 (formulas with log β), as a Python float."""
    beta = float(check_beta(beta, positive=True))
    if not beta > 1:
        expected("beta", f"a finite scalar > 1 ({why})", beta)
    return beta


# ---------------------------------------------------------------------------------------------
# Array-likes at the boundary, objects where an instance is expected.


def as_array_like(value, name: str):
    """A Python list or tuple (an array-like, as JAX calls it) becomes an array, checked by
    :func:`as_array`; anything else is returned as it came (the callee checks it). This is the
    conversion at a public boundary: ``F(0.0, x.tolist())`` works as ``F(0.0, x)`` does."""
    if isinstance(value, (list, tuple)):
        return as_array(value, name)
    return value


def converting_array_likes(method, names=("x",)):
    """``method`` with its arguments ``names`` converted by :func:`as_array_like` when they are
    lists or tuples (positional or keyword). Used by the base classes (fields, statistics) so
    that every subclass's ``__call__`` accepts array-likes without repeating the conversion."""
    if getattr(method, "_converts_array_likes", False):
        return method
    try:
        params = list(inspect.signature(method).parameters)
    except (TypeError, ValueError):
        return method
    positions = {name: params.index(name) for name in names if name in params}
    if not positions:
        return method

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if any(isinstance(a, (list, tuple)) for a in args) or kwargs:
            args = list(args)
            for name, index in positions.items():
                if index < len(args):
                    args[index] = as_array_like(args[index], name)
                elif name in kwargs:
                    kwargs[name] = as_array_like(kwargs[name], name)
        return method(*args, **kwargs)

    wrapper._converts_array_likes = True
    return wrapper


def accepts_array_likes(*names):
    """Decorator form of :func:`converting_array_likes`: ``@accepts_array_likes("x", "y")``."""
    return functools.partial(converting_array_likes, names=names)


def convert_array_likes_in_subclass(cls, methods, names=("x",)):
    """For ``__init_subclass__``: wrap the concrete ``methods`` a subclass defines with
    :func:`converting_array_likes` (abstract methods are left alone)."""
    for method_name in methods:
        method = cls.__dict__.get(method_name)
        if method is None or not callable(method):
            continue
        if getattr(method, "__isabstractmethod__", False):
            continue
        setattr(cls, method_name, converting_array_likes(method, names))


def _class_name(cls) -> str:
    module = getattr(cls, "__module__", "") or ""
    top = module.split(".")[0]
    public = {"attnflow": "attnflow", "diffrax": "diffrax", "optimistix": "optimistix"}
    return f"{public[top]}.{cls.__name__}" if top in public else cls.__name__


def check_instance(value, name: str, cls, hint: str = "", *, allow_none: bool = False):
    """An instance of ``cls`` (a class or a tuple of classes). A class passed instead of an
    instance (``adjoint=StoredStepAdjoint``), a string (``solver='tsit5'``) and any other object
    are refused with the one message format, saying what to pass (``hint``)."""
    if value is None and allow_none:
        return None
    if isinstance(value, cls):
        return value
    classes = cls if isinstance(cls, tuple) else (cls,)
    what = " or ".join(f"an instance of {_class_name(c)}" for c in classes)
    if isinstance(value, type):
        if issubclass(value, classes):
            raise ValueError(
                f"{name}: expected {what}, got the class {_class_name(value)} itself; pass an "
                f"instance, e.g. {value.__name__}()"
            )
        expected(name, what, f"= the class {_class_name(value)}", hint)
    if isinstance(value, str):
        expected(name, what + " (an object, not its name)", value, hint)
    expected(name, what, f"= {type(value).__name__} {value!r}"[:200], hint)


def check_field_callable(field, name: str = "field", *, allow_none: bool = False):
    """A vector field: called as ``field(t, x, args)``. A class (``SelfAttention`` instead of
    ``SelfAttention(1.0)``), a string or a number, and a callable whose signature cannot take
    (t, x, args), are refused before anything is traced."""
    hint = "e.g. attnflow.SelfAttention(1.0), or a function f(t, x, args)"
    if isinstance(field, type):
        raise ValueError(
            f"{name}: expected a vector field called as {name}(t, x, args), got the class "
            f"{_class_name(field)} itself; pass an instance, {hint}"
        )
    if field is None and allow_none:
        return None
    if not callable(field):  # strings, numbers, None (an isinstance test costs more here)
        what = "a vector field or None" if allow_none else "a vector field"
        expected(name, f"{what} (called as field(t, x, args))", field, hint)
    # The signature of an object's __call__ depends on its class only: checked once per class
    # (a solve's checks stay a few microseconds), functions each time.
    if inspect.isfunction(field) or inspect.ismethod(field):
        signature = _call_signature(field)
        ok = signature is None or _takes_three(signature)
    else:
        ok, signature = _class_takes_three(type(field))
    if not ok:
        raise ValueError(
            f"{name}: expected a vector field called as {name}(t, x, args), got a callable "
            f"with signature {signature}; wrap it, e.g. lambda t, x, args: f(x)"
        )
    return field


def _call_signature(function):
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None  # a builtin or C callable: taken on trust


@functools.lru_cache(maxsize=512)
def _class_takes_three(cls):
    """(whether instances of ``cls`` can be called as f(t, x, args), the signature)."""
    try:
        signature = inspect.signature(cls.__call__)
    except (TypeError, ValueError):
        return True, None
    parameters = list(signature.parameters.values())[1:]  # without self
    signature = signature.replace(parameters=parameters)
    return _takes_three(signature), signature


def _takes_three(signature) -> bool:
    try:
        signature.bind(0.0, None, None)
    except TypeError:
        return False
    return True


def check_dtype_option(dtype, name: str = "dtype", *, allowed=SUPPORTED_DTYPES):
    """A floating dtype option: float32 or float64 (None is returned as None). Strings that
    are not a dtype, float16 and integer dtypes are refused."""
    if dtype is None:
        return None
    try:
        value = jnp.dtype(dtype)
    except TypeError:
        expected(name, f"a dtype among {', '.join(allowed)}", dtype)
    if value.name not in allowed:
        expected(name, f"a dtype among {', '.join(allowed)}", f"= {value.name}")
    return value


def check_seed(seed, name: str = "seed"):
    """A NumPy seed: a non-negative integer (or None)."""
    if seed is None:
        return None
    return check_int(seed, name, low=0)


@contextlib.contextmanager
def public_names(mapping: dict, note: str = ""):
    """Errors of an inner call in the user's terms: a ``ValueError`` raised inside the block
    whose message starts with an internal argument name (a key of ``mapping``, e.g. ``"x"`` of a
    helper called with the user's ``x0``) is re-raised with the public name (the value) in its
    place, and ``note`` appended. The message is otherwise kept. Other errors pass unchanged."""
    try:
        yield
    except ValueError as error:
        text = str(error)
        for inner, outer in mapping.items():
            match = re.match(rf"{re.escape(inner)}(?=(\s*\([^)]*\))?\s*[:=\[])", text)
            if match:
                message = outer + text[match.end() :] + (f" ({note})" if note else "")
                raise type(error)(message) from error
        raise


def check_angles(theta, name: str = "theta0", *, distinct: bool = False) -> np.ndarray:
    """Finite real angles on the circle, shape (n,) with n >= 2, as a floating NumPy array.
    With ``distinct``, two angles equal modulo 2π are refused (the pair models' merge time of a
    zero gap is undefined: the two tokens are one cluster already), naming the two tokens."""
    theta = np.asarray(check_real(as_array(theta, name), name))
    if theta.dtype.kind not in "iuf":
        expected(name, "real angles", f"= an array of dtype {theta.dtype}")
    if theta.ndim != 1 or theta.shape[0] < 2:
        expected(name, "angles of shape (n,) with n >= 2", f"= shape {theta.shape}")
    if theta.dtype.kind != "f":
        theta = theta.astype(float)
    if not np.all(np.isfinite(theta)):
        expected(name, "finite angles", "= NaN or inf")
    if distinct:
        wrapped = np.mod(theta, 2 * np.pi)
        order = np.argsort(wrapped, kind="stable")
        same = np.flatnonzero(np.diff(wrapped[order]) == 0)
        if same.size:
            i, j = sorted(int(k) for k in order[same[0] : same[0] + 2])
            raise ValueError(
                f"{name}: expected distinct angles (mod 2π), got {name}[{i}] = "
                f"{float(theta[i])!r} and {name}[{j}] = {float(theta[j])!r}: two tokens at one "
                "angle are one cluster already; merge them into one token"
            )
    return theta


def failed_solves_message(
    what: str, failed: int, total: int, t_end, max_steps, *, normalization, dtype
) -> str:
    """Why a batch of solves (a phase diagram) did not reach its end: the step cap, or, with
    normalization='n', e^(β⟨Qx, Kx⟩) overflowing the dtype; or NaN/inf in the weights."""
    limit = 88 if jnp.dtype(dtype) == jnp.float32 else 709
    overflow = (
        f"with normalization='n' the field multiplies by e^(β⟨Qx, Kx⟩), which overflows "
        f"{jnp.dtype(dtype).name} once β⟨Qx, Kx⟩ > {limit} (use float64, a smaller β or the "
        "softmax normalisation); "
        if normalization == "n"
        else ""
    )
    return (
        f"{what}: {failed} of {total} solves did not reach t = {t_end} within max_steps = "
        f"{max_steps}: {overflow}if the field is finite, raise max_steps or loosen rtol/atol"
    )


@contextlib.contextmanager
def reading_file(path, name: str = "source", what: str = "file"):
    """Reading a user's file: a corrupt or unreadable file raises ``ValueError`` that names the
    argument and the file (whatever the reader raised: JSON, safetensors, tokenizers, OS)."""
    try:
        yield
    except ValueError as error:
        if str(error).startswith(f"{name}:"):
            raise
        raise ValueError(f"{name}: could not read the {what} {path}: {error}") from error
    except Exception as error:  # noqa: BLE001 - a third-party reader's own exception types
        raise ValueError(
            f"{name}: could not read the {what} {path}: {type(error).__name__}: {error}"
        ) from error


def check_curve(x, name_x: str, **ys):
    """Data of a curve: ``x`` and each of ``ys`` (name=values; None is skipped) real, finite,
    1-d, of one length (lists converted). Returns NumPy float arrays, x first, then the ``ys``
    in order (None stays None)."""
    x = np.asarray(check_real_values(x, name_x), float)
    if x.ndim != 1:
        expected(name_x, "a 1-d array of times", f"= shape {x.shape}")
    out = [x]
    for name, values in ys.items():
        if values is None:
            out.append(None)
            continue
        values = np.asarray(check_real_values(values, name), float)
        if values.shape != x.shape:
            expected(name, f"shape {x.shape} to match {name_x}", f"= shape {values.shape}")
        out.append(values)
    return out


def _tracer_kinds(value) -> list[str]:
    """The transformations a value is traced by, outermost first (JVPTracer, LinearizeTracer,
    BatchTracer, ...), following each tracer's primal."""
    kinds = []
    while isinstance(value, jax.core.Tracer) and len(kinds) < 32:
        kinds.append(type(value).__name__)
        value = getattr(value, "primal", getattr(value, "val", None))
    return kinds


def check_reverse_mode_only(tree, name: str, what: str):
    """Refuse, at trace time, forward-mode differentiation (``jax.jvp``, ``jax.jacfwd``,
    ``jax.hessian``) and second reverse derivatives of an operation that supports one reverse
    pass only: JAX's own error comes late (after the reverse pass is traced: 40 s for a Hessian)
    and does not say what to use. Sees transformations applied outside a ``jit`` boundary."""
    for leaf in jax.tree.leaves(tree):
        kinds = _tracer_kinds(leaf)
        if "JVPTracer" in kinds:
            raise ValueError(
                f"{name}: {what} supports reverse mode only (jax.grad, jax.vjp, jax.jacrev), got "
                "forward mode (jax.jvp, jax.jacfwd or jax.hessian); use "
                "adjoint=diffrax.DirectAdjoint() or diffrax.ForwardMode(), or "
                "solve(..., differentiable_twice=True)"
            )
        if kinds.count("LinearizeTracer") >= 2:
            raise ValueError(
                f"{name}: {what} supports one reverse pass only, got a second derivative "
                "(jax.grad of jax.grad); use adjoint=diffrax.DirectAdjoint(), or "
                "solve(..., differentiable_twice=True)"
            )


def real_arguments(**domains):
    """Decorator for public closed forms: each named argument is checked by
    :func:`check_real_values` (real, finite; in [low, high] when its domain is a pair
    ``(low, high)``, either None; ``None`` for no bound) before the call, and passed on as
    converted (lists become arrays). An argument whose value is None is left alone (an
    optional). Under ``jit`` the checks go through ``eqx.error_if``. Numbers and arrays are
    passed on as they came, lists as the converted arrays."""

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def checked(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            for name, domain in domains.items():
                value = bound.arguments.get(name)
                if value is not None:
                    low, high = domain if domain is not None else (None, None)
                    checked = check_real_values(value, name, low=low, high=high)
                    # Lists become arrays; numbers and arrays pass as they came (their dtype
                    # and weak typing are the function's business), traced ones checked.
                    if isinstance(value, (list, tuple)) or is_traced(value):
                        bound.arguments[name] = checked
            return function(*bound.args, **bound.kwargs)

        return checked

    return decorate


def check_finite_array(x, name: str, *, allow_negative_infinity: bool = False):
    """A real array (lists converted) whose entries are finite when concrete (−∞ allowed with
    ``allow_negative_infinity``: an additive mask). Traced arrays are left to NaN propagation
    (docs/conventions.md). Returns the (converted) array."""
    x = as_array(x, name)
    check_real(x, name)
    if is_traced(x):
        return x
    values = np.asarray(x)
    bad = np.isnan(values) | (values == np.inf)
    if not allow_negative_infinity:
        bad |= values == -np.inf
    if np.any(bad):
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        allowed = " (−inf, a mask, is allowed)" if allow_negative_infinity else ""
        raise ValueError(
            f"{name}: expected finite values{allowed}, got {values[where]} at index {where}"
        )
    return x


def check_callable(value, name: str, what: str, hint: str = ""):
    """A callable object (an energy, a field, an update): a class passed instead of an instance
    (``energy=InteractionEnergy``, which calling would construct one), a string or a number is
    refused saying what to pass."""
    if isinstance(value, type):
        raise ValueError(
            f"{name}: expected {what}, got the class {_class_name(value)} itself; pass an "
            f"instance, e.g. {value.__name__}(...){'; ' + hint if hint else ''}"
        )
    if isinstance(value, (str, bytes, int, float, complex)) or value is None or not callable(value):
        expected(name, what, value, hint)
    return value


def check_unit_rows(x, name: str = "x"):
    """Points on the sphere of any batch shape (..., d), d >= 2: real, finite, each of unit norm
    (to √ε of the dtype; float64 for Python lists). Returns the (converted) array."""
    x = as_array(x, name)
    check_real(x, name)
    if jnp.ndim(x) < 1 or jnp.shape(x)[-1] < 2:
        expected(name, "points on the sphere of shape (..., d) with d >= 2", x)
    if is_traced(x):
        return x
    values = np.asarray(x)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name}: expected finite points, got NaN or inf")
    tol = unit_norm_tolerance(values.dtype if values.dtype.kind == "f" else np.float64)
    norms = np.linalg.norm(values.astype(np.float64), axis=-1)
    if np.any(np.abs(norms - 1) > tol):
        worst = float(np.ravel(norms)[int(np.argmax(np.abs(np.ravel(norms) - 1)))])
        raise ValueError(
            f"{name}: points must lie on the unit sphere (|x| = 1 to {tol:.1e}), got a norm of "
            f"{worst:.6g}; project them first with attnflow.normalize"
        )
    return x


def hyperparameter(value):
    """A scalar setting kept as given: a Python or NumPy number stays a Python ``float``
    (a hyperparameter: not an array leaf, so ``eqx.filter_grad`` and optax leave it alone, and
    ``eqx.filter_jit`` treats it as static), an array or tracer becomes a JAX array (a parameter:
    trained and differentiated). This is equinox's own convention (``eqx.nn.Dropout(p)``);
    see the conventions page, "Which parameters are trained"."""
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        return float(value)
    return jnp.asarray(value)


# ---------------------------------------------------------------------------------------------
# One argument order across attnflow.theory (docs/conventions.md, "Argument order").


def model_parameters_keyword_only(*old_order: str):
    """Decorator for a closed form whose model parameters (β, n, d, γ, ...) became keyword-only
    after the variables it is evaluated at (a time, an inner product, κ): ``old_order`` names
    the positional parameters of the old signature, in their old order.

    A call that binds to the new signature runs as it is. A call that binds only to the old one
    (``equiangular_time(0.5, 16, 0.9)`` for β, n, ρ₀) returns the old answer, with a
    ``DeprecationWarning`` that spells the new call. A call that binds to neither (positional
    arguments of one order mixed with keywords of the other) is refused with a ``TypeError``
    that names the function and spells the new call; nothing is guessed."""

    def decorate(function):
        new = inspect.signature(function)
        params = new.parameters
        unknown = [name for name in old_order if name not in params]
        if unknown:
            raise AssertionError(f"{function.__name__}: {unknown} not in {new}")
        ordered = [
            params[name].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in old_order
        ]
        rest = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for name, p in params.items()
            if name not in old_order
        ]
        old = new.replace(parameters=ordered + rest)
        positional = [
            name
            for name, p in params.items()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        keywords = [name for name, p in params.items() if p.kind is p.KEYWORD_ONLY]
        usage = (
            f"{function.__name__}({', '.join(positional)}, *, "
            + ", ".join(f"{k}=..." for k in keywords if k in old_order)
            + ")"
        )

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            try:
                new.bind(*args, **kwargs)
            except TypeError:
                pass
            else:
                return function(*args, **kwargs)
            try:
                bound = old.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(
                    f"{function.__name__}: the model's parameters are keyword-only: call "
                    f"{usage}; got {len(args)} positional argument(s) and the keyword(s) "
                    f"{sorted(kwargs)}, which match neither this order nor the old positional "
                    f"order ({', '.join(old_order)}) ({error})"
                ) from None

            def shown(name):
                value = bound.arguments[name]
                plain = isinstance(value, (int, float, str)) and len(repr(value)) < 24
                return repr(value) if plain else name

            spelled = ", ".join(
                [shown(name) for name in positional if name in bound.arguments]
                + [f"{name}={shown(name)}" for name in keywords if name in bound.arguments]
            )
            warnings.warn(
                f"{function.__name__}: positional arguments in the old order "
                f"({', '.join(old_order)}) are deprecated; the model's parameters are "
                f"keyword-only now: {function.__name__}({spelled}) gives the same value",
                DeprecationWarning,
                stacklevel=2,
            )
            return function(**bound.arguments)

        wrapper.__signature__ = new
        return wrapper

    return decorate
