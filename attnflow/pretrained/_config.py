"""The configuration of a BERT-family encoder, read from a Hugging Face ``config.json``."""

import dataclasses
import json
import pathlib

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu")


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """The hyperparameters of a post-LN BERT or ALBERT encoder (the ``config.json`` fields).

    ``embedding_size`` is the width E of the token embeddings; BERT has E = ``hidden_size`` = d,
    ALBERT projects from E to d. ALBERT shares parameters: hidden layer i applies the block of
    group ⌊i·G/L⌋ (G = ``num_hidden_groups``); BERT has one block per layer.

    Example:
        >>> from attnflow.pretrained import EncoderConfig
        >>> c = EncoderConfig.from_dict({"model_type": "bert", "vocab_size": 10, "hidden_size": 8,
        ...     "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16})
        >>> c.head_dim, c.num_blocks, c.layer_block(1)
        (4, 2, 1)
    """

    model_type: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    embedding_size: int
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-12
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    pad_token_id: int = 0

    def __post_init__(self):
        if self.model_type not in ("bert", "albert"):
            raise ValueError(
                f"config: model_type: expected 'bert' or 'albert' (BERT, MiniLM, ALBERT), got "
                f"{self.model_type!r}"
            )
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "embedding_size",
            "max_position_embeddings",
            "type_vocab_size",
            "num_hidden_groups",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"config: {name}: expected a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"config: hidden_size = {self.hidden_size} is not a multiple of "
                f"num_attention_heads = {self.num_attention_heads}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"config: hidden_act: expected one of {ACTIVATIONS}, got {self.hidden_act!r}"
            )
        if not self.layer_norm_eps > 0:
            raise ValueError(
                f"config: layer_norm_eps: expected a positive number, got {self.layer_norm_eps}"
            )
        if self.model_type == "bert" and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"config: a BERT has embedding_size = hidden_size, got {self.embedding_size} "
                f"and {self.hidden_size}"
            )
        if self.inner_group_num != 1:
            raise ValueError(
                f"config: inner_group_num: only 1 is supported (every released ALBERT), got "
                f"{self.inner_group_num}"
            )
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(
                f"config: num_hidden_layers = {self.num_hidden_layers} is not a multiple of "
                f"num_hidden_groups = {self.num_hidden_groups}"
            )

    @property
    def head_dim(self) -> int:
        """d_head = d / H."""
        return self.hidden_size // self.num_attention_heads

    @property
    def num_blocks(self) -> int:
        """Distinct parameter sets: L for BERT, G for ALBERT."""
        return self.num_hidden_layers if self.model_type == "bert" else self.num_hidden_groups

    def layer_block(self, layer: int) -> int:
        """The block (parameter set) that hidden layer ``layer`` (0-based) applies."""
        if not 0 <= layer < self.num_hidden_layers:
            raise ValueError(f"layer: expected 0 <= layer < {self.num_hidden_layers}, got {layer}")
        if self.model_type == "bert":
            return layer
        return layer * self.num_hidden_groups // self.num_hidden_layers

    @classmethod
    def from_dict(cls, config: dict) -> "EncoderConfig":
        """From the dict of a Hugging Face ``config.json`` (unknown keys are ignored)."""
        kind = config.get("model_type")
        if kind is None:
            architectures = " ".join(config.get("architectures", [])).lower()
            kind = "albert" if "albert" in architectures else "bert"
        position = config.get("position_embedding_type", "absolute")
        if position != "absolute":
            raise ValueError(
                f"config: position_embedding_type: only 'absolute' is supported, got {position!r}"
            )
        missing = [
            k
            for k in (
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "intermediate_size",
            )
            if k not in config
        ]
        if missing:
            raise ValueError(f"config: missing keys {missing}")
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in config.items() if k in fields}
        values["model_type"] = kind
        if kind == "albert":
            values.setdefault("embedding_size", 128)
            values.setdefault("hidden_act", "gelu_new")
        else:
            values["embedding_size"] = config["hidden_size"]
        return cls(**values)

    @classmethod
    def from_file(cls, path) -> "EncoderConfig":
        """From a ``config.json`` file."""
        return cls.from_dict(json.loads(pathlib.Path(path).read_text()))
