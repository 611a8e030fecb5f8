"""The public layer loops: :func:`layers` (the discrete Transformer, one normalisation scheme
per call) and the entry points that delegate to it, :func:`residual_layers` and
:func:`lie_trotter_layers`."""

from collections.abc import Callable

from jaxtyping import Array, Float

from .._check import check_bool, check_field_callable
from ._scan import check_layer_arguments, residual_update, scan_layers
from ._schemes import (
    NGPT,
    AbstractNormalizationScheme,
    LieTrotter,
    MixLN,
    PeriLN,
    PostLN,
    PreLN,
    ResidualOnly,
    SqrtScaling,
)

_SCHEME_NAMES = (
    "post-LN",
    "pre-LN",
    "peri-LN",
    "nGPT",
    "residual",
    "Lie-Trotter",
    "Mix-LN",
    "sqrt-scaling",
)


def _as_scheme(scheme):
    if isinstance(scheme, AbstractNormalizationScheme):
        return scheme
    schemes = (PostLN, PreLN, PeriLN, NGPT, ResidualOnly, LieTrotter, MixLN, SqrtScaling)
    by_name = dict(zip(_SCHEME_NAMES, schemes, strict=True))
    if scheme not in by_name:
        raise ValueError(
            f"scheme: expected one of {', '.join(map(repr, _SCHEME_NAMES))} or an "
            f"AbstractNormalizationScheme, got {scheme!r}"
        )
    return by_name[scheme]()


def _check_field(field, scheme):
    """The field of :func:`layers`: a vector field; for the Lie-Trotter scheme, a sequence of
    them is checked part by part (``field[0]``, ...), a TransformerBlock as one field."""
    if isinstance(scheme, LieTrotter) and isinstance(field, tuple | list):
        for i, part in enumerate(field):
            check_field_callable(part, f"field[{i}]")
    else:
        check_field_callable(field, "field")


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
    (no normalisation: :func:`attnflow.residual_layers`); ``"Mix-LN"`` post-LN before t = 2.5,
    pre-LN after (:class:`attnflow.MixLN`); ``"sqrt-scaling"`` z ← z + h g(N(z))/√(t + 1)
    (:class:`attnflow.SqrtScaling`); ``"Lie-Trotter"`` for a
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
    _check_field(field, scheme)
    x0, num_layers, step, t0 = check_layer_arguments(
        x0, num_layers, step, t0, unit=scheme.on_sphere, nonzero=scheme.normalizes_stream
    )
    projected = check_bool(projected, "projected")

    def sublayer(part):
        if projected:
            return part
        return lambda t, x, a: residual_update(part, t, x, a)

    update = scheme.step_map(field, sublayer, step, args)
    return scan_layers(update, x0, num_layers, step, t0)


def residual_layers(
    field: Callable, x0: Float[Array, "n d"], num_layers: int, step, *, args=None, t0=0.0
) -> Float[Array, "layers n d"]:
    """The residual network without layer normalisation: explicit Euler on R^d,

        x_{k+1} = x_k + step · field(t0 + k·step, x_k, args),   k = 0 … num_layers − 1.

    The discrete-time counterpart of :class:`attnflow.PureSelfAttention` (9.1), of (9.3)–(9.4)
    and of the hardmax dynamics (9.5) (which is discontinuous, so its discrete-time version is the
    natural definition). Compare :func:`layers`, which normalises after every step.

    Returns:
        (num_layers + 1, n, d): every layer's tokens, x0 first.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> z0 = jnp.array([[1.0, 1.0], [-1.0, 1.0], [0.0, 0.0]])
        >>> af.residual_layers(af.HardmaxRescaledAttention(), z0, 4, 0.25).shape
        (5, 3, 2)
    """
    return layers(field, x0, num_layers, step, scheme="residual", args=args, t0=t0, projected=True)


def lie_trotter_layers(
    attention: Callable,
    feedforward: Callable,
    x0: Float[Array, "n d"],
    num_layers: int,
    step,
    *,
    args=None,
    t0=0.0,
    projected: bool = False,
) -> Float[Array, "layers n d"]:
    """The discrete Transformer with a feed-forward block: Lie–Trotter splitting of (2.8),
    attention first, then the MLP, each a residual step followed by layer normalisation:

        y_k     = normalize(x_k + step · Σ_j a_ij V x_j),
        x_{k+1} = normalize(y_k + step · w σ(a y_k + b)),     t_k = t0 + k·step,

    with the unprojected sublayer outputs (``residual``), as in a post-LN Transformer and in
    :func:`layers`; ``projected=True`` steps with the tangent fields instead. A
    first-order scheme: ``lie_trotter_layers(att, ff, x0, T/h, h)[-1]`` converges to
    ``solve(TransformerBlock(att, ff), x0, T)`` with error O(h).

    Returns:
        (num_layers + 1, n, d): every layer's tokens, x0 first.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> ff = af.FeedForward(jnp.ones((3, 4)), jnp.ones((4, 3)), jnp.zeros(4), jnp.tanh)
        >>> x0 = af.random_tokens(jr.key(0), 5, 3)
        >>> af.lie_trotter_layers(af.SelfAttention(1.0), ff, x0, 10, 0.1).shape
        (11, 5, 3)
    """
    check_field_callable(attention, "attention")
    check_field_callable(feedforward, "feedforward")
    return layers(
        (attention, feedforward),
        x0,
        num_layers,
        step,
        scheme="Lie-Trotter",
        args=args,
        t0=t0,
        projected=projected,
    )


__all__ = ["layers", "lie_trotter_layers", "residual_layers"]
