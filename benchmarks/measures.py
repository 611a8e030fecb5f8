"""Measure optimiser and perceptron flow map (issue 17).

1. `minimize_measure_energy` / `maximize_measure_energy`: wall time to reach a stationarity of
   1e-8 (weight stationarity s_w; with particle moves also s_x) on the circle grid of 10^3 points
   and the Fibonacci set of 10^4 points on S², for
   - a diffuse minimiser, D = diag(1, 1.2) (circle) and diag(1, 1.1, 1.2) (S²), mirror Newton
     (default) against exponentiated gradient alone (newton=False, capped at --eg-steps);
   - an atomic maximiser with particle moves, D = diag(−1, 0.2) (antipodal pair).
2. `Perceptron.flow_map` (closed form, L one-neuron pieces) against diffrax Tsit5
   (rtol = atol = 1e-10, jump_ts at the switches) on n points in R^d, per evaluation.

Every function is compiled first; times are medians of repeats, `block_until_ready`.

Usage: python benchmarks/measures.py [--circle 1000] [--sphere 10000] [--points 10000]
       [--pieces 8] [--repeats 3] [--eg-steps 20000] [--max-repeats R]
Tiny check: python benchmarks/measures.py --circle 64 --sphere 200 --points 100 --repeats 1
"""

import argparse
import platform
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import attnflow as af  # noqa: E402


def median_time(fn, repeats):
    """Median wall time of ``fn()`` after one warm-up (compiling) call, and its last result."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def print_row(name, n, label, seconds, r):
    print(
        f"{name:>6} {n:>6} {label:>22} {seconds:9.3f} {int(r.num_steps):6d} "
        f"{float(r.weight_stationarity):9.1e} {float(r.transport_stationarity):9.1e} "
        f"{bool(r.converged)!s:>5} {r.kind():>15}",
        flush=True,
    )


def optimiser_rows(args):
    rows = []
    print(
        f"{'set':>6} {'N':>6} {'method':>22} {'time [s]':>9} {'steps':>6} {'s_w':>9} "
        f"{'s_x':>9} {'conv':>5} {'kind':>15}",
        flush=True,
    )
    cases = [
        ("circle", args.circle, jnp.diag(jnp.array([1.0, 1.2]))),
        ("S2", args.sphere, jnp.diag(jnp.array([1.0, 1.1, 1.2]))),
    ]
    for name, n, D in cases:
        points = af.landscape.sphere_points(n, D.shape[0])
        for label, kwargs in (
            ("min, mirror Newton", dict(newton=True)),
            ("min, exp. gradient", dict(newton=False, max_steps=args.eg_steps)),
        ):
            seconds, r = median_time(
                lambda D=D, points=points, kwargs=kwargs: af.landscape.minimize_measure_energy(
                    D, points, tol=1e-8, **kwargs
                ),
                args.repeats,
            )
            rows.append((name, n, label, seconds, r))
            print_row(*rows[-1])
        Dmax = jnp.diag(jnp.array([-1.0, 0.2] + [0.1] * (D.shape[0] - 2)))
        seconds, r = median_time(
            lambda Dmax=Dmax, points=points: af.landscape.maximize_measure_energy(
                Dmax, points, tol=1e-8, move_particles=True
            ),
            args.max_repeats or args.repeats,
        )
        rows.append((name, n, "max, particle moves", seconds, r))
        print_row(*rows[-1])
    return rows


def perceptron_rows(args):
    rng = np.random.default_rng(0)
    d, L = 2, args.pieces
    w = jnp.asarray(rng.normal(size=(L, d)))
    a = jnp.asarray(rng.normal(size=(L, d)))
    b = jnp.asarray(rng.normal(size=L))
    field = af.Perceptron(w, a, b, jnp.arange(1.0, L))
    x0 = jnp.asarray(rng.normal(size=(args.points, d)))
    t1 = float(L)
    closed = jax.jit(lambda x: field.flow_map(x, t1)[0])

    @jax.jit
    def numerical(x):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Tsit5(),
            0.0,
            t1,
            0.01,
            x,
            stepsize_controller=diffrax.PIDController(
                rtol=1e-10, atol=1e-10, jump_ts=field.jump_times
            ),
            max_steps=100_000,
        )
        return sol.ys[0]

    t_closed, y_closed = median_time(lambda: closed(x0), args.repeats)
    t_ode, y_ode = median_time(lambda: numerical(x0), args.repeats)
    error = float(jnp.max(jnp.abs(y_closed - y_ode)))
    print(f"perceptron flow map, n = {args.points}, d = {d}, L = {L} pieces, t1 = {t1}")
    print(
        f"  closed form {t_closed * 1e3:9.3f} ms   diffrax Tsit5 {t_ode * 1e3:9.3f} ms   "
        f"ratio {t_ode / t_closed:7.1f}x   max |difference| {error:.1e}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--circle", type=int, default=1000)
    parser.add_argument("--sphere", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--pieces", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--eg-steps", type=int, default=20_000)
    parser.add_argument(
        "--max-repeats", type=int, default=None, help="repeats of the particle-move rows"
    )
    args = parser.parse_args()
    print(f"{platform.node()} {jax.devices()[0].device_kind} jax {jax.__version__} float64")
    optimiser_rows(args)
    perceptron_rows(args)


if __name__ == "__main__":
    main()
