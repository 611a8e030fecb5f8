"""Work-precision of one solve: attnflow against NumPy Euler and scipy DOP853 (issue 13 §2).

The problem: (SA) with Q = K = V = I, β = 1, n = 256 tokens in d = 64, t ∈ [0, 10], tokens
``random_tokens(key(0), n, d)`` drawn once in float64 (and cast to float32 for float32 runs).

Every method runs in this process, against one reference: scipy ``solve_ivp`` DOP853 at
rtol = atol = 1e-13 on the projected field written in NumPy, final state renormalised. The error
of a method is max |x_T − ref| over all entries.

- attnflow ``solve`` (Tsit5, PID), jitted and compiled before timing, float32 and float64 over
  rtol, with atol = 1e-3·rtol (``solve`` raises float32 tolerances to rtol ≥ 1e-5, atol ≥ 1e-6);
- the paper's scheme in NumPy: x ← normalize(x + h·softmax(β x xᵀ) x), BLAS products;
- scipy DOP853 on the same NumPy field over rtol (atol = 1e-3·rtol).

Each point is the median and min–max of ``--repeats`` runs after one untimed warm-up, in wall time
and process CPU time (``time.process_time``, all threads), so differing thread counts show. The
speed-up at matched error interpolates each series' time in log-log, within its measured range only.

Usage: python benchmarks/work_precision.py [--repeats 5] [--json PATH] [--png PATH] [--quick]
"""

import argparse
import json
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import scipy
from scipy.integrate import solve_ivp

jax.config.update("jax_enable_x64", True)
from solve import field_flops  # noqa: E402  (benchmarks/solve.py)

import attnflow as af  # noqa: E402

BETA = 1.0
FULL = dict(
    n=256,
    d=64,
    t1=10.0,
    float32=(1e-2, 1e-3, 1e-4, 1e-5),
    # float64 and DOP853 start at loose rtol so that their measured error ranges bracket the
    # 1e-4 and 1e-6 targets: at rtol = 1e-4 they are already near 1e-6 and 1e-7 errors.
    float64=(1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10),
    euler=(0.1, 0.03, 0.01, 0.003),
    dop853=(1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8),
)
QUICK = dict(
    n=32,
    d=8,
    t1=2.0,
    float32=(1e-3, 1e-4),
    float64=(1e-3, 1e-5, 1e-7),
    euler=(0.1, 0.01),
    dop853=(1e-3, 1e-5),
)
TARGETS = (1e-4, 1e-6)


def softmax_field(x):
    logits = BETA * (x @ x.T)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ x


def normalize(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def numpy_rhs(n, d):
    def rhs(t, y):
        x = y.reshape(n, d)
        v = softmax_field(x)
        return (
            v - (np.sum(x * v, axis=1, keepdims=True) / np.sum(x * x, axis=1)[:, None]) * x
        ).ravel()

    return rhs


def dop853(x0, t1, rtol, atol):
    n, d = x0.shape
    out = solve_ivp(numpy_rhs(n, d), (0.0, t1), x0.ravel(), method="DOP853", rtol=rtol, atol=atol)
    if not out.success:
        raise RuntimeError(f"DOP853 failed at rtol={rtol:g}: {out.message}")
    return normalize(out.y[:, -1].reshape(n, d)), int(out.nfev)


def euler(x0, t1, steps):
    # t1 / steps is the step actually taken (h rounded so that the last step lands on t1).
    h = t1 / steps
    x = x0.copy()
    for _ in range(steps):
        x = normalize(x + h * softmax_field(x))
    return x


def timed(fn, repeats):
    """Run fn once untimed (compile, warm caches), then `repeats` times: (result, walls, cpus)."""
    result = fn()
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return result, walls, cpus


def point(series, setting, err, walls, cpus, work):
    return dict(
        series=series,
        setting=setting,
        error=err,
        wall_median=statistics.median(walls),
        wall_min=min(walls),
        wall_max=max(walls),
        cpu_median=statistics.median(cpus),
        walls=walls,
        cpus=cpus,
        work=work,
    )


def max_error(x, ref):
    return float(np.max(np.abs(np.asarray(x, np.float64) - ref)))


def run(cfg, repeats):
    n, d, t1 = cfg["n"], cfg["d"], cfg["t1"]
    x64 = af.random_tokens(jr.key(0), n, d, dtype=jnp.float64)
    x0 = np.asarray(x64)
    w0 = time.perf_counter()
    ref, nfev = dop853(x0, t1, 1e-13, 1e-13)
    print(
        f"reference: DOP853 rtol = atol = 1e-13, {nfev} evaluations, "
        f"{time.perf_counter() - w0:.1f} s"
    )

    field = af.SelfAttention(BETA)
    # Work beside time: field evaluations and their FLOPs (XLA's count for one evaluation; the
    # NumPy field does the same products).
    flops = field_flops(field, x64)

    def work(evaluations, prefix=""):
        return f"{prefix}{evaluations} evals, {evaluations * flops / 1e9:.3f} GFLOP"

    points = []
    for dtype, rtols in ((jnp.float32, cfg["float32"]), (jnp.float64, cfg["float64"])):
        x = x64.astype(dtype)
        name = f"attnflow {jnp.dtype(dtype).name}"
        for r in rtols:
            fn = jax.jit(lambda x, r=r: af.solve(field, x, t1, rtol=r, atol=r * 1e-3))
            sol, walls, cpus = timed(lambda fn=fn, x=x: jax.block_until_ready(fn(x)), repeats)
            steps = int(sol.stats["num_steps"])
            err = max_error(sol.ys[-1], ref)
            # Tsit5: 6 new stages a step (first-same-as-last), one more evaluation at the start.
            label = work(6 * steps + 1, f"{steps} steps, ")
            points.append(point(name, f"rtol={r:g}", err, walls, cpus, label))

    for h in cfg["euler"]:
        steps = round(t1 / h)
        x, walls, cpus = timed(lambda steps=steps: euler(x0, t1, steps), repeats)
        points.append(point("NumPy Euler", f"h={h:g}", max_error(x, ref), walls, cpus, work(steps)))

    for r in cfg["dop853"]:
        (x, nfev), walls, cpus = timed(lambda r=r: dop853(x0, t1, r, r * 1e-3), repeats)
        points.append(
            point("scipy DOP853", f"rtol={r:g}", max_error(x, ref), walls, cpus, work(nfev))
        )
    return points


def time_at(points, series, target):
    """Wall median at error `target`, log-log interpolated between consecutive settings of one
    series that bracket it (the fastest such segment); None when the series never brackets it."""
    pts = [p for p in points if p["series"] == series]
    best = None
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        lo, hi = sorted((a["error"], b["error"]))
        if not (lo <= target <= hi) or lo <= 0:
            continue
        if hi == lo:
            t = min(a["wall_median"], b["wall_median"])
        else:
            s = (np.log(target) - np.log(a["error"])) / (np.log(b["error"]) - np.log(a["error"]))
            t = float(
                np.exp(
                    np.log(a["wall_median"])
                    + s * (np.log(b["wall_median"]) - np.log(a["wall_median"]))
                )
            )
        best = t if best is None else min(best, t)
    if best is None:
        exact = [p["wall_median"] for p in pts if p["error"] == target]
        best = min(exact) if exact else None
    return best


def machine():
    load = os.getloadavg()
    return dict(
        python=platform.python_version(),
        jax=jax.__version__,
        numpy=np.__version__,
        scipy=scipy.__version__,
        attnflow=getattr(af, "__version__", "?"),
        cpus=os.cpu_count(),
        jax_devices=str(jax.devices()),
        processor=platform.processor() or platform.machine(),
        threads_env={
            k: os.environ[k]
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")
            if k in os.environ
        },
        load_before=load,
    )


def table(points):
    lines = [
        "| method | setting | work | error | wall median [min–max] (ms) | CPU median (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for p in points:
        lines.append(
            f"| {p['series']} | {p['setting']} | {p['work']} | {p['error']:.2e} | "
            f"{1e3 * p['wall_median']:.2f} [{1e3 * p['wall_min']:.2f}–{1e3 * p['wall_max']:.2f}] | "
            f"{1e3 * p['cpu_median']:.2f} |"
        )
    return "\n".join(lines)


def matched(points):
    series = list(dict.fromkeys(p["series"] for p in points))
    ours = [s for s in series if s.startswith("attnflow")]
    rows, lines = [], []
    for target in TARGETS:
        times = {s: time_at(points, s, target) for s in series}

        def fmt(t):
            return "not reached" if t is None else f"{1e3 * t:.2f} ms"

        lines.append(f"\nat error {target:g} (wall median, log-log interpolated):")
        lines += [f"- {s}: {fmt(times[s])}" for s in series]
        for s in ours:
            for base in ("NumPy Euler", "scipy DOP853"):
                if times[s] is None or times.get(base) is None:
                    ratio = None
                    missing = " and ".join(x for x in (s, base) if times.get(x) is None)
                    lines.append(f"- {s} vs {base}: no ratio ({missing} not reached)")
                else:
                    ratio = times[base] / times[s]
                    lines.append(f"- {s} vs {base}: {ratio:.2f}× ({base} time / attnflow time)")
                rows.append(dict(target=target, attnflow=s, baseline=base, ratio=ratio))
        rows.append(dict(target=target, times=times))
    return rows, "\n".join(lines)


def plot(points, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for s in dict.fromkeys(p["series"] for p in points):
        pts = [p for p in points if p["series"] == s]
        err = [p["error"] for p in pts]
        wall = np.array([p["wall_median"] for p in pts])
        spread = [wall - [p["wall_min"] for p in pts], [p["wall_max"] for p in pts] - wall]
        ax.errorbar(err, wall, yerr=spread, marker="o", capsize=3, label=s)
        for p in pts:
            ax.annotate(p["setting"], (p["error"], p["wall_median"]), fontsize=6, alpha=0.7)
    for target in TARGETS:
        ax.axvline(target, color="grey", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("max |x_T − reference|")
    ax.set_ylabel("wall time, median (s)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per point (≥ 1)")
    parser.add_argument("--json", help="write every point, the machine and the ratios here")
    parser.add_argument("--png", help="write the log-log work-precision plot here")
    parser.add_argument(
        "--quick", action="store_true", help="n=32, d=8, t1=2, 1 repeat, fewer settings"
    )
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    repeats = 1 if args.quick else args.repeats
    if repeats < 1:
        parser.error(f"--repeats must be ≥ 1, got {repeats}")

    info = machine()
    title = f"(SA) β = {BETA:g}, n = {cfg['n']}, d = {cfg['d']}, t1 = {cfg['t1']:g}"
    print(f"# Work-precision: {title}\n")
    print(
        f"python {info['python']}, jax {info['jax']}, numpy {info['numpy']}, "
        f"scipy {info['scipy']}; "
        f"{info['cpus']} CPUs ({info['processor']}), {info['jax_devices']}"
    )
    if info["threads_env"]:
        print(f"thread settings: {info['threads_env']}")
    print(f"load average before (1, 5, 15 min): {info['load_before']}")
    print(
        f"repeats per point: {repeats}"
        + (" (quick mode: not for the record)" if args.quick else "")
    )

    points = run(cfg, repeats)
    info["load_after"] = os.getloadavg()

    print()
    print(table(points))
    ratios, text = matched(points)
    print(text)
    print(f"\nload average after (1, 5, 15 min): {info['load_after']}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                dict(config=cfg, repeats=repeats, machine=info, points=points, matched=ratios),
                f,
                indent=1,
            )
    if args.png:
        plot(points, args.png, title)


if __name__ == "__main__":
    main()
