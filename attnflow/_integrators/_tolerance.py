"""The float32 tolerance floor shared by every adaptive solve of the package."""

import jax.numpy as jnp

# The tightest tolerances a float32 solve can honour: the local error estimate of a step is a
# difference of O(h|f|) stage terms, rounded at eps(float32) ≈ 1.2e-7 relative to the state;
# below these floors the controller rejects steps because of rounding, not of truncation.
RTOL_FLOOR_32 = 1e-5
ATOL_FLOOR_32 = 1e-6


def floor_tolerances(rtol, atol, dtype):
    """(rtol, atol) raised to at least (1e-5, 1e-6) for dtypes narrower than float64.

    Python numbers stay Python numbers (``max``); arrays, traced or not, go through
    ``jnp.maximum``. float64 tolerances are returned unchanged.

    Example:
        >>> import jax.numpy as jnp
        >>> from attnflow._integrators._tolerance import floor_tolerances
        >>> floor_tolerances(1e-8, 1e-3, jnp.float32), floor_tolerances(1e-8, 1e-9, jnp.float64)
        ((1e-05, 0.001), (1e-08, 1e-09))
    """
    if jnp.finfo(dtype).bits >= 64:
        return rtol, atol
    if isinstance(rtol, (int, float)) and isinstance(atol, (int, float)):
        return max(rtol, RTOL_FLOOR_32), max(atol, ATOL_FLOOR_32)
    return jnp.maximum(rtol, RTOL_FLOOR_32), jnp.maximum(atol, ATOL_FLOOR_32)
