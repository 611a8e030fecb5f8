"""``attnflow demo``: n random tokens clustering under (SA); prints and plots their clustering."""

import json
import sys
import time

from attnflow.commands._args import (
    at_least,
    finite_float,
    output_folder,
    positive_float,
    positive_int,
    seed,
)


def configure(parser):
    parser.add_argument("--n", type=at_least(2), default=32, help="number of tokens (>= 2)")
    parser.add_argument("--d", type=at_least(2), default=3, help="token dimension (>= 2)")
    parser.add_argument(
        "--beta",
        type=finite_float,
        default=4.0,
        help="inverse temperature β (any real: β < 0 is the repulsive model, tokens spread)",
    )
    parser.add_argument("--t1", type=positive_float, default=30.0, help="final time (> 0)")
    parser.add_argument("--steps", type=positive_int, default=60, help="number of save times")
    parser.add_argument("--seed", type=seed, default=0, help="PRNG seed in [0, 2**63 - 1]")
    parser.add_argument("--out", default="attnflow-demo", help="output folder")


def run(args) -> int:
    import jax
    import jax.numpy as jnp
    import jax.random as jr
    import numpy as np
    from tqdm import tqdm

    import attnflow as af
    from attnflow import plot

    jax.config.update("jax_enable_x64", True)
    out = output_folder(args.out)
    field = af.SelfAttention(args.beta)
    ts = np.linspace(0.0, args.t1, args.steps + 1)
    x = af.random_tokens(jr.key(args.seed), args.n, args.d)

    def segment(x, t0, t1):
        # An eager solve, one compiled program for every segment (t0 and t1 are its arguments):
        # the checks of x, t0, t1 and the diagnosis of a failed solve run on the host, so the
        # program holds no host callback and the next run loads it from the compilation cache
        # (a jitted segment checks its traced arguments inside, which jax 0.10.2 never caches).
        return af.solve(field, x, t1, t0=t0).ys[-1]

    # Compile first (with the first segment), as its own phase: the bar then counts time of the
    # flow, not compilation.
    print("compiling the (SA) solve ...", end=" ", file=sys.stderr, flush=True)
    compiling = time.perf_counter()
    first = segment(x, ts[0], ts[1]).block_until_ready()
    print(f"{time.perf_counter() - compiling:.1f} s", file=sys.stderr, flush=True)
    start = time.perf_counter()
    xs, fractions, clusters = [x], [float(af.clustered_fraction(x))], [int(af.count_clusters(x))]
    # On a terminal a bar in units of flow time t; in a log file (not a terminal) one plain line
    # per tenth of the horizon instead of carriage-return redraws.
    terminal = sys.stderr.isatty()
    bar = tqdm(total=float(args.t1), desc="solving (SA), t", disable=not terminal, unit="")
    bar.bar_format = "{l_bar}{bar}| {n:.3g}/{total:.3g} [{elapsed}<{remaining}]"
    logged = 0
    for k, (t0, t1) in enumerate(zip(ts[:-1], ts[1:], strict=True)):
        x = first if k == 0 else segment(x, t0, t1)
        xs.append(x)
        fractions.append(float(af.clustered_fraction(x)))
        clusters.append(int(af.count_clusters(x)))
        bar.update(t1 - t0)
        if not terminal and int(10 * t1 / args.t1) > logged:
            logged = int(10 * t1 / args.t1)
            seconds = time.perf_counter() - start
            print(f"solving (SA): t = {t1:g} of {args.t1:g} ({seconds:.1f} s)", file=sys.stderr)
    bar.close()
    elapsed = time.perf_counter() - start
    for t, f, c in list(zip(ts, fractions, clusters, strict=True))[:: max(1, args.steps // 10)]:
        print(f"t = {t:6.2f}   clustered fraction = {f:.3f}   clusters = {c}")
    np.savez(
        out / "demo.npz",
        ts=ts,
        xs=np.asarray(jnp.stack(xs)),
        clustered_fraction=fractions,
        clusters=clusters,
    )
    (out / "demo.json").write_text(
        json.dumps(
            {**{k: v for k, v in vars(args).items() if not k.startswith("_")}, "seconds": elapsed},
            indent=2,
        )
    )
    plot.clustered_fraction_curve(
        ts,
        np.asarray(fractions),
        path=out / "demo.png",
        title=f"(SA) n={args.n} d={args.d} β={args.beta}",
    )
    print(f"wrote {out / 'demo.png'}, {out / 'demo.npz'}")
    return 0
