"""What eager argument checking adds to a small solve (issue 23: less than 5% at n = 8).

Paired round-robin: each round times one full eager ``attnflow.solve`` call (compiled program
cached, so the call is checks + dispatch + the solve) and, right after, the same call with the
validators of ``attnflow._check`` replaced by pass-throughs (so the only difference is the
checks). The overhead is the median over rounds of the paired ratio, which cancels the drift of a
shared machine. A third timing, the checks alone on solve's arguments, bounds it from below.

    python benchmarks/validation_overhead.py            # n = 8, 200 rounds
    python benchmarks/validation_overhead.py --rounds 5 # smoke test
    python benchmarks/validation_overhead.py --phase    # the phase engine (n = 32, d = 2)

``--phase`` times ``attnflow.phase_diagram`` on a small grid (compiled first) against its own
argument checks alone: the engine validates its arguments once per call, so the checks are a
fixed cost beside a run of seconds.
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
    "check_solve_objects",
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


def phase(rounds):
    from attnflow._phase import _driver

    key = jr.key(0)
    kwargs = dict(n=32, d=2, betas=[1.0, 4.0, 9.0], ts=[2.0, 10.0, 30.0], realizations=64)

    def call():
        return af.phase_diagram(key, progress=False, **kwargs)

    def checks_only():
        _check.check_key(key)
        for name in ("n", "d", "realizations", "max_steps"):
            _driver._positive_int(kwargs.get(name, 2000), name)
        _driver._check_grid(kwargs["betas"], kwargs["ts"])
        _driver._check_delta(1e-3)
        _check.check_positive_scalar(1e-3, "rtol", what="tolerance")
        _check.check_positive_scalar(1e-6, "atol", what="tolerance")
        for name in ("shared_weights", "progress", "statistics"):
            _check.check_bool(False, name)
        _driver._check_statistic_family(None, None, 1e-3)

    jax.block_until_ready(call())  # compile
    runs = [timed(call, 1) for _ in range(rounds)]
    alone = [timed(checks_only, 20) for _ in range(rounds)]
    med = statistics.median
    print(f"phase_diagram n=32 d=2, 3 x 3 grid, 64 realisations: {rounds} runs")
    print(
        f"  run             {med(runs) * 1e3:8.1f} ms (median; min {min(runs) * 1e3:.1f}, "
        f"max {max(runs) * 1e3:.1f})"
    )
    print(f"  checks alone    {med(alone) * 1e3:8.3f} ms (median)")
    print(f"  checks / run    {100 * med(alone) / med(runs):.3f}%")


if __name__ == "__main__":
    import sys

    if "--phase" in sys.argv:
        phase(int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 7)
    else:
        main()
