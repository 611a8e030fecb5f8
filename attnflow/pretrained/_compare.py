"""A trained Transformer against attnflow: per-layer clustering statistics of its hidden states
(the paper's Fig. 1) and the attention flow with its trained weights compared layer by layer.

Padding is removed before anything is computed: padded positions are masked out of the trained
model's attention, so dropping them is the same as masking them as keys of the flow's attention
and leaving them out of every statistic.
"""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, Int

from .._check import (
    as_array,
    check_beta,
    check_bool,
    check_delta,
    check_instance,
    check_int,
    check_key,
    check_positive_scalar,
    check_real,
    check_size,
    check_tokens,
    check_tolerance,
    expected,
    is_traced,
)
from .._diagnostics import count_clusters, inner_product_histogram
from .._energy import InteractionEnergy
from .._layers import layers as _layers
from .._solve import solve
from ..measures._losses import squared_mmd
from ..measures._sampling import sliced_wasserstein
from ._attention import attention_stack
from ._load import HiddenStates, PretrainedModel

_MODEL_HINT = "load one with attnflow.pretrained.load_minilm() or attnflow.pretrained.load(path)"

DEFAULT_DELTAS = (0.01, 0.05, 0.1, 0.2)


def unpadded_unit_states(out: HiddenStates) -> tuple[np.ndarray, tuple[str, ...]]:
    """The hidden states of the real tokens (``attention_mask`` True), rows normalised to the
    unit sphere: ((1 + layers, m, d) float64 NumPy, the m token strings).

    Example:
        >>> from attnflow import pretrained
        >>> model = pretrained.load_minilm()  # doctest: +SKIP
        >>> out = model.hidden_states("A short text.", pad_to=16)  # doctest: +SKIP
        >>> pretrained.unpadded_unit_states(out)[0].shape  # doctest: +SKIP
        (7, 6, 384)
    """
    if not isinstance(out, HiddenStates):
        expected("out", "the HiddenStates of PretrainedModel.hidden_states", out)
    mask = np.asarray(out.attention_mask, bool)
    states = np.asarray(out.hidden_states, np.float64)[:, mask]
    states = states / np.linalg.norm(states, axis=-1, keepdims=True)
    tokens = tuple(t for t, keep in zip(out.tokens, mask, strict=True) if keep)
    return states, tokens


class LayerStatistics(eqx.Module, strict=True):
    """Per-layer clustering statistics of unit tokens (made by :func:`layer_statistics`).

    Attributes:
        mean_cosine: (layers,) mean of ⟨x_i, x_j⟩ over i ≠ j.
        clusters: (layers, len(deltas)) :func:`attnflow.count_clusters` at each δ.
        deltas: (len(deltas),) the thresholds δ.
        energy: (layers,) the interaction energy E_β (arXiv:2312.10794, eq. (3.5)).
        relative_energy: (layers,) 2βe^{−β} E_β: 1 exactly when all tokens coincide.
        histogram: (layers, bins) density of ⟨x_i, x_j⟩ over i < j on [−1, 1].
        edges: (bins + 1,) the histogram's bin edges.
    """

    mean_cosine: Float[Array, " layers"]
    clusters: Int[Array, "layers deltas"]
    deltas: Float[Array, " deltas"]
    energy: Float[Array, " layers"]
    relative_energy: Float[Array, " layers"]
    histogram: Float[Array, "layers bins"]
    edges: Float[Array, " edges"]


def _layer_tokens(x, name: str):
    """Real tokens of shape (layers, n, d), as a JAX array."""
    x = check_real(as_array(x, name), name)
    if jnp.ndim(x) != 3:
        raise ValueError(
            f"{name}: expected unit tokens of shape (layers, n, d), got shape {jnp.shape(x)}"
        )
    if not is_traced(x):  # eagerly, before the compiled distances (which would name their x, y)
        layers, n, d = jnp.shape(x)
        check_tokens(jnp.reshape(x, (layers * n, d)), f"{name} (rows of all layers)")
    return jnp.asarray(x)


def _check_statistics_args(deltas, energy_beta, bins):
    """The thresholds δ (a non-empty 1-d sequence, each 0 < δ < 2), β > 0 and the bin count
    of :func:`statistics_of`."""
    energy_beta = float(check_positive_scalar(energy_beta, "energy_beta"))
    bins = check_size(bins, "bins", low=1)
    deltas = check_real(as_array(deltas, "deltas"), "deltas")
    if jnp.ndim(deltas) != 1 or jnp.size(deltas) == 0 or np.asarray(deltas).dtype.kind not in "iuf":
        expected("deltas", "a non-empty 1-d sequence of thresholds", deltas)
    for value in np.asarray(deltas, np.float64):
        check_delta(float(value), "deltas")
    return deltas, energy_beta, bins


@jax.jit
def _cluster_counts(x, deltas):
    per_delta = jax.vmap(count_clusters, in_axes=(None, 0))
    return jax.vmap(per_delta, in_axes=(0, None))(x, deltas)


@eqx.filter_jit
def _energies(energy, x):
    return jax.vmap(energy)(x)


def statistics_of(
    x, *, deltas: Sequence[float] = DEFAULT_DELTAS, energy_beta: float = 1.0, bins: int = 60
) -> LayerStatistics:
    """:class:`LayerStatistics` of unit tokens x of shape (layers, n, d) (e.g. the hidden
    states of :func:`unpadded_unit_states`, or a simulated trajectory).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> from attnflow import pretrained
        >>> x = af.random_tokens(jr.key(0), 5, 3)[None]
        >>> pretrained.statistics_of(x, deltas=[0.1]).clusters.shape
        (1, 1)
    """
    deltas, energy_beta, bins = _check_statistics_args(deltas, energy_beta, bins)
    x = _layer_tokens(x, "x")
    n = x.shape[-2]
    hist, edges = inner_product_histogram(x, bins=bins)
    gram = jnp.einsum("lid,ljd->lij", x, x)
    mean_cosine = (gram.sum(axis=(1, 2)) - jnp.trace(gram, axis1=1, axis2=2)) / (n * (n - 1))
    deltas = jnp.asarray(deltas, x.dtype)
    energy = _energies(InteractionEnergy(energy_beta), x)
    return LayerStatistics(
        mean_cosine=mean_cosine,
        clusters=_cluster_counts(x, deltas),
        deltas=deltas,
        energy=energy,
        relative_energy=2 * energy_beta * np.exp(-energy_beta) * energy,
        histogram=hist,
        edges=edges,
    )


def layer_statistics(
    model,
    text: str,
    *,
    max_length: int | None = None,
    pad_to: int | None = None,
    schedule=None,
    deltas: Sequence[float] = DEFAULT_DELTAS,
    energy_beta: float = 1.0,
    bins: int = 60,
) -> LayerStatistics:
    """Clustering of a trained model's hidden states, layer by layer (arXiv:2312.10794, Fig. 1).

    For the hidden states h_i^(k) of layer k (k = 0: the embedding output) of the real tokens
    (padding dropped), normalised to x_i = h_i / |h_i|: the mean cosine over i ≠ j, the number
    of clusters at each δ (components of the graph ⟨x_i, x_j⟩ ≥ 1 − δ), the interaction energy
    E_β of (3.5) and 2βe^{−β}E_β, and the histogram of ⟨x_i, x_j⟩ over i < j.

    Args:
        model: a :class:`attnflow.pretrained.PretrainedModel` (e.g. :func:`load_minilm`).
        text: the input text.
        max_length: truncate to this many tokens.
        pad_to: right-pad to this length (fixes compiled shapes); padding is masked out.
        schedule: the hidden layers to apply, in order (see :func:`deep_schedule`; e.g. the
            trained stack iterated to 48 layers).
        deltas: the clustering thresholds δ.
        energy_beta: β of the interaction energy.
        bins: histogram bins on [−1, 1].

    Returns:
        :class:`LayerStatistics` with one row per layer (1 + number of layers applied).

    Example:
        >>> from attnflow import pretrained
        >>> model = pretrained.load_minilm()  # doctest: +SKIP
        >>> stats = pretrained.layer_statistics(model, pretrained.paragraph())  # doctest: +SKIP
        >>> stats.mean_cosine.shape  # doctest: +SKIP
        (7,)
    """
    check_instance(model, "model", PretrainedModel, _MODEL_HINT)
    _check_statistics_args(deltas, energy_beta, bins)  # before the forward pass
    out = model.hidden_states(text, max_length=max_length, pad_to=pad_to, schedule=schedule)
    x, _ = unpadded_unit_states(out)
    dtype = out.hidden_states.dtype
    return statistics_of(jnp.asarray(x, dtype), deltas=deltas, energy_beta=energy_beta, bins=bins)


class FlowComparison(eqx.Module, strict=True):
    """A trained model's hidden states against the attention flow (made by
    :func:`compare_with_flow`). Layer k of the model is time t = k of the flow.

    Attributes:
        tokens: the real tokens' strings (padding dropped).
        real: (layers, n, d) the model's normalised hidden states, padding dropped.
        simulated: (layers, n, d) the flow (or discrete layers) from ``real[0]``.
        agreement: (layers,) per-token agreement mean_i ⟨x_i^sim, x_i^real⟩.
        mmd: (layers,) squared MMD with kernel e^{κ(⟨x, y⟩ − 1)}
            (:func:`attnflow.measures.squared_mmd`).
        sliced_wasserstein: (layers,) sliced W₂ (:func:`attnflow.measures.sliced_wasserstein`).
        identity_agreement, identity_mmd, identity_sliced_wasserstein: (layers,) the same for
            the baseline that keeps the embeddings unchanged; a simulation that does not beat
            it has not explained the layers' effect.
        betas: (pieces,) β of each layer's field (1/√d_h, or r_k²/√d_h when rescaled).
    """

    tokens: tuple[str, ...] = eqx.field(static=True)
    real: Float[Array, "layers n d"]
    simulated: Float[Array, "layers n d"]
    agreement: Float[Array, " layers"]
    mmd: Float[Array, " layers"]
    sliced_wasserstein: Float[Array, " layers"]
    identity_agreement: Float[Array, " layers"]
    identity_mmd: Float[Array, " layers"]
    identity_sliced_wasserstein: Float[Array, " layers"]
    betas: Float[Array, " pieces"]


def layer_distances(key, sim, real, kappa: float = 1.0, num_projections: int = 256):
    """Per layer (agreement, MMD², sliced W₂) between unit tokens ``sim`` and ``real``, both
    (layers, n, d): mean_i ⟨y_i, x_i⟩, :func:`attnflow.measures.squared_mmd` with κ and
    :func:`attnflow.measures.sliced_wasserstein` with ``num_projections`` directions drawn from
    ``key``.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> from attnflow import pretrained
        >>> x = af.random_tokens(jr.key(0), 5, 3)[None]
        >>> [float(v[0]) for v in pretrained.layer_distances(jr.key(1), x, x)]
        [1.0, 0.0, 0.0]
    """
    key = check_key(key)
    kappa, num_projections = _check_distance_args(kappa, num_projections)
    sim, real = _layer_tokens(sim, "sim"), _layer_tokens(real, "real")
    if sim.shape != real.shape:
        raise ValueError(f"real: expected the shape of sim {sim.shape}, got {real.shape}")
    return _layer_distances(key, sim, real, kappa, num_projections)


def _check_distance_args(kappa, num_projections):
    kappa = float(check_beta(kappa, positive=True, name="kappa"))
    return kappa, check_size(num_projections, "num_projections", low=1)


@eqx.filter_jit
def _layer_distances(key, sim, real, kappa: float, num_projections: int):
    def one(y, x):
        return (
            jnp.mean(jnp.sum(y * x, axis=-1)),
            squared_mmd(y, x, kappa=kappa),
            sliced_wasserstein(key, y, x, num_projections=num_projections),
        )

    return jax.vmap(one)(sim, real)


@eqx.filter_jit
def _simulate(field, x0, num_layers: int, method: str, rtol, atol):
    if method == "layers":
        return _layers(field, x0, num_layers, 1.0)
    ts = jnp.arange(num_layers + 1, dtype=x0.dtype)
    return solve(field, x0, float(num_layers), ts=ts, rtol=rtol, atol=atol).ys


def compare_with_flow(
    model,
    text: str,
    *,
    layers: Sequence[int] | None = None,
    rescale: bool = False,
    method: str = "solve",
    max_length: int | None = None,
    pad_to: int | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    kappa: float = 1.0,
    num_projections: int = 256,
    key=None,
) -> FlowComparison:
    """Does the attention flow with the model's trained weights reproduce its hidden states?

    From the model's own normalised embeddings x_i(0) = h_i^(0)/|h_i^(0)| (real tokens only:
    padding is dropped, which is how the model masks it), simulate ẋ = Σ_h P_x Σ_j a^h_ij V_h x_j
    with the trained attention of :func:`attention_stack` (per-head Q_h, K_h; output projection
    folded into V_h; biases, feed-forward blocks and LayerNorm gains dropped), one unit of time
    per layer, and compare each layer with the model's normalised hidden states
    (the flow (2.7) of arXiv:2312.10794 with trained, layer-dependent weights).

    Args:
        model: a :class:`attnflow.pretrained.PretrainedModel`.
        text: the input text.
        layers: the trained layers used as pieces, in order (default every layer once; e.g.
            ``[0] * 6`` for one fixed layer).
        rescale: β_k = r_k²/√d_h instead of 1/√d_h, with r_k² the mean squared norm of the
            real hidden states entering layer k (the logit scale the trained layer sees).
        method: ``"solve"`` (the continuous flow, :func:`attnflow.solve`, saved at t = 0 … L)
            or ``"layers"`` (:func:`attnflow.layers` with step 1, the discrete post-LN form).
        max_length: truncate to this many tokens.
        pad_to: right-pad to this length (fixes compiled shapes); padding is masked out.
        rtol: relative tolerance of the solve.
        atol: absolute tolerance of the solve.
        kappa: κ of the MMD kernel e^{κ(⟨x, y⟩ − 1)}.
        num_projections: directions of the sliced Wasserstein distance.
        key: a JAX key for the projections (default ``jax.random.key(0)``).

    Returns:
        :class:`FlowComparison`.

    Example:
        >>> from attnflow import pretrained
        >>> model = pretrained.load_minilm()  # doctest: +SKIP
        >>> cmp = pretrained.compare_with_flow(model, "The cat sat on the mat.")  # doctest: +SKIP
        >>> cmp.agreement.shape  # doctest: +SKIP
        (7,)
    """
    if not isinstance(text, str):
        raise ValueError(
            f"text: expected one string (compare one text at a time; loop over a list of "
            f"texts), got {type(text).__name__}"
        )
    check_instance(model, "model", PretrainedModel, _MODEL_HINT)
    key = _check_compare_args(method, rescale, rtol, atol, kappa, num_projections, key)
    num_layers = model.config.num_hidden_layers
    layers = list(range(num_layers) if layers is None else layers)
    layers = [check_int(k, "layers", low=0, high=num_layers - 1) for k in layers]
    out = model.hidden_states(text, max_length=max_length, pad_to=pad_to)
    real64, tokens = unpadded_unit_states(out)
    dtype = out.hidden_states.dtype
    if not 1 <= len(layers) <= num_layers:
        raise ValueError(
            f"layers: expected 1 to {num_layers} pieces (one per hidden state to compare), "
            f"got {len(layers)}"
        )
    scale = 1.0 / np.sqrt(model.config.head_dim)
    if rescale:
        mask = np.asarray(out.attention_mask, bool)
        r2 = np.mean(np.sum(np.asarray(out.hidden_states, np.float64)[:, mask] ** 2, -1), -1)
        # Layer k reads the states entering it: the output of layer k - 1.
        betas = [float(r2[k] * scale) for k in layers]
    else:
        betas = [float(scale)] * len(layers)
    field = attention_stack(model, layers, beta=betas)
    depth = len(layers)
    real = jnp.asarray(real64[: depth + 1], dtype)
    x0 = real[0]
    sim = _simulate(field, x0, depth, method, rtol, atol)
    sim = sim / jnp.linalg.norm(sim, axis=-1, keepdims=True)
    kappa, num_projections = _check_distance_args(kappa, num_projections)
    ours = layer_distances(key, sim, real, kappa, num_projections)
    identity = layer_distances(key, jnp.broadcast_to(x0, real.shape), real, kappa, num_projections)
    return FlowComparison(
        tokens=tokens,
        real=real,
        simulated=sim,
        agreement=ours[0],
        mmd=ours[1],
        sliced_wasserstein=ours[2],
        identity_agreement=identity[0],
        identity_mmd=identity[1],
        identity_sliced_wasserstein=identity[2],
        betas=jnp.asarray(betas, dtype),
    )


def _check_compare_args(method, rescale, rtol, atol, kappa, num_projections, key):
    """The options of :func:`compare_with_flow`, checked before the forward pass; returns the
    key (default ``jax.random.key(0)``)."""
    if method not in ("solve", "layers"):
        raise ValueError(f"method: expected 'solve' or 'layers', got {method!r}")
    check_bool(rescale, "rescale")
    check_tolerance(rtol, "rtol")
    check_tolerance(atol, "atol")
    _check_distance_args(kappa, num_projections)
    return jr.key(0) if key is None else check_key(key)
