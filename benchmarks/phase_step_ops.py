"""The phase engine's compiled step on a Fig. 3 panel, counted in two source trees (issue 40).

Counts (not times: deterministic, so any machine will do) the optimised HLO of the step
``jit__solve_call`` that :func:`attnflow.phase_diagram` compiles for one Fig. 3 panel call
(n = d = 32, float32, rtol = 1e-3, atol = 1e-6, 128 realisations × 8 β per call, β on the
Fig. 3 range [0.1, 9]), in this tree and in another one (e.g. a ``git worktree`` of e0ca4b0,
the tree before negative β), each in its own process with that tree first on ``sys.path``:
op counts per kind, instructions, and XLA's cost analysis of the loop body. A third column
counts this tree's step for the same grid with its first β set to −1 (the step with the row
shift for β < 0). Default JAX settings (float32, no x64, default XLA flags), as the CLI runs.

    git worktree add --detach /tmp/e0ca4b0 e0ca4b0
    python benchmarks/phase_step_ops.py --old /tmp/e0ca4b0

prints a markdown table of the counts that differ and of ``maximum`` and ``reduce``.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"  # the counting code: tests/compiled_work.py of this tree


def child(negative: bool):
    sys.path.insert(0, str(TESTS))
    import jax.numpy as jnp
    import jax.random as jr
    import numpy as np
    from compiled_work import phase_step, program_counts

    betas = np.linspace(0.1, 9.0, 8)
    if negative:
        betas[0] = -1.0
    compiled, _ = phase_step(
        jr.key(0),
        n=32,
        d=32,
        betas=betas,
        ts=np.linspace(0.0, 30.0, 100),
        realizations=1024,
        rtol=1e-3,
        atol=1e-6,
        dtype=jnp.float32,
        chunk_size=128,
        beta_block=8,
        progress=False,
    )
    print("COUNTS " + json.dumps(program_counts(compiled)))


def counts_of(tree: str, negative: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, PYTHONWARNINGS="ignore")
    env.pop("XLA_FLAGS", None)
    command = [sys.executable, __file__, "--child"] + (["--negative"] if negative else [])
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
    line = next(row for row in out.stdout.splitlines() if row.startswith("COUNTS "))
    return json.loads(line[len("COUNTS ") :])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="source tree of the earlier attnflow (e.g. e0ca4b0)")
    parser.add_argument("--new", default=str(HERE.parent))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--negative", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.negative)
    columns = {"old": counts_of(args.old, False)} if args.old else {}
    columns["new"] = counts_of(args.new, False)
    columns["new, first β = −1"] = counts_of(args.new, True)
    names = sorted(set().union(*columns.values()))
    shown = [
        name
        for name in names
        if name in ("op maximum", "op reduce", "hlo instructions", *("flops", "bytes accessed"))
        or len({c.get(name, 0) for c in columns.values()}) > 1
    ]
    print("| count | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name in shown:
        print(f"| {name} | " + " | ".join(f"{c.get(name, 0):.0f}" for c in columns.values()) + " |")
    if args.old:
        same = columns["old"] == columns["new"]
        print(f"\nold and new: every count equal ({len(names)} counts): {same}")


if __name__ == "__main__":
    main()
