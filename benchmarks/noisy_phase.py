"""The noisy phase diagram (issue 42): time of each panel of ``attnflow figure noisy-phase``
(compilation separated from the sweep) and its counted work per point.

For each panel (SA and USA on S¹ and S²) at the preset's sizes, the diagram is computed twice
with the same shapes: the first call compiles (one program per panel) and sweeps, the second
reuses the compiled program, so ``second`` is the sweep alone and ``first − second`` the
compilation. The work is counted from the result: steps per solve (accepted + rejected; each step
6 transport evaluations of KenCarp4) and the batched steps (a vmapped column runs the largest
step count of its batch). Run it on a quiet machine; the figure itself records its phases in
``noisy-phase.json`` (``timings_s``).

Usage: python benchmarks/noisy_phase.py [--preset quick|default|full] [--panels usa_s1 ...]
       [--json PATH]
"""

import argparse
import json
import platform
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from attnflow import meanfield as mf  # noqa: E402
from attnflow.figures import noisy_phase as fig  # noqa: E402


def run_panel(params, normalization, d, calls):
    grid, betas = fig.panel_grid(params, normalization, d)
    options = fig.diagram_options(params)
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        pd = mf.noisy_phase_diagram(
            grid, betas, normalization=normalization, theory=False, **options
        )
        jax.block_until_ready(pd.order_parameter)
        seconds.append(time.perf_counter() - start)
    steps = np.asarray(pd.steps)
    batch = min(4 if d == 2 else 1, steps.shape[1])
    return {
        "points": int(steps[0].size),
        "degree": grid.max_degree(),
        "betas": [float(min(betas)), float(max(betas)), len(betas)],
        "first_s": seconds[0],
        "sweep_s": seconds[-1] if calls > 1 else None,
        "compile_s": seconds[0] - seconds[-1] if calls > 1 else None,
        "steps_per_solve_mean": float(steps.mean()),
        "steps_per_solve_max": int(steps.max()),
        "steps_total": int(steps.sum()),
        # a vmapped batch runs as many steps as its slowest member (batch_size's default)
        "batch_size": batch,
        "steps_batched": int(
            sum(
                steps[:, b : b + batch].max(axis=1).sum() * steps[:, b : b + batch].shape[1]
                for b in range(0, steps.shape[1], batch)
            )
        ),
        "transport_evaluations_total": int(7 * steps.sum()),  # 6 stages + the steady check
        "unresolved": int((~np.asarray(pd.resolved)).sum()),
        "stopped_steady": int((np.asarray(pd.stop_time) < pd.horizon).sum()),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="default", choices=sorted(fig.PRESETS))
    parser.add_argument("--panels", nargs="*", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--calls", type=int, default=2, help="calls per panel (2: the second is compile-free)"
    )
    args = parser.parse_args()
    params = fig.PRESETS[args.preset]
    results = {"preset": args.preset, "machine": platform.platform(), "panels": {}}
    for normalization, d in fig.PANELS:
        name = fig.panel_name(normalization, d)
        if args.panels and name not in args.panels:
            continue
        results["panels"][name] = out = run_panel(params, normalization, d, args.calls)
        print(name, json.dumps(out), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
