"""Cost of `attnflow.models.limit_geometry` on a trajectory of n tokens (issue 16).

A rescaled pure-attention run (9.3) with the authors' settings (x0 uniform on [−5, 5]^d,
Q = K = I, β = 1) for each geometry of Table 1 (V = I, the authors' 2-d hyperplane V, the
paranormal diag(1, −0.5), the 3-d codimension-k V), then `limit_geometry` on the (T, n, d)
trajectory: median of repeats, split into its parts (convex hull + distances, levels, attention
matrix), and the solve itself for scale.

Usage: python benchmarks/limit_geometry.py [--n 1000] [--repeats 5] [--t1 5]
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
from attnflow.figures.limit_geometries import PANELS, simulate  # noqa: E402


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--t1", type=float, default=5.0)
    parser.add_argument("--num-times", type=int, default=51)
    args = parser.parse_args()
    print(f"# limit_geometry, n = {args.n}, t1 = {args.t1}; {platform.processor() or 'cpu'}")
    print(f"# {jax.devices()}")
    print("| geometry | d | solve + compile (s) | limit_geometry (s) | at z, V = I (s) | verdict |")
    print("|---|---|---|---|---|---|")
    for k, name in enumerate(("polytope", "hyperplanes", "paranormal", "codimension-k")):
        V = PANELS[name]
        d = V.shape[0]
        x0 = jr.uniform(jr.key(k), (args.n, d), jnp.float64, -5.0, 5.0)
        start = time.perf_counter()
        ts, z = simulate(jnp.asarray(V), jnp.eye(d), x0, args.t1, args.num_times)
        solve_s = time.perf_counter() - start
        t = float(ts[-1])
        total = median_time(lambda V=V, z=z, t=t: af.models.limit_geometry(z, V, t=t), args.repeats)
        hull = median_time(
            lambda z=z: af.models.limit_geometry(z[-1], np.eye(z.shape[-1])), args.repeats
        )  # V = I, no time: hull, distances, levels, attention at z
        g = af.models.limit_geometry(z, V, t=t)
        verdict = (
            f"on vertex {g.on_vertex.mean():.2f}, levels {g.num_levels}, "
            f"Boolean distance {g.boolean_distance:.1e}"
        )
        print(f"| {name} | {d} | {solve_s:.2f} | {total:.4f} | {hull:.4f} | {verdict} |")


if __name__ == "__main__":
    main()
