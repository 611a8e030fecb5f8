"""A trained layer's attention as an attnflow field (the flow with trained weights)."""

import jax.numpy as jnp
import numpy as np

from .._check import check_positive_scalar
from .._fields._piecewise import PiecewiseConstant
from .._fields._self_attention import MultiHeadAttention, SelfAttention
from ._encoder import Encoder


def _encoder(model) -> Encoder:
    encoder = getattr(model, "encoder", model)
    if not isinstance(encoder, Encoder):
        raise ValueError(
            f"model: expected a PretrainedModel or an Encoder, got {type(model).__name__}"
        )
    return encoder


def attention_field(model, layer: int, *, beta=None) -> MultiHeadAttention:
    r"""Hidden layer ``layer``'s self-attention as the multi-head field of paper (2.7):

        ẋ_i = P^⊥_{x_i} Σ_h Σ_j softmax_j(β⟨Q_h x_i, K_h x_j⟩) V_h x_j,

    with the trained weights (PyTorch ``Linear`` layout, y = W x + b on column vectors):

    - Q_h = W_q[h·d_h:(h+1)·d_h, :] and K_h = W_k[h·d_h:(h+1)·d_h, :], (d_h, d);
    - V_h = W_o[:, h·d_h:(h+1)·d_h] W_v[h·d_h:(h+1)·d_h, :], (d, d): the output projection folded
      into each head's value, so Σ_h V_h x_j is exactly the layer's W_o concat_h(W_v^h x_j);
    - β = 1/√d_h, the logit scale of the trained model (paper footnote 2), unless ``beta`` is given.

    **What is dropped.** This is the attention sublayer only, on the sphere. Dropped: the biases
    b_q, b_k, b_v, b_o; the feed-forward block (W₁, W₂, its biases and activation); both
    LayerNorms' centring, gains γ and biases (LayerNorm is replaced by x ↦ x/|x|, the paper's
    simplification of §2); the embeddings' LayerNorm and (ALBERT) the embedding projection are
    not part of the field. Also the scale: the model's tokens have norm r ≈ √d·rms(γ) (≈ 10–20),
    the field's are unit vectors, so with β = 1/√d_h its logits are r² times smaller than the
    model's; pass ``beta = r²/√d_h`` to match the logit scale of tokens of norm r.

    Args:
        model: a :class:`PretrainedModel` or its :class:`Encoder`.
        layer: hidden layer index, 0 ≤ layer < L (ALBERT layers share one block).
        beta: inverse temperature (default 1/√d_h).

    Returns:
        ``attnflow.MultiHeadAttention`` of H ``SelfAttention`` heads on d, in the weights' dtype.

    Example:
        >>> from attnflow import pretrained
        >>> model = pretrained.load_minilm()  # doctest: +SKIP
        >>> field = pretrained.attention_field(model, 0)  # doctest: +SKIP
        >>> len(field.heads), field.heads[0].Q.shape, field.heads[0].V.shape  # doctest: +SKIP
        (12, (32, 384), (384, 384))
    """
    encoder = _encoder(model)
    config = encoder.config
    if isinstance(layer, bool) or int(layer) != layer:
        raise ValueError(f"layer: expected an integer hidden layer index, got {layer!r}")
    block = config.layer_block(int(layer))
    dh = config.head_dim
    if beta is None:
        beta = 1.0 / np.sqrt(dh)
    W_q, W_k, W_v, W_o = (
        getattr(encoder.blocks, name)[block] for name in ("query", "key", "value", "output")
    )
    heads = []
    for h in range(config.num_attention_heads):
        rows = slice(h * dh, (h + 1) * dh)
        V_h = W_o[:, rows] @ W_v[rows, :]
        heads.append(SelfAttention(jnp.asarray(beta, W_q.dtype), W_q[rows], W_k[rows], V_h))
    return MultiHeadAttention.from_heads(heads)


def attention_stack(model, layers=None, *, beta=None, step=1.0) -> PiecewiseConstant:
    """The trained stack's attention fields in sequence: piece k is
    ``attention_field(model, layers[k])`` on [k·step, (k+1)·step) (default: every layer once, so
    t = k is hidden layer k). ``beta``: a scalar or one value per piece (default 1/√d_h).

    Example:
        >>> from attnflow import pretrained
        >>> stack = pretrained.attention_stack(pretrained.load_minilm())  # doctest: +SKIP
        >>> stack.num_pieces  # doctest: +SKIP
        6
    """
    encoder = _encoder(model)
    step = check_positive_scalar(step, "step", what="time per layer")
    layers = list(range(encoder.config.num_hidden_layers) if layers is None else layers)
    if not layers:
        raise ValueError("layers: expected at least one layer, got none")
    betas = [beta] * len(layers) if beta is None or np.ndim(beta) == 0 else list(beta)
    if len(betas) != len(layers):
        raise ValueError(f"beta: expected a scalar or {len(layers)} values, got {len(betas)}")
    fields = [attention_field(encoder, k, beta=b) for k, b in zip(layers, betas, strict=True)]
    switch = step * np.arange(1, len(layers))
    return PiecewiseConstant.from_fields(fields, switch)
