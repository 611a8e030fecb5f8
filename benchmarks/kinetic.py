"""Issue 15 benchmarks: lost in the middle, and the time-rescaled staircase.

In one run:
- the closed-form profile `attnflow.theory.lost_in_the_middle_profile`: time per profile
  (400 source positions, one t; compiled once, median of repeats), float64 and float32;
- the particle Monte Carlo of the causal ALiBi model on the circle: the JAX engine of
  `attnflow.figures.lost_in_the_middle` (vmapped RK4 of the θ-equation) against a NumPy RK4 of
  the same model (the authors' per-token loop, vectorised over realisations), same initial
  angles, same steps; the maximum difference of the final angles is printed as a check;
- `attnflow.models.rescaled_staircase` from uniform angles, n = 32, β = 100 and 1000 (median over
  seeds, after compilation), with the number of steps and merges.

Usage: python benchmarks/kinetic.py [--quick] [--repeats 5]
"""

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import attnflow as af  # noqa: E402
import attnflow.theory as th  # noqa: E402
from attnflow.figures import lost_in_the_middle as litm  # noqa: E402


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def numpy_rk4(theta, beta, lam, dt, steps):
    """RK4 of θ̇_j = Σ_{k<j} w_jk (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}), θ (R, N)."""
    N = theta.shape[-1]
    weights = [np.exp(-lam * (j - np.arange(j)) / N) for j in range(N)]
    weights = [w / w.sum() if j else w for j, w in enumerate(weights)]

    def force(th_):
        out = np.zeros_like(th_)
        for j in range(1, N):
            diff = th_[:, j : j + 1] - th_[:, :j]
            out[:, j] = (-beta * np.sin(diff) * np.exp(beta * np.cos(diff))) @ weights[j]
        return out

    for _ in range(steps):
        k1 = force(theta)
        k2 = force(theta + dt / 2 * k1)
        k3 = force(theta + dt / 2 * k2)
        k4 = force(theta + dt * k3)
        theta = theta + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return theta


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    print(f"machine: {platform.processor() or platform.machine()}, {jax.devices()}")

    s = np.linspace(0.01, 1.0, 400)
    for dtype in (np.float64, np.float32):
        sd, one = s.astype(dtype), dtype(1.5)
        seconds = median_time(
            lambda sd=sd, one=one: th.lost_in_the_middle_profile(
                sd, one, 1.0, 1.0
            ).block_until_ready(),
            repeats,
        )
        print(
            f"closed form, 400 points, {np.dtype(dtype).name}: {seconds * 1e3:.3f} ms per profile"
        )

    N, R, dt, t1 = (16, 8, 0.1, 1.0) if args.quick else (32, 256, 0.025, 2.0)
    steps = round(t1 / dt)
    theta0 = np.random.default_rng(0).uniform(0, 2 * np.pi, (R, N))
    jax_run = lambda: litm.simulate_angles(
        jnp.asarray(theta0), [t1], 1.0, 1.0, dt
    ).block_until_ready()  # noqa: E731
    t_jax = median_time(jax_run, repeats)
    start = time.perf_counter()
    reference = numpy_rk4(theta0, 1.0, 1.0, dt, steps)
    t_numpy = time.perf_counter() - start
    difference = np.abs(np.asarray(jax_run())[0] - reference).max()
    print(
        f"Monte Carlo, N = {N}, {R} realisations, {steps} RK4 steps: JAX {t_jax:.3f} s, "
        f"NumPy {t_numpy:.3f} s (x{t_numpy / t_jax:.1f}); max |Δθ| = {difference:.1e}"
    )
    start = time.perf_counter()
    litm.monte_carlo_profile(
        jax.random.key(0), N, [t1], [0.25, 0.5, 0.75], 1.0, 1.0, realizations=R, dt=dt
    )
    elapsed = time.perf_counter() - start
    print(f"coupling estimator, 3 sources (4 runs per realisation, with compile): {elapsed:.3f} s")

    n = 8 if args.quick else 32
    seeds = range(2 if args.quick else 5)
    for beta in (100.0, 1000.0):
        af.models.rescaled_staircase(np.random.default_rng(99).uniform(0, 2 * np.pi, n), beta)
        times, steps_taken, merges = [], [], []
        for seed in seeds:
            theta = np.random.default_rng(seed).uniform(0, 2 * np.pi, n)
            start = time.perf_counter()
            run = af.models.rescaled_staircase(theta, beta)
            times.append(time.perf_counter() - start)
            steps_taken.append(run.steps)
            merges.append(len(run.merges))
            assert run.finished and np.all(np.isfinite(run.energy))
        print(
            f"rescaled staircase n = {n}, β = {beta:g}: median {np.median(times):.3f} s, "
            f"steps {steps_taken}, merges {merges}"
        )


if __name__ == "__main__":
    main()
