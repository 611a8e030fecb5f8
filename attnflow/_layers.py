"""Discrete time: the one layer iterator every layer scheme shares, and the paper's discrete
Transformer :func:`layers`."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._check import check_bool, check_finite_scalar, check_int, check_tokens


def check_num_layers(num_layers) -> int:
    """A non-negative integer number of layers (Python or NumPy; 2.5 and "3" are refused)."""
    return check_int(num_layers, "num_layers", low=0)


def check_layer_arguments(x0, num_layers, step, t0, *, unit: bool):
    """The arguments every layer loop shares (:func:`iterate_layers`, :func:`layers` and the
    loops built on it), checked in one place: (n, d) finite tokens x0 (of unit norm when
    ``unit``), an integer ``num_layers`` >= 0, a finite ``step`` and ``t0``. Returns them
    checked (traced values wrapped with ``eqx.error_if``: use the returned values)."""
    x0 = check_tokens(x0, "x0", unit=unit)
    num_layers = check_num_layers(num_layers)
    return x0, num_layers, check_finite_scalar(step, "step"), check_finite_scalar(t0, "t0")


def _scan_layers(update: Callable, x0, num_layers: int, step, t0):
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

    The scan under the one layer loop :func:`layers` (which :func:`attnflow.lie_trotter_layers`,
    :func:`attnflow.residual_layers` and every normalisation scheme's ``layers`` call).

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
    return _scan_layers(update, x0, num_layers, step, t0)


def residual_update(field: Callable, t, x, args):
    """The update a residual block adds: ``field.residual`` (the unprojected attention output for
    attention fields) where the field has one, else the field itself."""
    residual = getattr(field, "residual", None)
    return field(t, x, args) if residual is None else residual(t, x, args)


_SCHEME_NAMES = ("post-LN", "pre-LN", "peri-LN", "nGPT", "residual", "Lie-Trotter")


def _as_scheme(scheme):
    from ._normalization_schemes import (
        NGPT,
        AbstractNormalizationScheme,
        LieTrotter,
        PeriLN,
        PostLN,
        PreLN,
        ResidualOnly,
    )

    if isinstance(scheme, AbstractNormalizationScheme):
        return scheme
    by_name = dict(
        zip(_SCHEME_NAMES, (PostLN, PreLN, PeriLN, NGPT, ResidualOnly, LieTrotter), strict=True)
    )
    if scheme not in by_name:
        raise ValueError(
            f"scheme: expected one of {', '.join(map(repr, _SCHEME_NAMES))} or an "
            f"AbstractNormalizationScheme, got {scheme!r}"
        )
    return by_name[scheme]()


def layers(
    field: Callable,
    x0: Float[Array, "n d"],
    num_layers: int,
    step,
    *,
    scheme="post-LN",
    args=None,
    t0=0.0,
    projected: bool = False,
) -> Float[Array, "layers n d"]:
    r"""The discrete Transformer: the one layer loop, with the normalisation ``scheme``.

    The default, post-LN, is the paper's (GLPR §2): a residual step, then normalise,

        x_{k+1} = normalize(x_k + step · Σ_j a_ij V x_j),   k = 0 … num_layers − 1,

    with the *unprojected* attention output, as in the authors' code, in simuformer and in a real
    post-LN Transformer. V maps column vectors, x_j ↦ V x_j, as in the authors' ``sphere.py``.
    Their ``phase-diagrams.py`` multiplies the rows of X from the right by its matrix V_r
    (X ↦ A X V_r), which is x_j ↦ V_rᵀ x_j: pass V = V_rᵀ to reproduce it (tested over 300
    layers). For an attention field the update g is
    ``field.residual``; for a :class:`attnflow.PiecewiseConstant` stack, the current piece's; for a
    :class:`attnflow.TransformerBlock`, attention plus perceptron; for any other field (e.g. a
    :class:`attnflow.GradientFlow`) the field itself, at t_k = t0 + k·step.

    Schemes (a name or an :class:`attnflow.AbstractNormalizationScheme`; docs/maths.md §1.13):
    ``"post-LN"`` z ← N(z + h g(z)); ``"pre-LN"`` z ← z + h g(N(z)); ``"peri-LN"``
    z ← z + h N(g(N(z))); ``"nGPT"`` z ← N(z + h (N(g(z)) − z)); ``"residual"`` z ← z + h g(z)
    (no normalisation: :func:`attnflow.residual_layers`); ``"Lie-Trotter"`` for a
    :class:`attnflow.TransformerBlock`, a post-LN step with the attention, then one with the
    perceptron (:func:`attnflow.lie_trotter_layers`). Off-sphere schemes return the residual
    stream z (tokens z/|z|).

    ``projected=True`` steps with the tangent field instead of the residual update, e.g.
    x_{k+1} = normalize(x_k + step · field(t_k, x_k, args)): the projected retraction of the
    flow, the better discretisation of the ODE (its update is tangent, so the normalisation
    only corrects at second order). Both converge to :func:`attnflow.solve` at order 1 as
    step → 0 with num_layers · step fixed.

    Args:
        field: an attnflow field, or any callable ``field(t, x, args)``.
        x0: (n, d) initial tokens on the unit sphere (any non-zero rows for off-sphere schemes).
        num_layers: number of layers L ≥ 0.
        step: the step h (the residual scaling; layers are time t = k·h).
        scheme: the placement of the normalisation (above); default post-LN.
        args: passed to the field (measure weights for attention fields).
        t0: time of layer 0.
        projected: step with the tangent field instead of the residual update.

    Returns:
        (num_layers + 1, n, d): every layer's tokens (or stream), x0 first.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 8, 3)
        >>> af.layers(af.SelfAttention(1.0), x0, 10, 0.1).shape
        (11, 8, 3)
        >>> af.layers(af.SelfAttention(1.0), x0, 10, 0.1, scheme="pre-LN").shape
        (11, 8, 3)
    """
    scheme = _as_scheme(scheme)
    x0, num_layers, step, t0 = check_layer_arguments(
        x0, num_layers, step, t0, unit=scheme.on_sphere
    )
    projected = check_bool(projected, "projected")

    def sublayer(part):
        if projected:
            return part
        return lambda t, x, a: residual_update(part, t, x, a)

    from ._normalization_schemes import step_map

    update = step_map(scheme, field, sublayer, step, args)
    return _scan_layers(update, x0, num_layers, step, t0)


__all__ = ["layers", "iterate_layers", "check_num_layers", "residual_update"]
