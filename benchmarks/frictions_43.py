"""Timings behind issue #43's frictions, for a quiet machine (the helper's machine was at load
10-14): SphereGrid.evaluate on 20,000 points at L = 32 (pointwise recurrence against the
quadrature path it replaced), and stationary_order_parameter on 241 κ at β = 3 (warm).

    PYTHONPATH=. python benchmarks/frictions_43.py

Prints one line per measurement: the median of 5 warm runs and the first (compiling) call.
"""

import os
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402

import attnflow.meanfield as mf  # noqa: E402
from attnflow import theory  # noqa: E402


def timed(f, repeats=5):
    start = time.perf_counter()
    jax.block_until_ready(f())
    first = time.perf_counter() - start
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f())
        runs.append(time.perf_counter() - start)
    return first, statistics.median(runs)


def main():
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores")
    grid = mf.SphereGrid(32)
    c = jr.normal(jr.key(0), (grid.size,)) / grid.size
    x = jr.normal(jr.key(1), (20_000, 3))
    x = x / jnp.linalg.norm(x, axis=1, keepdims=True)
    first, median = timed(lambda: grid.evaluate(c, x))
    print(f"SphereGrid(32).evaluate, 20,000 points: first {first:.2f} s, median {median:.3f} s")
    first, median = timed(lambda: mf.evaluate_by_quadrature(grid, c, x), repeats=1)
    print(f"evaluate_by_quadrature (the old path):   first {first:.2f} s, then {median:.2f} s")
    kappas = jnp.linspace(0.5, 5.4, 241)
    first, median = timed(lambda: theory.stationary_order_parameter(kappas, beta=3.0, d=2))
    print(
        f"stationary_order_parameter, 241 kappa at beta = 3: first {first:.2f} s, "
        f"median {median:.2f} s"
    )


if __name__ == "__main__":
    main()
