"""What eager argument checking adds to a small solve (issue 23: less than 5% at n = 8).

Paired round-robin: each round times one full eager ``attnflow.solve`` call (compiled program
cached, so the call is checks + dispatch + the solve) and, right after, the same call with the
validators of ``attnflow._check`` replaced by pass-throughs (so the only difference is the
checks). The overhead is the median over rounds of the paired ratio, which cancels the drift of a
shared machine. A third timing, the checks alone on solve's arguments, bounds it from below.

    python benchmarks/validation_overhead.py            # n = 8, 200 rounds
    python benchmarks/validation_overhead.py --rounds 5 # smoke test
"""

import argparse
import contextlib
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.random as jr  # noqa: E402

import attnflow as af  # noqa: E402
from attnflow import _check, _solve  # noqa: E402

# The validators solve calls (imported by name into attnflow._solve).
CHECKS = [
    "check_tokens",
    "check_finite_scalar",
    "check_positive_scalar",
    "check_max_steps",
    "check_save_times",
    "check_bool",
]


@contextlib.contextmanager
def checks_disabled():
    saved = {name: getattr(_solve, name) for name in CHECKS if hasattr(_solve, name)}
    try:
        for name in saved:
            setattr(_solve, name, lambda value, *a, **k: value)
        yield
    finally:
        for name, fn in saved.items():
            setattr(_solve, name, fn)


def timed(fn, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn())
    return (time.perf_counter() - start) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--d", type=int, default=3)
    parser.add_argument("--t1", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5, help="calls per timing")
    args = parser.parse_args()

    field = af.SelfAttention(1.0)
    x0 = af.random_tokens(jr.key(0), args.n, args.d)

    def call():
        return af.solve(field, x0, args.t1).ys

    def checks_only():
        _check.check_tokens(x0, "x0")
        _check.check_finite_scalar(0.0, "t0")
        _check.check_finite_scalar(args.t1, "t1")
        _check.check_positive_scalar(1e-6, "rtol", what="tolerance")
        _check.check_positive_scalar(1e-9, "atol", what="tolerance")
        _check.check_max_steps(4096)
        _check.check_bool(True, "throw")
        _check.check_bool(False, "differentiable_twice")
        return x0

    call()  # compile
    with checks_disabled():
        call()
    ratios, full, bare, alone = [], [], [], []
    for round_ in range(args.rounds):
        # Alternate which variant goes first: the second of two back-to-back timings is
        # systematically faster (warm caches), which would bias the paired ratio.
        if round_ % 2 == 0:
            a = timed(call, args.repeats)
            with checks_disabled():
                b = timed(call, args.repeats)
        else:
            with checks_disabled():
                b = timed(call, args.repeats)
            a = timed(call, args.repeats)
        c = timed(checks_only, args.repeats)
        full.append(a)
        bare.append(b)
        alone.append(c)
        ratios.append(a / b)
    med = statistics.median
    print(f"solve n={args.n} d={args.d} t1={args.t1}: {args.rounds} paired rounds")
    print(f"  with checks     {med(full) * 1e3:8.3f} ms (median)")
    print(f"  checks disabled {med(bare) * 1e3:8.3f} ms (median)")
    print(f"  checks alone    {med(alone) * 1e3:8.3f} ms (median)")
    print(f"  overhead        {100 * (med(ratios) - 1):+.2f}% (median of paired ratios)")
    print(f"  checks / solve  {100 * med(alone) / med(bare):.2f}%")


if __name__ == "__main__":
    main()
