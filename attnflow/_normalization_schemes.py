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

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._check import check_tokens
from ._fields._base import AbstractField
from ._layers import check_num_layers, layers
from ._solve import _integrate as integrate
from ._sphere import normalize, project_tangent


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
        if not isinstance(self.attention, AbstractField) and not hasattr(
            self.attention, "attention_output"
        ):
            raise ValueError(
                f"attention: expected a module with attention_output(x) or an attnflow field, "
                f"got {type(self.attention).__name__}"
            )

    def __call__(self, t, x: Float[Array, "n d"], args=None) -> Float[Array, "n d"]:
        if isinstance(self.attention, AbstractField):
            return self.attention.residual(t, x, args)
        return self.attention.attention_output(x)


class AbstractNormalizationScheme(eqx.Module):
    """A placement of layer normalisation: a layer map on the residual stream z and its flow.

    Subclasses implement :meth:`layer` and :meth:`vector_field` and say whether the stream stays
    on the sphere (``on_sphere``). :meth:`layers` iterates the map, :meth:`solve` integrates the
    flow; :meth:`tokens` and :meth:`radius` read tokens x = z/|z| and radii |z| off the stream.
    """

    on_sphere: eqx.AbstractClassVar[bool]

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

    def tokens(self, z: Float[Array, "*batch n d"]) -> Float[Array, "*batch n d"]:
        """x = z/|z| (row-wise)."""
        return normalize(z)

    def radius(self, z: Float[Array, "*batch n d"]) -> Float[Array, "*batch n"]:
        """r = |z| (row-wise); identically 1 for on-sphere schemes."""
        return jnp.linalg.norm(z, axis=-1)

    def _check_stream(self, z0):
        return check_tokens(z0, "z0", unit=self.on_sphere)

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
        return _iterate(self, sublayer, z0, check_num_layers(num_layers), step, args, t0)

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


@eqx.filter_jit
def _iterate(scheme, sublayer, z0, num_layers, step, args, t0):
    # The sublayer is called as given (it already is the update g): projected=True.
    return layers(sublayer, z0, num_layers, step, scheme=scheme, args=args, t0=t0, projected=True)


def step_map(scheme, field, sublayer: Callable, step, args) -> Callable:
    """The layer map t, z ↦ z' of ``scheme`` for ``field`` (``sublayer(part)`` makes the update g
    of a field part): one sublayer, or for :class:`LieTrotter` one per part, in turn."""
    if isinstance(scheme, LieTrotter):
        parts = tuple(sublayer(part) for part in _split(field))
        return lambda t, z: scheme.layer(parts, t, z, _step_for(step, z), args)
    g = sublayer(field)
    return lambda t, z: scheme.layer(g, t, z, _step_for(step, z), args)


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


class PostLN(AbstractNormalizationScheme):
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

    def layer(self, sublayer, t, z, step, args=None):
        return normalize(z + step * sublayer(t, z, args))

    def vector_field(self, sublayer, t, z, args=None):
        return project_tangent(z, sublayer(t, z, args))


class PreLN(AbstractNormalizationScheme):
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

    def layer(self, sublayer, t, z, step, args=None):
        return z + step * sublayer(t, normalize(z), args)

    def vector_field(self, sublayer, t, z, args=None):
        return sublayer(t, normalize(z), args)


class PeriLN(AbstractNormalizationScheme):
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

    def layer(self, sublayer, t, z, step, args=None):
        return z + step * normalize(sublayer(t, normalize(z), args))

    def vector_field(self, sublayer, t, z, args=None):
        return normalize(sublayer(t, normalize(z), args))


class NGPT(AbstractNormalizationScheme):
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
        rate = jnp.asarray(rate, dtype=jnp.result_type(float))
        if rate.ndim > 1:
            raise ValueError(f"rate: expected a scalar or a (d,) vector, got shape {rate.shape}")
        if not isinstance(rate, jax.core.Tracer) and not bool(jnp.all(rate > 0)):
            raise ValueError(f"rate: expected positive step rates, got {rate}")
        self.rate = rate

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

    def layer(self, sublayer, t, z, step, args=None):
        return normalize(z + step * self._rate(z) * (normalize(sublayer(t, z, args)) - z))

    def vector_field(self, sublayer, t, z, args=None):
        return project_tangent(z, self._rate(z) * (normalize(sublayer(t, z, args)) - z))


class ResidualOnly(AbstractNormalizationScheme):
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

    def layer(self, sublayer, t, z, step, args=None):
        return z + step * sublayer(t, z, args)

    def vector_field(self, sublayer, t, z, args=None):
        return sublayer(t, z, args)


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

    def layer(self, sublayer, t, z, step, args=None):
        for g in sublayer:
            z = normalize(z + step * g(t, z, args))
        return z

    def vector_field(self, sublayer, t, z, args=None):
        return sum(project_tangent(z, g(t, z, args)) for g in sublayer)


__all__ = [
    "AbstractNormalizationScheme",
    "AttentionSublayer",
    "LieTrotter",
    "NGPT",
    "PeriLN",
    "PostLN",
    "PreLN",
    "ResidualOnly",
    "step_map",
]
