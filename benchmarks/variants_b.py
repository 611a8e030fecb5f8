"""Cost of the issue-6 part B variants relative to plain (SA) for the same n, d, t1.

For each variant: one vector-field evaluation, one adaptive solve (Tsit5, rtol 1e-6) to t1, and
for the normalisation schemes a discrete run of t1/h layers. Everything is compiled first, timed
with block_until_ready (process CPU time by default, robust on a shared machine; --wall for wall
time), and the median of the repeats is reported with the ratio to plain SA measured in the same
process. Run: ``python benchmarks/variants_b.py [--n 64] [--d 8]``.
"""

import argparse
import random
import statistics
import time

import jax
import jax.numpy as jnp
import jax.random as jr

import attnflow as af


def median_times(fns, x, repeats, inner=1, clock=time.process_time):
    """Median time of each fn(x), compiled first. Repeats visit the functions in a fresh random
    order so that load from other jobs hits every variant alike; the default clock is this
    process's CPU time, which other jobs on a shared machine do not inflate (pass
    ``time.perf_counter`` for wall time on an idle machine)."""
    for fn in fns:
        jax.block_until_ready(fn(x))
    times = [[] for _ in fns]
    order = list(range(len(fns)))
    for _ in range(repeats):
        random.shuffle(order)
        for i in order:
            start = clock()
            for _ in range(inner):
                jax.block_until_ready(fns[i](x))
            times[i].append((clock() - start) / inner)
    return [statistics.median(record) for record in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--d", type=int, default=8)
    parser.add_argument("--t1", type=float, default=10.0)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--wall", action="store_true", help="wall clock instead of CPU time")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    n, d, beta, t1 = args.n, args.d, args.beta, args.t1
    random.seed(0)
    x0 = af.random_tokens(jr.key(0), n, d)
    eye = jnp.eye(d)

    fields = {
        "SA (baseline)": af.SelfAttention(beta),
        "causal SA": af.SelfAttention(beta, causal=True),
        "repulsive SA (V = -I)": af.SelfAttention(beta, V=-eye),
        "repulsive USA as GradientFlow(descent)": af.GradientFlow(
            af.InteractionEnergy(beta), af.WassersteinMetric(), descent=True
        ),
        "ALiBi causal (m = 0.1)": af.PositionalAttention(beta, af.alibi_bias(n, 0.1)),
        "ALiBi bidirectional (m = 0.1)": af.PositionalAttention(
            beta, af.alibi_bias(n, 0.1, causal=False)
        ),
        "Sinkhorn (tol 100 eps)": af.SinkhornAttention(beta),
        "Sinkhorn (10 sweeps fixed)": af.SinkhornAttention(beta, iterations=10, tolerance=0.0),
    }
    sublayer = af.AttentionSublayer(af.SelfAttention(beta))
    schemes = {
        "post-LN": af.PostLN(),
        "pre-LN": af.PreLN(),
        "peri-LN": af.PeriLN(),
        "nGPT": af.NGPT(),
    }

    names, rhs_fns, solve_fns = [], [], []
    for name, field in fields.items():
        names.append(name)
        rhs_fns.append(jax.jit(lambda x, field=field: field(0.0, x)))
        solve_fns.append(jax.jit(lambda x, field=field: af.solve(field, x, t1)))
    for name, scheme in schemes.items():
        names.append(f"{name} flow")
        rhs_fns.append(jax.jit(lambda z, scheme=scheme: scheme.vector_field(sublayer, 0.0, z)))
        solve_fns.append(jax.jit(lambda z, scheme=scheme: scheme.solve(sublayer, z, t1)))
    steps = [int(solve(x0).stats["num_steps"]) for solve in solve_fns]
    clock = time.perf_counter if args.wall else time.process_time
    rhs_times = median_times(rhs_fns, x0, args.repeats, inner=20, clock=clock)
    solve_times = median_times(solve_fns, x0, args.repeats, clock=clock)
    rows = list(zip(names, rhs_times, solve_times, steps, strict=True))

    base_rhs, base_solve = rows[0][1], rows[0][2]
    print(
        f"n = {n}, d = {d}, beta = {beta}, t1 = {t1}, float64, {jax.devices()[0].platform}, "
        f"{'wall' if args.wall else 'process CPU'} time; median of {args.repeats} repeats in "
        "random order (field: mean of 20 calls per repeat)\n"
    )
    print("| variant | field eval (µs) | ratio | solve (ms) | ratio | steps |")
    print("|---|---|---|---|---|---|")
    for name, rhs_time, solve_time, steps in rows:
        print(
            f"| {name} | {1e6 * rhs_time:.1f} | {rhs_time / base_rhs:.2f} | "
            f"{1e3 * solve_time:.2f} | {solve_time / base_solve:.2f} | {steps} |"
        )

    num_layers = round(t1 / args.step)
    layer_fns = [jax.jit(lambda x: af.layers(af.SelfAttention(beta), x, num_layers, args.step))]
    layer_fns += [
        jax.jit(lambda z, scheme=scheme: scheme.layers(sublayer, z, num_layers, args.step))
        for scheme in schemes.values()
    ]
    layer_times = median_times(layer_fns, x0, args.repeats, clock=clock)
    print(f"\nDiscrete layers: {num_layers} layers of step {args.step}\n")
    print("| scheme | layers (ms) | ratio to af.layers(SA) |")
    print("|---|---|---|")
    for name, elapsed in zip(["af.layers(SA) (baseline)", *schemes], layer_times, strict=True):
        print(f"| {name} | {1e3 * elapsed:.2f} | {elapsed / layer_times[0]:.2f} |")


if __name__ == "__main__":
    main()
