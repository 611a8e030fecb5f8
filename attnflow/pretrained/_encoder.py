"""A post-LN BERT/ALBERT encoder as equinox modules: embeddings, blocks, the layer stack."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._check import check_int
from .._fields._kernel import attention
from ._config import EncoderConfig


def activation(name: str, x):
    """The feed-forward nonlinearity named by ``hidden_act``: ``gelu`` is the exact
    x·Φ(x) (erf form, as in BERT); ``gelu_new``, ``gelu_pytorch_tanh`` and ``gelu_fast`` are the
    tanh approximation ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (ALBERT's default)."""
    if name == "gelu":
        return jax.nn.gelu(x, approximate=False)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return jax.nn.gelu(x, approximate=True)
    if name == "relu":
        return jax.nn.relu(x)
    if name == "silu":
        return jax.nn.silu(x)
    raise ValueError(f"hidden_act: unknown activation {name!r}")


def _linear(x, w, b):
    """PyTorch's Linear on rows: x Wᵀ + b (w is (out, in))."""
    return x @ w.T + b[None, :]


class LayerNorm(eqx.Module):
    """LN(y) = γ ⊙ (y − mean(y)) / √(var(y) + ε) + b on each row of (n, d) (biased variance)."""

    weight: Float[Array, " d"]
    bias: Float[Array, " d"]
    eps: float = eqx.field(static=True)

    def __call__(self, y):
        mean = jnp.mean(y, axis=-1, keepdims=True)
        centred = y - mean
        var = jnp.mean(centred * centred, axis=-1, keepdims=True)
        return centred / jnp.sqrt(var + self.eps) * self.weight[None, :] + self.bias[None, :]


class Embeddings(eqx.Module):
    """e_i = LN(W_word[id_i] + W_pos[i] + W_type[type_i]), then (ALBERT) e_i ↦ P e_i + p."""

    word: Float[Array, "vocab e"]
    position: Float[Array, "positions e"]
    token_type: Float[Array, "types e"]
    norm: LayerNorm
    projection: Float[Array, "d e"] | None
    projection_bias: Float[Array, " d"] | None

    def __call__(self, input_ids, token_type_ids):
        n = input_ids.shape[0]
        e = self.word[input_ids] + self.position[:n] + self.token_type[token_type_ids]
        e = self.norm(e)
        if self.projection is not None:
            e = _linear(e, self.projection, self.projection_bias)
        return e


class EncoderBlock(eqx.Module):
    """One post-LN Transformer block (a BERT layer, or ALBERT's shared layer). Weights are stored
    as in PyTorch's ``Linear`` (out, in): the map is y = W x + b on column vectors.

        a   = W_o concat_h( softmax_j(⟨q^h_i, k^h_j⟩/√d_h) v^h_j ) + b_o,
              q^h = W_q^h x + b_q^h (rows h·d_h … (h+1)·d_h of W_q; same for k, v),
        x'  = LN₁(x + a),
        out = LN₂(x' + W₂ act(W₁ x' + b₁) + b₂).
    """

    query: Float[Array, "d d"]
    query_bias: Float[Array, " d"]
    key: Float[Array, "d d"]
    key_bias: Float[Array, " d"]
    value: Float[Array, "d d"]
    value_bias: Float[Array, " d"]
    output: Float[Array, "d d"]
    output_bias: Float[Array, " d"]
    attention_norm: LayerNorm
    intermediate: Float[Array, "i d"]
    intermediate_bias: Float[Array, " i"]
    ffn_output: Float[Array, "d i"]
    ffn_output_bias: Float[Array, " d"]
    output_norm: LayerNorm
    num_heads: int = eqx.field(static=True)
    hidden_act: str = eqx.field(static=True)

    def attention(self, x, mask):
        """The attention sublayer a (before the residual and LN₁); ``mask`` (n,) marks real keys."""
        n, d = x.shape
        heads, dh = self.num_heads, d // self.num_heads

        def split(w, b):
            return _linear(x, w, b).reshape(n, heads, dh)

        q, k, v = (split(w, b) for w, b in self._qkv())
        # attnflow's one attention kernel, per head: softmax with key weights 1 (real tokens)
        # and 0 (padding) is BERT's masked softmax. (jax.nn.dot_product_attention is not used:
        # it loses float64 precision, 1e-7 measured.)
        scale = 1 / jnp.sqrt(jnp.asarray(dh, x.dtype))
        key_weights = mask.astype(x.dtype)
        context = jax.vmap(
            lambda qh, kh, vh: attention(scale * qh, kh, vh, weights=key_weights),
            in_axes=1,
            out_axes=1,
        )(q, k, v)
        return _linear(context.reshape(n, d), self.output, self.output_bias)

    def _qkv(self):
        return (
            (self.query, self.query_bias),
            (self.key, self.key_bias),
            (self.value, self.value_bias),
        )

    def __call__(self, x, mask):
        x = self.attention_norm(x + self.attention(x, mask))
        hidden = activation(self.hidden_act, _linear(x, self.intermediate, self.intermediate_bias))
        return self.output_norm(x + _linear(hidden, self.ffn_output, self.ffn_output_bias))


class Encoder(eqx.Module):
    """A BERT-family encoder: embeddings, then a stack of post-LN blocks.

    ``blocks`` holds the distinct parameter sets stacked on a leading axis (L for BERT, G for
    ALBERT); hidden layer i applies block ``config.layer_block(i)``.

    Call it on (n,) token ids; it returns the hidden states (1 + len(schedule), n, d): the
    embedding output (after ALBERT's projection), then the output of each layer, as Hugging Face's
    ``output_hidden_states=True``. ``schedule`` lists the hidden layers to apply, in order
    (default 0, 1, …, L − 1): :func:`attnflow.pretrained.deep_schedule` iterates the stack deeper.
    """

    config: EncoderConfig = eqx.field(static=True)
    embeddings: Embeddings
    blocks: EncoderBlock

    def __call__(
        self,
        input_ids: Int[Array, " n"],
        token_type_ids: Int[Array, " n"] | None = None,
        attention_mask: Bool[Array, " n"] | None = None,
        *,
        schedule=None,
    ) -> Float[Array, "layers n d"]:
        c = self.config
        input_ids = _check_ids(input_ids, "input_ids", c.vocab_size)
        n = input_ids.shape[0]
        if n > c.max_position_embeddings:
            raise ValueError(
                f"input_ids: at most max_position_embeddings = "
                f"{self.config.max_position_embeddings} tokens, got {n}"
            )
        if token_type_ids is None:
            token_type_ids = np.zeros((n,), np.int32)
        token_type_ids = _check_ids(token_type_ids, "token_type_ids", c.type_vocab_size, n)
        if attention_mask is None:
            attention_mask = np.ones((n,), bool)
        if np.shape(attention_mask) != (n,):
            raise ValueError(
                f"attention_mask: expected shape ({n},), got {np.shape(attention_mask)}"
            )
        if not isinstance(attention_mask, jax.core.Tracer):
            attention_mask = np.asarray(attention_mask)
        if schedule is None:
            schedule = range(self.config.num_hidden_layers)
        last = c.num_hidden_layers - 1
        layers = [check_int(i, "schedule", low=0, high=last) for i in schedule]
        blocks = np.asarray([c.layer_block(i) for i in layers], np.int32)
        return _forward(self, input_ids, token_type_ids, attention_mask.astype(bool), blocks)


def _check_ids(ids, name: str, size: int, n: int | None = None):
    """(n,) integer ids in [0, size): ValueError now (checked in NumPy, no device round trip),
    or ``eqx.error_if`` under jit."""
    traced = isinstance(ids, jax.core.Tracer)
    if not traced:
        ids = np.asarray(ids)
    if ids.ndim != 1 or not jnp.issubdtype(ids.dtype, jnp.integer):
        raise ValueError(f"{name}: expected a 1-d integer array, got {ids.dtype} {ids.shape}")
    if n is not None and ids.shape[0] != n:
        raise ValueError(f"{name}: expected {n} ids (one per token), got {ids.shape[0]}")
    message = f"{name}: ids must lie in [0, {size})"
    if traced:
        return eqx.error_if(ids, jnp.any((ids < 0) | (ids >= size)), message)
    bad = (ids < 0) | (ids >= size)
    if bad.any():
        raise ValueError(f"{message}, got {ids[bad][:5].tolist()}")
    return ids


@eqx.filter_jit
def _forward(encoder, input_ids, token_type_ids, mask, blocks):
    x = encoder.embeddings(input_ids, token_type_ids)
    params, static = eqx.partition(encoder.blocks, eqx.is_array)

    def layer(x, b):
        block = eqx.combine(jax.tree.map(lambda p: p[b], params), static)
        x = block(x, mask)
        return x, x

    _, xs = jax.lax.scan(layer, x, blocks)
    return jnp.concatenate([x[None], xs], axis=0)
