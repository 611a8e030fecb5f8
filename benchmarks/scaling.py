"""Scaling of one attention-field evaluation with n: dense vs blocked, throughput and memory.

Counts 4·n²·d flops per evaluation of (SA) with Q = K = V = I (2n²d for the logits x xᵀ,
2n²d for the values; the exponentials and the projection are not counted), and reports it
against the machine's float32 matmul throughput measured in the same run (before and after).
Each (path, n) runs in a fresh subprocess so that its peak RSS (resource.getrusage) belongs to
that configuration alone; XLA's own buffer accounting (``memory_analysis``) is reported too.
The dense path (exact softmax over full rows, tiles of ``DENSE_TILE`` logits at a time) is
forced past the automatic threshold by raising it in the worker.

    python benchmarks/scaling.py                  # n = 10^2 … 10^5 (blocked), dense up to 16384
    python benchmarks/scaling.py --paths dense    # the dense path alone
    python benchmarks/scaling.py --ns 4096 8192   # these n only
    python benchmarks/scaling.py --quick          # a smoke run
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

D = 64


def peak_rss_bytes(resource):
    """This process's peak RSS: VmHWM (restarts at exec), not ru_maxrss, which keeps the peak of
    the process that forked it."""
    try:
        with open("/proc/self/status") as status:
            return int(status.read().split("VmHWM:")[1].split()[0]) * 1024
    except (OSError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker(path: str, n: int, d: int, repeats: int, block: int) -> None:
    import resource

    import jax
    import jax.numpy as jnp
    import jax.random as jr

    import attnflow as af
    import attnflow._fields._base as field_module

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
    matmuls = square_matmuls()
    calls = 1
    if repeats > 1:
        start = time.perf_counter()
        compiled(x).block_until_ready()  # warm-up
        # Small n: an untimed call, then back-to-back calls filling ~20 ms per timing, so that
        # the first call after the matmuls (slow: cold caches and threads) does not dominate.
        calls = max(1, int(0.02 / (time.perf_counter() - start)))
    # The CPU is shared: the matmul peak is measured between consecutive timings, and each
    # timing is compared with the better of the peaks just before and just after it.
    times, peaks = [], [matmul_gflops(matmuls)]
    for _ in range(repeats):
        if calls > 1:
            compiled(x).block_until_ready()
        start = time.perf_counter()
        for _ in range(calls):
            compiled(x).block_until_ready()
        times.append((time.perf_counter() - start) / calls)
        peaks.append(matmul_gflops(matmuls))
    flops = 4 * n**2 * d
    fractions = [flops / t / 1e9 / max(peaks[i], peaks[i + 1]) for i, t in enumerate(times)]
    print(
        json.dumps(
            {
                "path": path,
                "n": n,
                "d": d,
                "block": block if path == "blocked" else None,
                "seconds": statistics.median(times),
                "best_seconds": min(times),
                "repeats": repeats,
                "compile_s": compile_s,
                "xla_bytes": memory.temp_size_in_bytes
                + memory.argument_size_in_bytes
                + memory.output_size_in_bytes,
                "rss_bytes": peak_rss_bytes(resource),
                "matmul_gflops": statistics.median(peaks),
                "fraction": statistics.median(fractions),
                "best_fraction": max(fractions),
            }
        )
    )


def square_matmuls(sizes=(512, 1024, 2048)):
    """Compiled, warmed-up float32 a @ a for a few sizes (XLA's CPU dot is shape dependent:
    512² sometimes runs faster than 2048² here)."""
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda a: a @ a)
    matmuls = []
    for size in sizes:
        a = jnp.ones((size, size), jnp.float32)
        f(a).block_until_ready()
        matmuls.append((f, a, 2 * size**3))
    return matmuls


def matmul_gflops(matmuls, repeats: int = 3) -> float:
    """The best float32 square-matmul throughput over the sizes, median of a few calls each."""
    best = 0.0
    for f, a, flops in matmuls:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            f(a).block_until_ready()
            times.append(time.perf_counter() - start)
        best = max(best, flops / statistics.median(times) / 1e9)
    return best


def repeats_for(n: int) -> int:
    return 20 if n <= 1000 else 7 if n <= 8192 else 3 if n <= 16384 else 2 if n < 50_000 else 1


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
    parser.add_argument("--dense-max-n", type=int, default=16384)
    parser.add_argument(
        "--paths", nargs="+", choices=("dense", "blocked"), default=("dense", "blocked")
    )
    parser.add_argument("--ns", type=int, nargs="+", help="these n only, for both paths")
    parser.add_argument("--worker", nargs=5)
    args = parser.parse_args()
    if args.worker:
        path, n, d, repeats, block = args.worker
        worker(path, int(n), int(d), int(repeats), int(block))
        return
    if args.ns:
        ns = dense_ns = args.ns
    elif args.quick:
        ns, dense_ns = [100, 1000, 4096], [100, 1000, 4096]
    else:
        ns = [
            n
            for n in (100, 316, 1000, 2048, 3162, 4096, 10_000, 31_623, 100_000)
            if n <= args.max_n
        ]
        dense_ns = [
            n for n in (100, 316, 1000, 2048, 3162, 4096, 8192, 16384) if n <= args.dense_max_n
        ]

    results = [run("dense", n, args.block) for n in dense_ns] if "dense" in args.paths else []
    if "blocked" in args.paths:
        results += [run("blocked", n, args.block) for n in ns]

    print("Matmul peak: the best float32 square matmul (512², 1024², 2048²), measured in each")
    print("worker before the first and after every timed evaluation, as the CPU is shared; each")
    print("evaluation's fraction of peak uses the larger of the peaks just before and after it.")
    print("Columns: median time, its GFLOP/s, median matmul peak, median fraction of peak; then")
    print("the best time and the best fraction.\n")
    print(f"d = {D}, float32, blocked block size {args.block}; flops = 4·n²·d per evaluation\n")
    print(
        "| path | n | time / eval | GFLOP/s | matmul GFLOP/s | % of matmul | best time "
        "| best % | XLA buffers | peak RSS |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        gflops = 4 * r["n"] ** 2 * r["d"] / r["seconds"] / 1e9
        print(
            f"| {r['path']} | {r['n']} | {r['seconds'] * 1e3:.2f} ms | {gflops:.1f} | "
            f"{r['matmul_gflops']:.1f} | {100 * r['fraction']:.0f}% | "
            f"{r['best_seconds'] * 1e3:.2f} ms | {100 * r['best_fraction']:.0f}% | "
            f"{r['xla_bytes'] / 2**20:.1f} MiB | "
            f"{r['rss_bytes'] / 2**20:.0f} MiB |"
        )


if __name__ == "__main__":
    main()
