"""The attention kernel (issue 12): one field evaluation and its reverse mode, against the plain
expression differentiated by JAX (the code the kernel replaced), in one process.

Part 1, time (float32, d = 64, SA with Q = K = V = I): for each n, the median and the
spread (min–max) of ``--repeats`` timed calls, after compiling, of
- the field (forward) with the kernel and with the plain expression;
- the gradient of a scalar of the field (forward + reverse) with each.
The plain expression is the pre-kernel dense field: softmax rows with the maximum subtracted,
one expression below n = 1024 (the sizes timed here), differentiated by JAX.

Part 2, memory (compiled programs, no timing, ``memory_analysis()`` temporaries): the gradient
of one field evaluation at n = 16384 on the kernel's blocked path, against one n × n matrix.

    python benchmarks/attention_core.py [--sizes 256 1024] [--repeats 7] [--memory-n 16384]
"""

import argparse
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import jax.random as jr

import attnflow as af


def plain_field(x, beta):
    logits = beta * x @ x.T
    e = jnp.exp(logits - jax.lax.stop_gradient(jnp.max(logits, axis=1, keepdims=True)))
    out = (e @ x) / jnp.sum(e, axis=1, keepdims=True)
    return out - jnp.sum(out * x, axis=1, keepdims=True) / jnp.sum(x * x, 1, keepdims=True) * x


def kernel_field(x, beta):
    return af.SelfAttention(beta)(0.0, x)


def timed(fn, args, repeats):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def part_one(sizes, d, repeats):
    print(f"\n### Part 1: one field evaluation, float32, d = {d} (ms: median [min–max])\n")
    print("| n | field: kernel | field: plain | grad: kernel | grad: plain | grad/field kernel |")
    print("|---:|---|---|---|---|---:|")
    for n in sizes:
        x = af.random_tokens(jr.key(0), n, d, dtype=jnp.float32)
        beta = jnp.float32(1.0)
        cotangent = jr.normal(jr.key(1), (n, d), jnp.float32)
        cells = {}
        for name, field in (("kernel", kernel_field), ("plain", plain_field)):
            forward = jax.jit(field)
            grad = jax.jit(jax.grad(lambda y, b, f=field, c=cotangent: jnp.sum(f(y, b) * c)))
            cells[name] = (timed(forward, (x, beta), repeats), timed(grad, (x, beta), repeats))
        fmt = lambda t: f"{1e3 * t[0]:.3f} [{1e3 * t[1]:.3f}–{1e3 * t[2]:.3f}]"  # noqa: E731
        ratio = cells["kernel"][1][0] / cells["kernel"][0][0]
        print(
            f"| {n} | {fmt(cells['kernel'][0])} | {fmt(cells['plain'][0])} | "
            f"{fmt(cells['kernel'][1])} | {fmt(cells['plain'][1])} | {ratio:.2f} |"
        )


def part_two(n, d, block):
    x = jnp.zeros((n, d), jnp.float32).at[:, 0].set(1.0)
    field = af.SelfAttention(1.0, block_size=block)
    grad = jax.jit(jax.grad(lambda y: jnp.sum(field(0.0, y) ** 2)))
    memory = grad.lower(x).compile().memory_analysis()
    one_matrix = n * n * 4
    print(
        f"\n### Part 2: reverse mode of one blocked field evaluation, n = {n}, d = {d}, "
        f"block {block}, float32\n\nXLA temporaries {memory.temp_size_in_bytes / 2**20:.1f} MiB; "
        f"one n × n float32 matrix {one_matrix / 2**20:.0f} MiB; n·d·4 bytes "
        f"{n * d * 4 / 2**20:.1f} MiB"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--memory-n", type=int, default=16384)
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--skip-time", action="store_true")
    args = parser.parse_args()
    print(
        f"jax {jax.__version__}, {platform.processor() or platform.machine()}, "
        f"{jax.device_count()} device(s)"
    )
    if not args.skip_time:
        part_one(args.sizes, args.d, args.repeats)
    part_two(args.memory_n, args.d, args.block)


if __name__ == "__main__":
    main()
