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
of an energy and its GradientFlow solve, a mean-field density solve, a small phase diagram,
and one warm Fig. 3 panel call (n = d = 32, 1024 realisations × 8 β, float32; issue 40); the
phase diagrams' values are also compared bit for bit. Only public names that exist in both
trees are used. ``--paths REGEX`` times only the paths whose name matches, e.g. the Fig. 3
panel against the tree before negative β (each call takes seconds: fewer repeats):

    git worktree add --detach /tmp/e0ca4b0 e0ca4b0
    python benchmarks/regression.py --old /tmp/e0ca4b0 --rounds 7 --repeats 3 --paths fig3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, re, statistics, sys, time, warnings
warnings.simplefilter("ignore")
import jax
jax.config.update("jax_enable_x64", True)
import equinox as eqx, jax.numpy as jnp, jax.random as jr, numpy as np
import attnflow as af

repeats = int(sys.argv[1])
selected = re.compile(sys.argv[2])  # the paths to time (a regular expression)

def timed(fn):
    jax.block_until_ready(fn())  # compile
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        out.append(time.perf_counter() - start)
    return statistics.median(out)

def path(name, fn):  # time fn as path `name` when it is selected
    if selected.search(name):
        results[name] = timed(fn)
        return True
    return False

def multihead(beta, Q, K, V):
    try:
        return af.MultiHeadAttention(beta=beta, Q=Q, K=K, V=V)
    except TypeError:  # trees before the one multi-head class
        return af.StackedMultiHeadAttention(beta, Q, K, V)

results = {}
x8 = af.random_tokens(jr.key(0), 8, 3)
sa = af.SelfAttention(1.0)
path("solve n=8 d=3 (float64)", lambda: af.solve(sa, x8, 5.0).ys)

x256 = af.random_tokens(jr.key(1), 256, 64).astype(jnp.float32)
sa4 = af.SelfAttention(4.0)
path("solve n=256 d=64 (float32)", lambda: af.solve(sa4, x256, 5.0, rtol=1e-4, atol=1e-6).ys)

x1024 = af.random_tokens(jr.key(2), 1024, 64).astype(jnp.float32)
field = eqx.filter_jit(lambda x: sa4(0.0, x, None))
path("field n=1024 d=64 (float32)", lambda: field(x1024))

H, d = 8, 64
Q = jr.normal(jr.key(3), (H, 16, d)) / 8
mha = multihead(1.0, Q, Q, jnp.broadcast_to(jnp.eye(d), (H, d, d)))
mfield = eqx.filter_jit(lambda x: mha(0.0, x, None))
x256d = af.random_tokens(jr.key(4), 256, d)
path("multi-head field H=8 n=256 d=64 (float64)", lambda: mfield(x256d))

x64 = af.random_tokens(jr.key(5), 64, 16)
V0 = jnp.eye(16)

@eqx.filter_jit
def loss_grad(V):
    return jax.grad(lambda V: af.solve(af.SelfAttention(2.0, V=V), x64, 3.0).ys[-1].sum())(V)

path("grad through solve n=64 d=16 (float64)", lambda: loss_grad(V0))

layers = eqx.filter_jit(lambda x: af.layers(sa4, x, 50, 0.1))
path("layers 50 n=256 d=64 (float32)", lambda: layers(x256))

energy, metric = af.InteractionEnergy(4.0), af.AttentionMetric(4.0)
x256e = af.random_tokens(jr.key(7), 256, 16)
rgrad = eqx.filter_jit(lambda x: af.riemannian_gradient(energy, metric, x))
path("riemannian_gradient SA n=256 d=16 (float64)", lambda: rgrad(x256e))
flow = af.GradientFlow(energy, metric)
path("solve GradientFlow n=64 d=16 (float64)", lambda: af.solve(flow, x64, 3.0).ys)

if hasattr(af, "meanfield"):
    from attnflow import meanfield as mf
    grid = mf.CircleGrid(32)
    rho0 = jnp.zeros(65).at[0].set(1.0).at[1].set(0.3)
    path("solve_density CircleGrid(32) beta=4 t1=5 (float64)",
         lambda: mf.solve_density(grid, rho0, 5.0, beta=4.0).coefficients)

small = dict(n=32, d=2, betas=[1.0, 4.0, 9.0], ts=[2.0, 10.0, 30.0], realizations=256,
             progress=False)
if path("phase_diagram n=32 d=2, 3x3 grid, 256 realisations",
        lambda: af.phase_diagram(jr.key(6), **small)):
    p = af.phase_diagram(jr.key(6), **small)
    results["phase_diagram values (float64)"] = [float(v).hex() for v in jnp.ravel(p)]

# One warm Fig. 3 panel call (issue 40): the default preset's d = 32 panel cut to one β block.
fig3 = dict(n=32, d=32, betas=np.linspace(0.1, 9.0, 8), ts=np.linspace(0.0, 30.0, 100),
            realizations=1024, rtol=1e-3, atol=1e-6, dtype=jnp.float32, chunk_size=128,
            beta_block=8, progress=False)
if path("fig3 panel n=d=32, 1024 realisations x 8 beta (float32)",
        lambda: af.phase_diagram(jr.key(8), **fig3)):
    p = af.phase_diagram(jr.key(8), **fig3)
    results["fig3 panel values (float32)"] = [float(v).hex() for v in jnp.ravel(p)]

print("RESULTS " + json.dumps(results))
"""


def run_tree(tree, repeats, paths):
    env = dict(os.environ, PYTHONPATH=tree, PYTHONWARNINGS="ignore")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(repeats), paths],
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
    parser.add_argument(
        "--paths", default="", help="time only the paths whose name matches this regular expression"
    )
    args = parser.parse_args()
    runs = {"old": [], "new": []}
    for round_ in range(args.rounds):
        order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
        for which in order:
            runs[which].append(run_tree(getattr(args, which), args.repeats, args.paths))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'path':52s} {'old ms':>9s} {'new ms':>9s} {'new/old':>8s}  (min–max of rounds)")
    values = [path for path in runs["old"][0] if " values " in path]
    for name in values:
        same = all(r[name] == runs["old"][0][name] for r in runs["old"] + runs["new"])
        print(f"{name} bitwise equal in both trees: {same}")
    for path in runs["old"][0]:
        if path in values:
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
