"""Is any path slower than in an earlier tree? (issue 21: no path slower by more than 5%)

Runs the same timing code against two source trees of attnflow (this checkout and, for example,
a ``git worktree`` of the commit before a refactor), each in its own subprocess with that tree
first on ``sys.path``, alternating the trees round by round so that drift of the machine falls
on both. Each path is compiled first, then timed as the median of ``--repeats`` calls (each
``block_until_ready``); the report is, per path, the median over rounds of each tree and the
ratio new / old with the spread over rounds.

    git worktree add --detach /tmp/attnflow-old <commit>
    python benchmarks/regression.py --old /tmp/attnflow-old --rounds 5

Paths: a small solve (dispatch-bound), a larger float32 solve, one attention-field evaluation,
multi-head attention, a gradient through solve, the discrete layer loop, the Riemannian gradient
of an energy and its GradientFlow solve, a mean-field density solve, and a small phase
diagram, whose float64 values are also compared bit for bit. Only public names that exist in
both trees are used.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, statistics, sys, time, warnings
warnings.simplefilter("ignore")
import jax
jax.config.update("jax_enable_x64", True)
import equinox as eqx, jax.numpy as jnp, jax.random as jr
import attnflow as af

repeats = int(sys.argv[1])

def timed(fn):
    jax.block_until_ready(fn())  # compile
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        out.append(time.perf_counter() - start)
    return statistics.median(out)

def multihead(beta, Q, K, V):
    try:
        return af.MultiHeadAttention(beta=beta, Q=Q, K=K, V=V)
    except TypeError:  # trees before the one multi-head class
        return af.StackedMultiHeadAttention(beta, Q, K, V)

results = {}
x8 = af.random_tokens(jr.key(0), 8, 3)
sa = af.SelfAttention(1.0)
results["solve n=8 d=3 (float64)"] = timed(lambda: af.solve(sa, x8, 5.0).ys)

x256 = af.random_tokens(jr.key(1), 256, 64).astype(jnp.float32)
sa4 = af.SelfAttention(4.0)
results["solve n=256 d=64 (float32)"] = timed(
    lambda: af.solve(sa4, x256, 5.0, rtol=1e-4, atol=1e-6).ys)

x1024 = af.random_tokens(jr.key(2), 1024, 64).astype(jnp.float32)
field = eqx.filter_jit(lambda x: sa4(0.0, x, None))
results["field n=1024 d=64 (float32)"] = timed(lambda: field(x1024))

H, d = 8, 64
Q = jr.normal(jr.key(3), (H, 16, d)) / 8
mha = multihead(1.0, Q, Q, jnp.broadcast_to(jnp.eye(d), (H, d, d)))
mfield = eqx.filter_jit(lambda x: mha(0.0, x, None))
x256d = af.random_tokens(jr.key(4), 256, d)
results["multi-head field H=8 n=256 d=64 (float64)"] = timed(lambda: mfield(x256d))

x64 = af.random_tokens(jr.key(5), 64, 16)
V0 = jnp.eye(16)

@eqx.filter_jit
def loss_grad(V):
    return jax.grad(lambda V: af.solve(af.SelfAttention(2.0, V=V), x64, 3.0).ys[-1].sum())(V)

results["grad through solve n=64 d=16 (float64)"] = timed(lambda: loss_grad(V0))

layers = eqx.filter_jit(lambda x: af.layers(sa4, x, 50, 0.1))
results["layers 50 n=256 d=64 (float32)"] = timed(lambda: layers(x256))

energy, metric = af.InteractionEnergy(4.0), af.AttentionMetric(4.0)
x256e = af.random_tokens(jr.key(7), 256, 16)
rgrad = eqx.filter_jit(lambda x: af.riemannian_gradient(energy, metric, x))
results["riemannian_gradient SA n=256 d=16 (float64)"] = timed(lambda: rgrad(x256e))
flow = af.GradientFlow(energy, metric)
results["solve GradientFlow n=64 d=16 (float64)"] = timed(lambda: af.solve(flow, x64, 3.0).ys)

if hasattr(af, "meanfield"):
    from attnflow import meanfield as mf
    grid = mf.CircleGrid(32)
    rho0 = jnp.zeros(65).at[0].set(1.0).at[1].set(0.3)
    results["solve_density CircleGrid(32) beta=4 t1=5 (float64)"] = timed(
        lambda: mf.solve_density(grid, rho0, 5.0, beta=4.0).coefficients)

results["phase_diagram n=32 d=2, 3x3 grid, 256 realisations"] = timed(
    lambda: af.phase_diagram(jr.key(6), n=32, d=2, betas=[1.0, 4.0, 9.0], ts=[2.0, 10.0, 30.0],
                             realizations=256, progress=False))
p = af.phase_diagram(jr.key(6), n=32, d=2, betas=[1.0, 4.0, 9.0], ts=[2.0, 10.0, 30.0],
                     realizations=256, progress=False)
results["phase_diagram values (float64)"] = [float(v).hex() for v in jnp.ravel(p)]
print("RESULTS " + json.dumps(results))
"""


def run_tree(tree, repeats):
    env = dict(os.environ, PYTHONPATH=tree, PYTHONWARNINGS="ignore")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(repeats)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(row for row in out.splitlines() if row.startswith("RESULTS "))
    return json.loads(line[len("RESULTS ") :])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="source tree of the earlier attnflow")
    parser.add_argument(
        "--new", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per path per round")
    args = parser.parse_args()
    runs = {"old": [], "new": []}
    for round_ in range(args.rounds):
        order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
        for which in order:
            runs[which].append(run_tree(getattr(args, which), args.repeats))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'path':52s} {'old ms':>9s} {'new ms':>9s} {'new/old':>8s}  (min–max of rounds)")
    values = "phase_diagram values (float64)"
    same = all(r[values] == runs["old"][0][values] for r in runs["old"] + runs["new"])
    print(f"phase diagram float64 values bitwise equal in both trees: {same}")
    for path in runs["old"][0]:
        if path == values:
            continue
        old = [r[path] for r in runs["old"]]
        new = [r[path] for r in runs["new"]]
        ratios = [b / a for a, b in zip(old, new, strict=True)]
        print(
            f"{path:52s} {statistics.median(old) * 1e3:9.3f} {statistics.median(new) * 1e3:9.3f} "
            f"{statistics.median(ratios):8.3f}  ({min(ratios):.3f}–{max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
