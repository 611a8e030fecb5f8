"""Work-precision of `attnflow.solve` for (SA), β = 1, d = 64, t1 = 10 (issue 2).

Compared in one run, each against a tight float64 reference (attnflow Tsit5, rtol = atol = 1e-12,
cross-checked against scipy DOP853 at n = 32):
- attnflow over tolerances, float32 and float64 (compiled once, median of repeats);
- the paper's own scheme in NumPy: explicit Euler on the unprojected field, step 0.1, renormalised;
- scipy.integrate.solve_ivp(DOP853) on the projected field;
- raw `diffrax.diffeqsolve` with the same solver and controller (the overhead of `solve`).

Usage: python benchmarks/solve.py [--ns 32 256 1024] [--repeats 5]
"""

import argparse
import platform
import time

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from scipy.integrate import solve_ivp

jax.config.update("jax_enable_x64", True)
import attnflow as af  # noqa: E402

BETA, D, T1 = 1.0, 64, 10.0


# Tsit5 evaluates the field 6 times per step (7 stages, the last reused as the next first).
TSIT5_EVALUATIONS = 6


def field_flops(field, x):
    """FLOPs of one evaluation of ``field`` at x, from XLA's cost analysis."""
    compiled = jax.jit(lambda x: field(0.0, x, None)).lower(x).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost.get("flops", float("nan")))


def median_time(fn, repeats):
    fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def numpy_field(x):
    logits = BETA * x @ x.T
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ x


def numpy_euler(x0, step=0.1):
    x = x0.copy()
    for _ in range(round(T1 / step)):
        x = x + step * numpy_field(x)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def scipy_dop853(x0, rtol, atol):
    n, d = x0.shape

    def rhs(t, y):
        x = y.reshape(n, d)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        v = numpy_field(x)
        return (v - np.sum(v * x, axis=1, keepdims=True) * x).ravel()

    out = solve_ivp(rhs, (0.0, T1), x0.ravel(), method="DOP853", rtol=rtol, atol=atol)
    x = out.y[:, -1].reshape(n, d)
    return x / np.linalg.norm(x, axis=1, keepdims=True), out.nfev


def error(x, ref):
    return float(np.max(np.abs(np.asarray(x, np.float64) - ref)))


def run(n, repeats, tolerances=4):
    field = af.SelfAttention(BETA)
    x0 = af.random_tokens(jr.key(n), n, D)
    reference = np.asarray(af.solve(field, x0, T1, rtol=1e-12, atol=1e-12, max_steps=100000).ys[-1])
    rows = []
    flops = field_flops(field, x0)

    for dtype in (jnp.float32, jnp.float64):
        x = x0.astype(dtype)
        grid = (1e-3, 1e-4, 1e-5, 1e-6) if dtype == jnp.float32 else (1e-4, 1e-6, 1e-8, 1e-10)
        for tol in grid[:tolerances]:
            fn = jax.jit(lambda x, tol=tol: af.solve(field, x, T1, rtol=tol, atol=tol))
            start = time.perf_counter()
            sol = jax.block_until_ready(fn(x))
            compile_s = time.perf_counter() - start
            seconds = median_time(lambda fn=fn, x=x: jax.block_until_ready(fn(x).ys), repeats)
            rows.append(
                (
                    f"attnflow Tsit5 {jnp.dtype(dtype).name} tol={tol:g}",
                    seconds,
                    int(sol.stats["num_steps"]),
                    error(sol.ys[-1], reference),
                    compile_s,
                    TSIT5_EVALUATIONS * int(sol.stats["num_steps"]),
                )
            )

    x0_np = np.asarray(x0)
    seconds = median_time(lambda: numpy_euler(x0_np), max(1, repeats // 2))
    rows.append(
        (
            "NumPy Euler h=0.1 (paper's scheme)",
            seconds,
            100,
            error(numpy_euler(x0_np), reference),
            0.0,
            100,
        )
    )
    for tol in (1e-6, 1e-9):
        start = time.perf_counter()
        x_sp, nfev = scipy_dop853(x0_np, tol, tol)
        rows.append(
            (
                f"scipy DOP853 tol={tol:g}",
                time.perf_counter() - start,
                nfev // 12,
                error(x_sp, reference),
                0.0,
                nfev,
            )
        )

    # Overhead of `solve` over calling diffrax directly with the same solver and controller.
    def raw(x):
        term = diffrax.ODETerm(lambda t, y, args: field(t, y, args))
        return diffrax.diffeqsolve(
            term,
            diffrax.Tsit5(),
            0.0,
            T1,
            None,
            x,
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6),
            max_steps=4096,
        ).ys

    raw_fn = jax.jit(raw)
    ours_fn = jax.jit(lambda x: af.solve(field, x, T1, rtol=1e-6, atol=1e-6).ys)
    overhead = median_time(lambda: jax.block_until_ready(ours_fn(x0)), repeats) / median_time(
        lambda: jax.block_until_ready(raw_fn(x0)), repeats
    )
    return rows, overhead, flops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ns", type=int, nargs="+", default=[32, 256, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--tolerances", type=int, default=4, help="the first N tolerances of each dtype's grid"
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {jax.devices()}, "
        f"jax {jax.__version__}"
    )
    for n in args.ns:
        rows, overhead, flops = run(n, args.repeats, args.tolerances)
        euler_time, euler_err = next((r[1], r[3]) for r in rows if r[0].startswith("NumPy"))
        print(f"\n### n = {n}, d = {D}, β = {BETA}, t1 = {T1}\n")
        print(
            "| method | median time (s) | steps | field evaluations | GFLOP (XLA) | max error "
            "| compile (s) | speed-up vs NumPy |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for name, seconds, steps, err, compile_s, evaluations in rows:
            print(
                f"| {name} | {seconds:.4f} | {steps} | {evaluations} | "
                f"{evaluations * flops / 1e9:.3f} | {err:.2e} | {compile_s:.2f} | "
                f"{euler_time / seconds:.1f}× |"
            )
        print(
            f"\nGFLOP: field evaluations × {flops / 1e6:.3f} MFLOP per evaluation (XLA cost "
            "analysis of one projected field evaluation; Tsit5 evaluations are 6 per step, "
            "not counting the first-step selection)."
        )
        good = [r for r in rows if r[0].startswith("attnflow") and r[3] <= euler_err]
        best = min(good, key=lambda r: r[1])
        print(
            f"\nfastest attnflow setting at least as accurate as NumPy Euler: {best[0]} — "
            f"{euler_time / best[1]:.1f}× faster (error {best[3]:.1e} vs {euler_err:.1e})"
        )
        print(f"`solve` / raw `diffeqsolve` time ratio (Tsit5, tol 1e-6): {overhead:.3f}")


if __name__ == "__main__":
    main()
