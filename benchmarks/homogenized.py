"""Deep random multi-head attention against its homogenised SDE at equal Monte Carlo accuracy.

Target: E ρ(T), ρ = ⟨x_1, x_2⟩, for the random model with Q = K = I held fixed and Gaussian values
(diffusive scaling), n tokens in dimension d at temperature β, from one fixed initial
configuration. Each method runs a batch of R paths (vmapped, compiled once, median of repeats);
from the per-path time and the sample variance of ρ(T) we report the number of paths and the
time needed for a standard error ``--se`` — the cost at equal Monte Carlo accuracy — and the
estimate itself, to see the discretisation bias of each (L layers, or SDE step dt) against the
finest run.

- discrete: `layers(random_multihead_attention(..., fixed={"Q": I, "K": I}), x0, L, T/L)`
  for several depths L and head counts H (the weights are drawn inside the timed function);
- SDE: `solve_homogenized(..., brownian="fast")` (Euler–Maruyama) for several steps dt.

Usage: python benchmarks/homogenized.py [--n 8] [--d 16] [--beta 1] [--paths 2000] [--se 0.005]
"""

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

jax.config.update("jax_enable_x64", True)
import attnflow as af  # noqa: E402


def median_time(fn, repeats):
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--t1", type=float, default=1.0)
    parser.add_argument("--paths", type=int, default=2000)
    parser.add_argument("--se", type=float, default=0.005)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--dts", type=float, nargs="+", default=[1 / 8, 1 / 32, 1 / 128])
    args = parser.parse_args()
    n, d, T, R = args.n, args.d, args.t1, args.paths
    x0 = af.random_tokens(jr.key(0), n, d)
    eye = jnp.eye(d)
    keys = jr.split(jr.key(1), R)

    def discrete(L, H):
        def one(key):
            f = af.random_multihead_attention(
                key, d, num_layers=L, num_heads=H, t1=T, beta=args.beta, fixed={"Q": eye, "K": eye}
            )
            x = af.layers(f, x0, L, T / L)[-1]
            return x[0] @ x[1]

        return jax.jit(jax.vmap(one))

    def sde(dt):
        def one(key):
            x = af.solve_homogenized(x0, T, beta=args.beta, key=key, dt=dt, brownian="fast").ys[-1]
            return x[0] @ x[1]

        return jax.jit(jax.vmap(one))

    runs = [(f"discrete L = {L}, H = {H}", discrete(L, H)) for L in args.layers for H in args.heads]
    runs += [(f"SDE dt = 1/{round(1 / dt)}", sde(dt)) for dt in args.dts]
    print(f"# E ρ(T): n = {n}, d = {d}, β = {args.beta}, T = {T}, {R} paths per batch")
    print(f"# {platform.processor() or 'cpu'}, {jax.devices()}")
    print(
        "| method | µs / path | Var ρ(T) | paths for s.e. "
        f"{args.se} | time for s.e. {args.se} (s) | E ρ(T) ± s.e. |"
    )
    print("|---|---|---|---|---|---|")
    for name, fn in runs:
        seconds = median_time(lambda fn=fn: fn(keys), args.repeats)
        rho = np.asarray(fn(keys))
        var = float(rho.var(ddof=1))
        per_path = seconds / R
        needed = int(np.ceil(var / args.se**2))
        print(
            f"| {name} | {1e6 * per_path:.1f} | {var:.4f} | {needed} | {needed * per_path:.3f} | "
            f"{rho.mean():.4f} ± {np.sqrt(var / R):.4f} |"
        )


if __name__ == "__main__":
    main()
