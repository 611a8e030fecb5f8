"""Where the layer normalisation sits: post-LN (the paper's), pre-LN, peri-LN and nGPT, each as a
discrete layer map on the residual stream and as the flow it discretises.

A scheme acts with a *sublayer* g(t, x, args) -> (n, d): the raw output of a block (e.g. the
attention output Σ_j a_ij V x_j before any projection; see :class:`AttentionSublayer`), always
evaluated at normalised tokens x. With z the residual stream and h the step:

| scheme  | layer map                                 | flow (h → 0)                   |
|---------|-------------------------------------------|--------------------------------|
| post-LN | z ← N(z + h g(z))   (GLPR §2, MATH §1.12) | ż = P^⊥_z g(z), on the sphere  |
| pre-LN  | z ← z + h g(N(z))                         | ż = g(z/|z|)                   |
| peri-LN | z ← z + h N(g(N(z)))                      | ż = N(g(z/|z|))                |
| nGPT    | z ← N(z + h α ⊙ (N(g(z)) − z))            | ż = P^⊥_z (α ⊙ (N(g(z)) − z))  |

N is the row normalisation x ↦ x/|x| (RMSNorm without gain, the paper's idealisation). Pre- and
peri-LN (Xiong et al. 2020; Kim et al. 2025) leave the stream unnormalised: tokens are
x = z/|z| and the radius r = |z| is tracked separately. In polar form the pre-LN flow reads
ẋ_i = P^⊥_{x_i} g_i(x)/r_i, ṙ_i = ⟨x_i, g_i(x)⟩: the directions follow post-LN slowed by
1/r_i. nGPT (Loshchilov et al. 2024) normalises the block output and takes a step of size
α = h·rate towards it on the sphere (its "eigen learning rate", a scalar or a (d,) vector).
"""

import abc
from collections.abc import Callable
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import (
    as_array,
    check_finite_scalar,
    check_nonzero_rows,
    check_positive_scalar,
    check_real_values,
    check_shape_tokens,
    check_tokens,
    expected,
    is_traced,
)
from .._fields._base import AbstractField
from .._solve import integrate
from .._sphere import normalize, project_tangent
from ._scan import check_layer_arguments, check_num_layers, scan_layers


class AttentionSublayer(eqx.Module):
    """The raw output of an attention module as a sublayer g(t, x, args) = Σ_j a_ij V x_j.

    Wraps an attnflow field (its ``residual``: for a MultiHeadAttention the sum over heads,
    paper (2.7)) or anything with an ``attention_output(x)`` method, so that a
    normalisation scheme sees the unprojected output (its radial part is what pre-LN adds to the
    residual radius).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x = af.random_tokens(jr.key(0), 4, 3)
        >>> g = af.AttentionSublayer(af.SelfAttention(1.0))
        >>> g(0.0, x, None).shape
        (4, 3)
    """

    attention: eqx.Module

    def __check_init__(self):
        # A class (SelfAttention for SelfAttention(1.0)) has attention_output too: refused.
        what = "a module with attention_output(x) or an attnflow field"
        value = self.attention
        if isinstance(value, type):
            expected(
                "attention",
                what,
                f"= the class {value.__name__} itself",
                "pass an instance, e.g. attnflow.SelfAttention(1.0)",
            )
        if not isinstance(value, AbstractField) and not hasattr(value, "attention_output"):
            expected("attention", what, value, "e.g. attnflow.SelfAttention(1.0)")

    def __call__(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        if isinstance(self.attention, AbstractField):
            return self.attention.residual(t, x, args)
        return self.attention.attention_output(x)


class AbstractNormalizationScheme(eqx.Module):
    """A placement of layer normalisation: a layer map on the residual stream z and its flow.

    Subclasses implement :meth:`layer`, :meth:`vector_field` and :meth:`step_map` (how a field
    is cut into the sublayers one layer applies) and say whether the stream stays on the sphere
    (``on_sphere``), and :meth:`speed_factor`, the s_i of θ̇_i = (1/s_i) P^⊥_{θ_i} A_i
    (arXiv:2512.01868 eq. (7)) that the flow gives the tokens θ = z/|z|; schemes with one
    sublayer per layer derive from
    :class:`AbstractOneSublayerScheme`, which implements :meth:`step_map`. :meth:`layers`
    iterates the map, :meth:`solve` integrates the flow; :meth:`tokens` and :meth:`radius` read
    tokens x = z/|z| and radii |z| off the stream. ``normalizes_stream`` (default True; False
    for :class:`ResidualOnly`) says whether the layers normalise the stream, so that an
    off-sphere z0 with a zero row is refused up front.
    """

    on_sphere: eqx.AbstractClassVar[bool]
    # Whether layers normalise the stream (read tokens z/|z|): then a zero row of z0 is refused
    # up front, named as the user's argument (``ResidualOnly`` never normalises).
    normalizes_stream: ClassVar[bool] = True

    @abc.abstractmethod
    def layer(
        self, sublayer: Callable, t, z: Float[Array, "n d"], step, args=None
    ) -> Float[Array, "n d"]:
        """One layer z_k ↦ z_{k+1} with step h."""
        raise NotImplementedError

    @abc.abstractmethod
    def vector_field(
        self, sublayer: Callable, t, z: Float[Array, "n d"], args=None
    ) -> Float[Array, "n d"]:
        """ż, the limit (z_{k+1} − z_k)/h as h → 0."""
        raise NotImplementedError

    @abc.abstractmethod
    def step_map(self, field, sublayer: Callable, step, args) -> Callable:
        """The layer map t, z ↦ z' of this scheme for ``field``: ``sublayer(part)`` makes the
        update g of a part of the field (its residual output, or the part itself when
        projected), and :meth:`layer` applies the updates with the step h."""
        raise NotImplementedError

    @abc.abstractmethod
    def speed_factor(
        self, t, z: Float[Array, "n d"], output: Float[Array, "n d"]
    ) -> Float[Array, " n"]:
        r"""The speed factors s_i of normalisation as speed regulation (Karagodin, Ge,
        Polyanskiy, Rigollet, arXiv:2510.22026; Rigollet, arXiv:2512.01868 §6.2 eq. (7)):
        along :meth:`vector_field` the tokens θ_i = z_i/|z_i| move as

            θ̇_i = (1/s_i) P^⊥_{θ_i} A_i,

        where A_i = ``output[i]`` is the sublayer output the scheme reads (at the tokens θ;
        :class:`ResidualOnly` reads it at the stream z).

        Args:
            t: the time (layer).
            z: (n, d) residual stream (the tokens themselves for on-sphere schemes).
            output: (n, d) sublayer output A.

        Returns:
            (n,) speed factors s_i > 0.
        """
        raise NotImplementedError

    def tokens(self, z: Float[Array, "*batch n d"]) -> Float[Array, "*batch n d"]:
        """x = z/|z| (row-wise)."""
        return normalize(z)

    def radius(self, z: Float[Array, "*batch n d"]) -> Float[Array, "*batch n"]:
        """r = |z| (row-wise); identically 1 for on-sphere schemes."""
        return jnp.linalg.norm(z, axis=-1)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Every scheme's speed factor checks its arguments' shapes in one place (issue 44
        # item 3: an output of 1 token for 4, or of R² for tokens in R³, was accepted).
        method = cls.__dict__.get("speed_factor")
        if method is not None and not getattr(method, "__isabstractmethod__", False):
            cls.speed_factor = _checking_speed_factor(method)

    @abc.abstractmethod
    def _parameter_errors(self):
        """(condition, message) pairs for parameters that are traced (a scheme built inside
        ``jit``): checked once at the entry of :meth:`layers` and :meth:`solve` through
        ``eqx.error_if`` on z0, never per step. Concrete parameters are checked at construction;
        a scheme without parameters returns ()."""

    @abc.abstractmethod
    def _check_times(self, t0, t1, names=("t0", "t1")):
        """Refuse a run from t0 to t1 outside the scheme's time domain (concrete times;
        ``names`` are the arguments to name in an error); a scheme defined at every time does
        nothing."""

    def _check_stream(self, z0):
        z0 = check_tokens(z0, "z0", unit=self.on_sphere)
        if not self.on_sphere and self.normalizes_stream:
            z0 = check_nonzero_rows(z0, "z0")
        for bad, message in self._parameter_errors():
            z0 = eqx.error_if(z0, bad, message)
        return z0

    def layers(
        self,
        sublayer: Callable,
        z0: Float[Array, "n d"],
        num_layers: int,
        step,
        *,
        args=None,
        t0=0.0,
    ) -> Float[Array, "L n d"]:
        """Iterate :meth:`layer` ``num_layers`` times from z0 (on the sphere for on-sphere
        schemes; any non-zero rows otherwise). Returns (num_layers + 1, n, d), z0 first.
        Compiled once per scheme, sublayer structure, shape and ``num_layers``."""
        z0 = self._check_stream(z0)
        num_layers = check_num_layers(num_layers)
        if not any(is_traced(v) for v in (t0, step)) and _is_number(t0) and _is_number(step):
            t1 = float(t0) + num_layers * float(step)
            self._check_times(float(t0), t1, names=("t0", "step"))
        return _iterate(self, sublayer, z0, num_layers, step, args, t0)

    def solve(
        self,
        sublayer: Callable,
        z0: Float[Array, "n d"],
        t1,
        *,
        t0=0.0,
        ts=None,
        rtol: float = 1e-6,
        atol: float = 1e-9,
        max_steps: int | None = 4096,
        args=None,
        throw: bool = True,
        adjoint: diffrax.AbstractAdjoint | None = None,
    ) -> diffrax.Solution:
        """Integrate :meth:`vector_field` from z0 with Tsit5 and a PID controller.

        On-sphere schemes go through :func:`attnflow.solve` (right-hand side at z/|z|, saved
        values normalised); the others integrate the residual stream in R^{n×d}. ``sol.ys`` has
        shape (1, n, d), or (len(ts), n, d) with ``ts``. ``adjoint`` is solve's (default
        ``RecursiveCheckpointAdjoint``; e.g. :class:`attnflow.StoredStepAdjoint`).
        """
        # solve's own path: its checks, step cap and failure diagnosis; the field read at z/|z|
        # and the saved states normalised on the sphere only.
        if not any(is_traced(v) for v in (t0, t1)) and _is_number(t0) and _is_number(t1):
            self._check_times(float(t0), float(t1))
        return integrate(
            lambda t, z, a: self.vector_field(sublayer, t, z, a),
            self._check_stream(z0),
            t1,
            on_sphere=self.on_sphere,
            t0=t0,
            ts=ts,
            rtol=rtol,
            atol=atol,
            max_steps=max_steps,
            adjoint=adjoint,
            args=args,
            throw=throw,
        )


def _is_number(value) -> bool:
    """A real scalar that float() reads (the checks that name a bad one come later)."""
    try:
        return jnp.ndim(value) == 0 and bool(jnp.isfinite(float(value)))
    except (TypeError, ValueError):
        return False


def _checking_speed_factor(method):
    def speed_factor(self, t, z, output):
        if not is_traced(t) and _is_number(t):
            self._check_times(float(t), float(t), names=("t", "t"))
        z = check_shape_tokens(z, "z")
        output = as_array(output, "output")
        if jnp.shape(output) != jnp.shape(z):
            expected(
                "output",
                f"the sublayer output A of shape {jnp.shape(z)}, one row per token of z",
                f"= an array of shape {jnp.shape(output)}",
            )
        return method(self, t, z, output)

    speed_factor.__doc__ = method.__doc__
    speed_factor.__name__ = method.__name__
    speed_factor.__qualname__ = method.__qualname__
    return speed_factor


@eqx.filter_jit
def _iterate(scheme, sublayer, z0, num_layers, step, args, t0):
    # The sublayer is called as given (it already is the update g).
    z0, num_layers, step, t0 = check_layer_arguments(
        z0, num_layers, step, t0, unit=scheme.on_sphere
    )
    update = scheme.step_map(sublayer, lambda part: part, step, args)
    return scan_layers(update, z0, num_layers, step, t0)


class AbstractOneSublayerScheme(AbstractNormalizationScheme):
    """A scheme whose layer applies one sublayer g, the update of the whole field: it
    implements :meth:`step_map`, so a new scheme of this kind implements :meth:`layer`,
    :meth:`vector_field`, :meth:`speed_factor` and ``on_sphere`` only."""

    def step_map(self, field, sublayer: Callable, step, args) -> Callable:
        g = sublayer(field)
        return lambda t, z: self.layer(g, t, z, _step_for(step, z), args)


def _step_for(step, z):
    """The step h as it multiplies the stream z: an array step of a narrower or integer dtype
    (a float32 step with float64 tokens) is cast to z's dtype, exactly as implicit promotion
    would, so that the layer also runs under strict dtype promotion. Python numbers (weakly
    typed) and steps at least as wide as z are left as they are."""
    dtype = getattr(step, "dtype", None)
    if dtype is None or getattr(step, "weak_type", False) or dtype == z.dtype:
        return step
    if jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits >= jnp.finfo(z.dtype).bits:
        return step
    return jnp.asarray(step, z.dtype)


def _split(field) -> tuple:
    if isinstance(field, tuple | list):
        return tuple(field)
    if hasattr(field, "attention") and hasattr(field, "feedforward"):
        return (field.attention, field.feedforward)
    raise ValueError(
        "field: the Lie-Trotter scheme splits a TransformerBlock (attention, then feed-forward) "
        f"or a sequence of sublayers, got {type(field).__name__}"
    )


class PostLN(AbstractOneSublayerScheme):
    """Post-LN, the paper's scheme (docs/maths.md §1.12): z ← N(z + h g(z)); flow ż = P^⊥_z g(z).

    The stream is the tokens themselves (on the sphere). With g = attention output this is
    :func:`attnflow.layers` / :func:`attnflow.solve` of the attention field.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 5, 3)
        >>> zs = af.PostLN().layers(af.AttentionSublayer(af.SelfAttention(1.0)), x0, 4, 0.1)
        >>> zs.shape, bool(abs(af.PostLN().radius(zs) - 1).max() < 1e-6)
        ((5, 5, 3), True)
    """

    on_sphere = True

    def speed_factor(self, t, z, output):
        """s_i = 1 (the tokens move at the speed of the attention itself)."""
        return jnp.ones(z.shape[:-1], z.dtype)

    def layer(self, sublayer, t, z, step, args=None):
        return normalize(z + step * sublayer(t, z, args))

    def vector_field(self, sublayer, t, z, args=None):
        return project_tangent(z, sublayer(t, z, args))

    def _parameter_errors(self):
        return ()  # no parameters

    def _check_times(self, t0, t1, names=("t0", "t1")):
        return None  # defined at every time


class PreLN(AbstractOneSublayerScheme):
    """Pre-LN: z ← z + h g(N(z)); flow ż = g(z/|z|). The stream is unnormalised.

    Tokens are z/|z|; the radius r = |z| obeys ṙ_i = ⟨x_i, g_i(x)⟩ (for attention with V = I
    and a single cluster, ṙ = 1), and directions move as ẋ_i = P^⊥_{x_i} g_i(x)/r_i.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> z0 = jnp.array([[1.0, 0.0]])  # one token attends to itself: r_k = 1 + k·h
        >>> zs = af.PreLN().layers(af.AttentionSublayer(af.SelfAttention(1.0)), z0, 3, 0.5)
        >>> af.PreLN().radius(zs)[:, 0].tolist()
        [1.0, 1.5, 2.0, 2.5]
    """

    on_sphere = False

    def speed_factor(self, t, z, output):
        """s_i = r_i = |z_i| (the radius grows, ṙ_i = ⟨θ_i, A_i⟩, and slows the tokens)."""
        return jnp.linalg.norm(z, axis=-1)

    def layer(self, sublayer, t, z, step, args=None):
        return z + step * sublayer(t, normalize(z), args)

    def vector_field(self, sublayer, t, z, args=None):
        return sublayer(t, normalize(z), args)

    def _parameter_errors(self):
        return ()  # no parameters

    def _check_times(self, t0, t1, names=("t0", "t1")):
        return None  # defined at every time


class PeriLN(AbstractOneSublayerScheme):
    """Peri-LN: normalise both the block input and its output, z ← z + h N(g(N(z)));
    flow ż = N(g(z/|z|)). The stream is unnormalised and each radius grows at speed ≤ 1.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> z0 = af.random_tokens(jr.key(0), 5, 3)
        >>> zs = af.PeriLN().layers(af.AttentionSublayer(af.SelfAttention(1.0)), z0, 10, 0.1)
        >>> bool((af.PeriLN().radius(zs[-1]) <= 1 + 10 * 0.1 + 1e-6).all())
        True
    """

    on_sphere = False

    def speed_factor(self, t, z, output):
        """s_i = r_i |A_i| (the output is normalised before it is added; ṙ_i ≤ 1)."""
        return jnp.linalg.norm(z, axis=-1) * jnp.linalg.norm(output, axis=-1)

    def layer(self, sublayer, t, z, step, args=None):
        return z + step * normalize(sublayer(t, normalize(z), args))

    def vector_field(self, sublayer, t, z, args=None):
        return normalize(sublayer(t, normalize(z), args))

    def _parameter_errors(self):
        return ()  # no parameters

    def _check_times(self, t0, t1, names=("t0", "t1")):
        return None  # defined at every time


class NGPT(AbstractOneSublayerScheme):
    """nGPT's normalised step: z ← N(z + h·rate ⊙ (N(g(z)) − z)) on the sphere, α = h·rate.

    Flow: ż = P^⊥_z (rate ⊙ (N(g(z)) − z)); with a scalar rate this is rate·P^⊥_z N(g(z)),
    the attention direction at unit speed per token (a token-wise time change of post-LN).

    Args:
        rate: scalar or (d,) vector of per-coordinate step rates (nGPT's eigen learning rate
            divided by the step).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 5, 3)
        >>> zs = af.NGPT().layers(af.AttentionSublayer(af.SelfAttention(1.0)), x0, 4, 0.1)
        >>> bool(abs(af.NGPT().radius(zs) - 1).max() < 1e-6)
        True
    """

    rate: Float[Array, ""] | Float[Array, " d"]
    on_sphere = True

    def __init__(self, rate=1.0):
        # Real, finite (strings, None, bools and inf refused; issue 44 item 3), then > 0.
        rate = check_real_values(rate, "rate")
        rate = jnp.asarray(rate, dtype=jnp.result_type(float))
        if rate.ndim > 1:
            raise ValueError(f"rate: expected a scalar or a (d,) vector, got shape {rate.shape}")
        if not isinstance(rate, jax.core.Tracer) and not bool(jnp.all(rate > 0)):
            raise ValueError(f"rate: expected positive step rates, got {rate}")
        self.rate = rate

    def _parameter_errors(self):
        if not is_traced(self.rate):
            return ()
        return ((~jnp.all(self.rate > 0), "rate: expected positive step rates"),)

    def _rate(self, z):
        rate = self.rate.astype(z.dtype)
        if rate.ndim == 0:
            return rate
        if rate.shape[0] != z.shape[-1]:
            raise ValueError(
                f"rate: a vector rate must have the token dimension d = "
                f"{z.shape[-1]}, got shape {rate.shape}"
            )
        return rate[None, :]

    def speed_factor(self, t, z, output):
        """s_i = |A_i|/rate for a scalar rate (each token moves at speed ≤ rate). A vector rate
        is not of the form of eq. (7) (it rotates the direction of A) and is refused."""
        if self.rate.ndim != 0:
            expected("rate", "a scalar rate (eq. (7) needs one speed per token)", self.rate)
        return jnp.linalg.norm(output, axis=-1) / self.rate.astype(z.dtype)

    def layer(self, sublayer, t, z, step, args=None):
        return normalize(z + step * self._rate(z) * (normalize(sublayer(t, z, args)) - z))

    def vector_field(self, sublayer, t, z, args=None):
        return project_tangent(z, self._rate(z) * (normalize(sublayer(t, z, args)) - z))

    def _check_times(self, t0, t1, names=("t0", "t1")):
        return None  # defined at every time


class ResidualOnly(AbstractOneSublayerScheme):
    """No normalisation: z ← z + h g(z), explicit Euler on R^{n×d}; flow ż = g(z).

    The residual network of pure self-attention (paper (9.1), (9.3)–(9.5)):
    :func:`attnflow.residual_layers` is ``layers(field, z0, L, h, scheme="residual",
    projected=True)``.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> z0 = jnp.array([[1.0, 0.0]])
        >>> g = lambda t, z, args: z  # ż = z: z_k = (1 + h)^k
        >>> af.layers(g, z0, 2, 0.5, scheme="residual")[:, 0, 0].tolist()
        [1.0, 1.5, 2.25]
    """

    on_sphere = False
    normalizes_stream = False

    def speed_factor(self, t, z, output):
        """s_i = r_i = |z_i|, with A read at the stream z, not at the tokens (no normalisation:
        for attention the logits see r_i r_j⟨θ_i, θ_j⟩, an inverse temperature that grows
        with the radii)."""
        return jnp.linalg.norm(z, axis=-1)

    def layer(self, sublayer, t, z, step, args=None):
        return z + step * sublayer(t, z, args)

    def vector_field(self, sublayer, t, z, args=None):
        return sublayer(t, z, args)

    def _parameter_errors(self):
        return ()  # no parameters

    def _check_times(self, t0, t1, names=("t0", "t1")):
        return None  # defined at every time


class LieTrotter(AbstractNormalizationScheme):
    """Lie–Trotter splitting of a block with several sublayers (attention, then perceptron),
    each a post-LN step: y = N(z + h g_1(z)), z' = N(y + h g_2(y)); flow ż = Σ_k P^⊥_z g_k(z).

    ``sublayer`` is a sequence of sublayers; :func:`attnflow.layers` splits a
    :class:`attnflow.TransformerBlock` into (attention, feedforward) for it. A first-order scheme:
    it converges to ``solve(TransformerBlock(att, ff), x0, T)`` with error O(h).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> ff = af.FeedForward(jnp.ones((3, 4)), jnp.ones((4, 3)), jnp.zeros(4), jnp.tanh)
        >>> block = af.TransformerBlock(af.SelfAttention(1.0), ff)
        >>> x0 = af.random_tokens(jr.key(0), 5, 3)
        >>> af.layers(block, x0, 10, 0.1, scheme="Lie-Trotter").shape
        (11, 5, 3)
    """

    on_sphere = True

    def step_map(self, field, sublayer: Callable, step, args) -> Callable:
        parts = tuple(sublayer(part) for part in _split(field))
        return lambda t, z: self.layer(parts, t, z, _step_for(step, z), args)

    def speed_factor(self, t, z, output):
        """s_i = 1, with A the sum of the sublayer outputs (the flow is post-LN's of the sum)."""
        return jnp.ones(z.shape[:-1], z.dtype)

    def layer(self, sublayer, t, z, step, args=None):
        for g in sublayer:
            z = normalize(z + step * g(t, z, args))
        return z

    def vector_field(self, sublayer, t, z, args=None):
        return sum(project_tangent(z, g(t, z, args)) for g in sublayer)

    def _parameter_errors(self):
        return ()  # no parameters

    def _check_times(self, t0, t1, names=("t0", "t1")):
        return None  # defined at every time


class MixLN(AbstractOneSublayerScheme):
    """Mix-LN (Li, Yin, Liu, arXiv:2412.13795), as idealised in arXiv:2510.22026: post-LN for
    the layers before ``switch_time``, pre-LN after it,

        z ← |z| N(z/|z| + h g(z/|z|))  (t < t*),      z ← z + h g(N(z))  (t ≥ t*);

    flow ż = |z| P^⊥_θ g(θ) then ż = g(θ). Speed factor s_i = 1 before t*, r_i after
    (arXiv:2512.01868 eq. (7)). The post-LN phase keeps each radius (from tokens on the
    sphere, r = 1 until t*), so the stream is the pre-LN one started at t* from the post-LN
    tokens. Li et al. give the first ⌊αL⌋ of L layers post-LN with α = 0.25: t* = αT for a
    depth T.

    Args:
        switch_time: t* ≥ 0, the time (layer × step) of the first pre-LN layer; default 2.5
            (α = 0.25 of the survey's Fig. 4 horizon T = 10).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 5, 3)
        >>> zs = af.MixLN(0.3).layers(af.AttentionSublayer(af.SelfAttention(1.0)), x0, 6, 0.1)
        >>> r = af.MixLN(0.3).radius(zs)
        >>> bool(abs(r[:4] - 1).max() < 1e-6), bool((r[-1] > 1).all())
        (True, True)
    """

    switch_time: float = 2.5
    on_sphere = False

    def __check_init__(self):
        value = check_finite_scalar(self.switch_time, "switch_time")
        if not is_traced(value) and float(value) < 0:
            expected("switch_time", "a time t* >= 0", float(value))

    def _parameter_errors(self):
        if not is_traced(self.switch_time):
            return ()
        bad = ~(jnp.isfinite(self.switch_time) & (self.switch_time >= 0))
        return ((bad, "switch_time: expected a finite time t* >= 0"),)

    def _post(self, t):
        return jnp.asarray(t) < self.switch_time

    def speed_factor(self, t, z, output):
        """s_i = 1 before ``switch_time`` (post-LN), r_i = |z_i| after (pre-LN)."""
        r = jnp.linalg.norm(z, axis=-1)
        return jnp.where(self._post(t), jnp.ones_like(r), r)

    def layer(self, sublayer, t, z, step, args=None):
        r = jnp.linalg.norm(z, axis=-1, keepdims=True)
        x = normalize(z)
        g = sublayer(t, x, args)
        return jnp.where(self._post(t), r * normalize(x + step * g), z + step * g)

    def vector_field(self, sublayer, t, z, args=None):
        r = jnp.linalg.norm(z, axis=-1, keepdims=True)
        x = normalize(z)
        g = sublayer(t, x, args)
        return jnp.where(self._post(t), r * project_tangent(x, g), g)

    def _check_times(self, t0, t1, names=("t0", "t1")):
        return None  # defined at every time


class SqrtScaling(AbstractOneSublayerScheme):
    """Pre-LN with the layer's update scaled by 1/√ℓ, layer ℓ = t + offset ("sqrt-scaling" of
    arXiv:2510.22026 and of the survey's Fig. 4, which cites Noci et al., NeurIPS 2022, for
    residual branches scaled with the depth, and gives no s_i; LayerNorm-Scaling, Sun et al.
    arXiv:2502.05795):

        z ← z + h g(N(z))/√(t + offset);      flow ż = g(z/|z|)/√(t + offset).

    Speed factor s_i = r_i √(t + offset) (arXiv:2512.01868 eq. (7)); ṙ_i = ⟨θ_i, A_i⟩/√(t +
    offset), so r grows like √t and s like t once the tokens agree. Convention: with one
    layer per unit time (h = 1) layer k = 0, 1, … is scaled by 1/√(k + 1), the 1/√ℓ of
    LayerNorm-Scaling for ℓ = 1, 2, …; Sun et al. scale the normalised *input* of the block,
    which for attention also divides β by ℓ; the speed-regulation reading scales the update.
    Against the survey's Fig. 4 (docs/survey.md §6.2) this reading follows the published curve
    up to t ≈ 4 and is slower after it: that curve is pre-LN's at about 0.65 t, a constant
    factor, where 1/√(t + 1) gives 2(√(t + 1) − 1).

    Args:
        offset: the layer index at t = 0 (> 0); default 1.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> z0 = jnp.array([[1.0, 0.0]])  # one token: r_{k+1} = r_k + h/√(t_k + 1)
        >>> zs = af.SqrtScaling().layers(af.AttentionSublayer(af.SelfAttention(1.0)), z0, 2, 3.0)
        >>> af.SqrtScaling().radius(zs)[:, 0].tolist()
        [1.0, 4.0, 5.5]
    """

    offset: float = 1.0
    on_sphere = False

    def __check_init__(self):
        check_positive_scalar(self.offset, "offset", what="layer offset")

    def _parameter_errors(self):
        if not is_traced(self.offset):
            return ()
        bad = ~(jnp.isfinite(self.offset) & (self.offset > 0))
        return ((bad, "offset: expected a finite layer offset > 0"),)

    def _check_times(self, t0, t1, names=("t0", "t1")):
        # The layer index t + offset must stay > 0 on the whole run (1/√(t + offset)); refused
        # before any work (issue 44 items 3 and 11: NaN, or a failed solve after 12-21 s).
        if is_traced(self.offset):
            return
        low = min(t0, t1)
        if not low + float(self.offset) > 0:
            name = names[0] if t0 <= t1 else names[1]
            expected(
                name,
                f"times with t + offset > 0 (the layer index ℓ = t + offset of 1/√ℓ; offset = "
                f"{float(self.offset):g})",
                low,
            )

    def _scale(self, t, z):
        return jax.lax.rsqrt(jnp.asarray(t + self.offset, z.dtype))

    def speed_factor(self, t, z, output):
        """s_i = r_i √(t + offset)."""
        return jnp.linalg.norm(z, axis=-1) / self._scale(t, z)

    def layer(self, sublayer, t, z, step, args=None):
        return z + step * self._scale(t, z) * sublayer(t, normalize(z), args)

    def vector_field(self, sublayer, t, z, args=None):
        return self._scale(t, z) * sublayer(t, normalize(z), args)


__all__ = [
    "AbstractNormalizationScheme",
    "AbstractOneSublayerScheme",
    "AttentionSublayer",
    "LieTrotter",
    "MixLN",
    "NGPT",
    "PeriLN",
    "PostLN",
    "PreLN",
    "ResidualOnly",
    "SqrtScaling",
]
