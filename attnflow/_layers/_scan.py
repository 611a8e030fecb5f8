"""The scan under every layer loop: x_{k+1} = update(t_k, x_k), and the arguments every loop
shares, checked in one place."""

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import (
    check_finite_scalar,
    check_nonzero_rows,
    check_size,
    check_tokens,
    inside_engine,
)
from .._fields._base import AbstractField


def check_num_layers(num_layers, per_layer: int = 1) -> int:
    """A non-negative integer number of layers (Python or NumPy; 2.5 and "3" are refused) whose
    returned array, ``per_layer`` numbers a layer (n·d), fits the allocation budget (an absurd
    count such as 10**12 is refused before anything is traced)."""
    return check_size(
        num_layers,
        "num_layers",
        low=0,
        per_unit=per_layer,
        what="numbers in the returned layers (num_layers × n × d)",
    )


def check_layer_arguments(x0, num_layers, step, t0, *, unit: bool, nonzero: bool = False):
    """The arguments every layer loop shares (:func:`iterate_layers`, :func:`attnflow.layers`
    and the loops built on it), checked in one place: (n, d) finite tokens x0 (of unit norm when
    ``unit``; else with non-zero rows when ``nonzero``: the scheme normalises them), an integer
    ``num_layers`` >= 0, a finite ``step`` and ``t0``. Returns them checked (traced values
    wrapped with ``eqx.error_if``: use the returned values)."""
    x0 = check_tokens(x0, "x0", unit=unit)
    if nonzero and not unit:
        x0 = check_nonzero_rows(x0, "x0")
    num_layers = check_num_layers(num_layers, math.prod(x0.shape))
    return x0, num_layers, check_finite_scalar(step, "step"), check_finite_scalar(t0, "t0")


@inside_engine()  # the fields' traced checks are left out of the loop (x0 checked once)
def scan_layers(update: Callable, x0, num_layers: int, step, t0):
    """x_{k+1} = update(t0 + k·step, x_k) for checked arguments; returns (num_layers + 1, n, d),
    x0 first, in x0's dtype."""

    # The layer index k is carried from a Python 0, so it stays weakly typed (as fori_loop's
    # index): t0 + k·step then takes the dtype of t0 and step alone, as with a Python integer k,
    # and mixes no integer array into a float one (strict dtype promotion).
    def one_layer(carry, _):
        x, k = carry
        x_next = update(t0 + k * step, x).astype(x.dtype)
        return (x_next, k + 1), x_next

    _, xs = jax.lax.scan(one_layer, (x0, 0), length=num_layers)
    return jnp.concatenate([x0[None], xs], axis=0)


def iterate_layers(
    update: Callable, x0: Float[Array, "n d"], num_layers: int, step, t0=0.0
) -> Float[Array, "layers n d"]:
    """x_{k+1} = update(t_k, x_k) with t_k = t0 + k·step, k = 0 … num_layers − 1 (``lax.scan``).

    The scan under the one layer loop :func:`attnflow.layers` (which
    :func:`attnflow.lie_trotter_layers`, :func:`attnflow.residual_layers` and every
    normalisation scheme's ``layers`` call).

    Returns:
        (num_layers + 1, n, d): every layer's tokens, x0 first, in x0's dtype.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> af.iterate_layers(lambda t, x: 2 * x, jnp.ones((1, 2)), 3, 0.1)[:, 0, 0].tolist()
        [1.0, 2.0, 4.0, 8.0]
    """
    if not callable(update):
        raise ValueError(f"update: expected a callable (t, x) -> x, got {type(update).__name__}")
    x0, num_layers, step, t0 = check_layer_arguments(x0, num_layers, step, t0, unit=False)
    return scan_layers(update, x0, num_layers, step, t0)


def residual_update(field: Callable, t, x, args):
    """The update a residual block adds: ``field.residual`` for an :class:`AbstractField` (the
    unprojected attention output for attention fields), else the field itself (an
    :class:`AbstractPureField`, which has no projection to leave out, or any callable)."""
    if isinstance(field, AbstractField):
        return field.residual(t, x, args)
    return field(t, x, args)


__all__ = [
    "check_layer_arguments",
    "check_num_layers",
    "iterate_layers",
    "residual_update",
    "scan_layers",
]
