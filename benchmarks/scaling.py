"""Scaling of one attention-field evaluation with n: dense vs blocked, throughput and memory.

Counts 4·n²·d flops per evaluation of (SA) with Q = K = V = I (2n²d for the logits x xᵀ,
2n²d for the values; the exponentials and the projection are not counted), and reports it
against the machine's float32 matmul throughput measured in the same run (before and after).
Each (path, n) runs in a fresh subprocess so that its peak RSS (resource.getrusage) belongs to
that configuration alone; XLA's own buffer accounting (``memory_analysis``) is reported too.
The dense path is forced past the automatic threshold by raising it in the worker.

    python benchmarks/scaling.py              # n = 10^2 … 10^5 (blocked), dense up to 8192
    python benchmarks/scaling.py --quick      # a smoke run
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

D = 64


def worker(path: str, n: int, d: int, repeats: int, block: int) -> None:
    import resource

    import jax
    import jax.numpy as jnp
    import jax.random as jr

    import attnflow as af
    import attnflow._field as field_module

    if path == "dense":
        field_module.AUTO_BLOCK_THRESHOLD = 10**12
        field = af.SelfAttention(1.0)
    else:
        field = af.SelfAttention(1.0, block_size=block)
    x = af.random_tokens(jr.key(0), n, d, dtype=jnp.float32)
    start = time.perf_counter()
    compiled = jax.jit(lambda y: field(0.0, y, None)).lower(x).compile()
    compile_s = time.perf_counter() - start
    memory = compiled.memory_analysis()
    peak = matmul_gflops()
    if repeats > 1:
        compiled(x).block_until_ready()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        compiled(x).block_until_ready()
        times.append(time.perf_counter() - start)
    peak = max(peak, matmul_gflops())
    print(
        json.dumps(
            {
                "path": path,
                "n": n,
                "d": d,
                "block": block if path == "blocked" else None,
                "seconds": statistics.median(times),
                "repeats": repeats,
                "compile_s": compile_s,
                "xla_bytes": memory.temp_size_in_bytes
                + memory.argument_size_in_bytes
                + memory.output_size_in_bytes,
                "rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "matmul_gflops": peak,
            }
        )
    )


def matmul_gflops(sizes=(512, 1024, 2048), repeats: int = 5) -> float:
    """The best float32 square-matmul throughput over a few sizes (XLA's CPU dot is shape
    dependent: 512² often runs at twice the speed of 2048² here)."""
    import jax
    import jax.numpy as jnp

    best = 0.0
    f = jax.jit(lambda a: a @ a)
    for size in sizes:
        a = jnp.ones((size, size), jnp.float32)
        f(a).block_until_ready()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            f(a).block_until_ready()
            times.append(time.perf_counter() - start)
        best = max(best, 2 * size**3 / statistics.median(times) / 1e9)
    return best


def repeats_for(n: int) -> int:
    return 20 if n <= 1000 else 7 if n <= 4096 else 3 if n <= 10_000 else 2 if n < 50_000 else 1


def run(path, n, block):
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            path,
            str(n),
            str(D),
            str(repeats_for(n)),
            str(block),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--max-n", type=int, default=100_000)
    parser.add_argument("--dense-max-n", type=int, default=8192)
    parser.add_argument("--worker", nargs=5)
    args = parser.parse_args()
    if args.worker:
        path, n, d, repeats, block = args.worker
        worker(path, int(n), int(d), int(repeats), int(block))
        return
    if args.quick:
        ns, dense_ns = [100, 1000, 4096], [100, 1000, 4096]
    else:
        ns = [
            n
            for n in (100, 316, 1000, 2048, 3162, 4096, 10_000, 31_623, 100_000)
            if n <= args.max_n
        ]
        dense_ns = [n for n in (100, 316, 1000, 2048, 3162, 4096, 8192) if n <= args.dense_max_n]

    results = [run("dense", n, args.block) for n in dense_ns]
    results += [run("blocked", n, args.block) for n in ns]

    print("Matmul peak: the best float32 square matmul (512², 1024², 2048²), measured in each")
    print(
        "worker just before and after its timed evaluations (the larger), as the CPU is shared.\n"
    )
    print(f"d = {D}, float32, blocked block size {args.block}; flops = 4·n²·d per evaluation\n")
    print(
        "| path | n | time / eval | GFLOP/s | matmul GFLOP/s | % of matmul | XLA buffers "
        "| peak RSS |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        gflops = 4 * r["n"] ** 2 * r["d"] / r["seconds"] / 1e9
        print(
            f"| {r['path']} | {r['n']} | {r['seconds'] * 1e3:.2f} ms | {gflops:.1f} | "
            f"{r['matmul_gflops']:.1f} | {100 * gflops / r['matmul_gflops']:.0f}% | "
            f"{r['xla_bytes'] / 2**20:.1f} MiB | "
            f"{r['rss_bytes'] / 2**20:.0f} MiB |"
        )


if __name__ == "__main__":
    main()
