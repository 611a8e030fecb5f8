"""The blocked (online-softmax) attention kernel against the dense field, and its memory."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import attention_numpy

import attnflow as af
import attnflow._fields._kernel as kernel_module
from attnflow._fields._kernel import AUTO_BLOCK_THRESHOLD

N, D, K_ROWS = 23, 4, 2  # 23 is divisible by none of the block sizes below


@pytest.fixture(scope="module")
def system():
    k = jr.split(jr.key(0), 5)
    x = af.random_tokens(k[0], N, D)
    Q = jr.normal(k[1], (K_ROWS, D)) / np.sqrt(D)
    K = jr.normal(k[2], (K_ROWS, D)) / np.sqrt(D)
    V = jr.normal(k[3], (D, D)) / np.sqrt(D)
    w = jr.uniform(k[4], (N,), minval=0.1, maxval=1.0)
    return x, Q, K, V, w


def _outputs(block_size, normalization, causal):
    """Unweighted and weighted attention outputs of one field, as functions of all its inputs."""

    def outputs(x, beta, Q, K, V, w):
        field = af.SelfAttention(
            beta, Q, K, V, normalization=normalization, causal=causal, block_size=block_size
        )
        return field.attention_output(x), field.attention_output(x, w)

    return outputs


def _assert_close(actual, expected, tol=1e-12):
    scale = max(1.0, float(jnp.max(jnp.abs(expected))))
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=0, atol=tol * scale)


@pytest.mark.parametrize(
    "normalization, causal, block_size",
    [
        ("softmax", False, 4),
        ("softmax", False, 64),
        ("n", False, 5),
        ("softmax", True, 6),
        ("n", True, 9),
    ],
)
def test_blocked_equals_dense_values_and_gradients(system, normalization, causal, block_size):
    """Values and gradients in x, β, Q, K, V and the weights, to 1e-12 (float64)."""
    cotangent = jr.normal(jr.key(7), (N, D))

    @jax.jit
    def values_and_grads(*inputs):
        results = []
        for block in (None, block_size):
            outputs = _outputs(block, normalization, causal)
            for which in (0, 1):

                def loss(*a, outputs=outputs, which=which):
                    return jnp.sum(jnp.sin(outputs(*a)[which]) * cotangent)

                results.append((outputs(*inputs)[which], jax.grad(loss, argnums=range(6))(*inputs)))
        return results[:2], results[2:]

    dense, blocked = values_and_grads(*system[:1], jnp.asarray(1.7), *system[1:])
    for (value_b, grads_b), (value_d, grads_d) in zip(blocked, dense, strict=True):
        _assert_close(value_b, value_d)
        for gb, gd in zip(grads_b, grads_d, strict=True):
            _assert_close(gb, gd)


def test_blocked_forward_mode_and_field(system):
    x, Q, K, V, w = system
    tangent = jr.normal(jr.key(3), (N, D))
    dense = af.SelfAttention(1.3, Q, K, V)
    blocked = af.SelfAttention(1.3, Q, K, V, block_size=5)
    _, jvp_dense = jax.jvp(lambda y: dense(0.0, y, w), (x,), (tangent,))
    _, jvp_blocked = jax.jvp(lambda y: blocked(0.0, y, w), (x,), (tangent,))
    _assert_close(jvp_blocked, jvp_dense)
    v = blocked(0.0, x, {"weights": w})
    assert float(jnp.max(jnp.abs(jnp.sum(v * x, axis=1)))) < 1e-14


def test_blocked_float32_large_beta_is_finite():
    x = af.random_tokens(jr.key(2), 50, 3, dtype=jnp.float32)
    dense = af.SelfAttention(100.0)(0.0, x)
    blocked = af.SelfAttention(100.0, block_size=16)(0.0, x)
    assert blocked.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(blocked)))
    np.testing.assert_allclose(np.asarray(blocked), np.asarray(dense), atol=2e-5)


def test_blocked_rectangular_queries_and_offset():
    """Cross attention of 7 queries against 19 keys, written directly in NumPy."""
    k = jr.split(jr.key(4), 4)
    q, keys = jr.normal(k[0], (7, 3)), jr.normal(k[1], (19, 3))
    values, w = jr.normal(k[2], (19, 5)), jr.uniform(k[3], (19,))
    offset = 6
    out = af.blocked_attention(q, keys, values, w, causal=True, block_size=4, query_offset=offset)
    s = np.asarray(q) @ np.asarray(keys).T
    mask = np.arange(19)[None, :] <= offset + np.arange(7)[:, None]
    e = np.where(mask, np.exp(s), 0.0) * np.asarray(w)[None, :]
    expected = (e @ np.asarray(values)) / e.sum(axis=1, keepdims=True)
    _assert_close(out, expected)


def _has_full_key_rows(field, n):
    """Whether some intermediate spans all n keys (the dense path's (rows, n) logits)."""
    x = af.random_tokens(jr.key(0), n, 2)
    return f",{n}]" in str(jax.make_jaxpr(lambda y: field(0.0, y, None))(x))


def test_automatic_threshold_switches_to_blocked():
    field = af.SelfAttention(1.0)
    assert _has_full_key_rows(field, AUTO_BLOCK_THRESHOLD)
    assert not _has_full_key_rows(field, AUTO_BLOCK_THRESHOLD + 1)
    assert not _has_full_key_rows(af.SelfAttention(1.0, block_size=64), 300)


def _attention_numpy(x, beta, Q, K, V, w, normalization, causal):
    return attention_numpy(
        x, w, beta=beta, Q=Q, K=K, V=V, normalization=normalization, causal=causal
    )


@pytest.mark.parametrize("normalization, causal", [("softmax", False), ("n", True)])
def test_dense_row_blocks_match_numpy_and_blocked_gradients(
    system, monkeypatch, normalization, causal
):
    """The dense path 5 query rows at a time (23 = 4·5 + 3): values against the n × n formula
    in NumPy, gradients in x, β, Q, K, V, w against the online-softmax blocked kernel."""
    monkeypatch.setattr(kernel_module, "DENSE_TILE", 5 * N)
    x, Q, K, V, w = system
    beta = jnp.asarray(1.7)
    cotangent = jr.normal(jr.key(8), (N, D))
    outputs = {block: _outputs(block, normalization, causal) for block in (None, 6)}
    jaxpr = str(jax.make_jaxpr(outputs[None])(x, beta, Q, K, V, w))
    assert "scan" in jaxpr and f"[5,{N}]" in jaxpr  # the row-blocked path ran

    unweighted, weighted = outputs[None](x, beta, Q, K, V, w)
    _assert_close(unweighted, _attention_numpy(x, 1.7, Q, K, V, None, normalization, causal))
    _assert_close(weighted, _attention_numpy(x, 1.7, Q, K, V, w, normalization, causal))

    @jax.jit
    def grads(*inputs):
        return tuple(
            jax.grad(lambda *a, f=f: jnp.sum(f(*a)[1] * cotangent), argnums=range(6))(*inputs)
            for f in outputs.values()
        )

    dense, blocked = grads(x, beta, Q, K, V, w)
    for gd, gb in zip(dense, blocked, strict=True):
        _assert_close(gd, gb)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_bad_block_size(bad):
    with pytest.raises(ValueError, match="block_size: expected None or a positive integer"):
        af.SelfAttention(1.0, block_size=bad)
    with pytest.raises(ValueError, match="block_size: expected a positive integer"):
        af.blocked_attention(jnp.ones((3, 2)), jnp.ones((3, 2)), jnp.ones((3, 2)), block_size=bad)


def test_blocked_attention_bad_shapes():
    q = jnp.ones((3, 2))
    with pytest.raises(ValueError, match="keys: expected 2 columns"):
        af.blocked_attention(q, jnp.ones((4, 3)), jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="values: expected 4 rows"):
        af.blocked_attention(q, jnp.ones((4, 2)), jnp.ones((5, 2)))
    with pytest.raises(ValueError, match=r"weights: expected shape \(4,\)"):
        af.blocked_attention(q, jnp.ones((4, 2)), jnp.ones((4, 2)), jnp.ones(3))
    with pytest.raises(ValueError, match="weights: expected finite non-negative weights"):
        af.blocked_attention(q, jnp.ones((4, 2)), jnp.ones((4, 2)), -jnp.ones(4))
    with pytest.raises(ValueError, match="normalization: expected 'softmax'"):
        af.blocked_attention(q, q, q, normalization="sum")


_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource
    import jax, jax.numpy as jnp, jax.random as jr, numpy as np
    import attnflow as af

    d, beta = 64, 4.0
    field = af.SelfAttention(beta)  # n > AUTO_BLOCK_THRESHOLD: the blocked kernel
    # n = 10^5: XLA's buffer assignment for the compiled evaluation (compiled, not run: the
    # run is 1.3 TFLOP, 40 s on 2 cores), against the dense matrix's 40 GB.
    big = jax.ShapeDtypeStruct((100_000, d), jnp.float32)
    temp_big = jax.jit(lambda y: field(0.0, y, None)).lower(big).compile()
    dense = jax.jit(lambda y: af.SelfAttention(beta, block_size=None).attention_matrix(y))
    dense_bytes = dense.lower(big).compile().memory_analysis().output_size_in_bytes
    # n = 30000, run: peak RSS against the dense matrix's 3.6 GB.
    n = 30_000
    x = af.random_tokens(jr.key(0), n, d, dtype=jnp.float32)
    v = np.asarray(jax.jit(lambda y: field(0.0, y, None))(x))
    # Peak RSS of this process's own address space: VmHWM restarts at exec, while ru_maxrss
    # keeps the forking parent's peak (a pytest worker that has grown to GBs).
    try:
        status = open("/proc/self/status").read().split("VmHWM:")[1]
        rss = int(status.split()[0]) * 1024
    except (OSError, IndexError):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    xs = np.asarray(x, dtype=np.float64)
    s = beta * xs[:3] @ xs.T
    e = np.exp(s - s.max(axis=1, keepdims=True))
    out = (e @ xs) / e.sum(axis=1, keepdims=True)
    expected = out - np.sum(out * xs[:3], axis=1, keepdims=True) * xs[:3]
    print(json.dumps({"rss": rss, "dense_bytes": dense_bytes,
                      "temp_bytes": temp_big.memory_analysis().temp_size_in_bytes,
                      "error": float(np.abs(v[:3] - expected).max()),
                      "finite": bool(np.isfinite(v).all())}))
    """
)


def test_field_at_n_1e5_d_64_runs_in_bounded_memory():
    """The blocked field in a fresh process (float32, d = 64): at n = 10^5 the compiled
    evaluation's temporaries are O(n·d) (< 256 MiB; the dense matrix is n² · 4 bytes = 40 GB),
    and an evaluation at n = 30000 runs with peak RSS < 2 GiB (dense: 3.6 GB) and matches NumPy.
    """
    # The suite lowers XLA's optimisation level to save compile time (conftest.py); this
    # evaluation is run-time bound, so it gets the default (optimised) code.
    flags = os.environ.get("XLA_FLAGS", "").replace("--xla_backend_optimization_level=0", "")
    result = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT],
        env={**os.environ, "XLA_FLAGS": flags.strip()},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["dense_bytes"] == 100_000**2 * 4
    assert report["finite"]
    assert report["error"] < 1e-5
    assert report["temp_bytes"] < 256 * 2**20  # O(n·d): a few copies of x (25.6 MB each)
    assert report["rss"] < 2 * 2**30, report
