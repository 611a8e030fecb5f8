"""``attnflow landscape``: survey the critical points of E_β over a grid of (d, n, β) (Problem 3).

For each system, :func:`attnflow.landscape.survey_critical_points` seeds Newton searches from random
starts, metastable states of the (SA) flow and symmetric configurations, deduplicates modulo
rotation and permutation, and classifies. Prints a table; writes ``landscape.csv`` (one row per
distinct critical point) and ``landscape.json`` (arguments, one summary per system, and whether
a non-synchronised local maximum, a counterexample to Problem 3, was found).
"""

import csv
import json
import time

from attnflow.commands._args import (
    at_least,
    nonnegative_int,
    output_folder,
    positive_float,
    seed,
)

QUICK = {
    "n": [3, 4],
    "d": [2],
    "beta": [1.0, 6.0],
    "random": 6,
    "flow": 2,
    "flow_times": [5.0, 50.0],
}


def configure(parser):
    parser.add_argument(
        "--n", type=at_least(2), nargs="+", default=[3, 4, 5, 6, 8], help="numbers of tokens"
    )
    parser.add_argument(
        "--d",
        type=at_least(2),
        nargs="+",
        default=[2],
        help="token dimensions (2: the circle of Problem 3; 3: S², …)",
    )
    parser.add_argument(
        "--beta",
        type=positive_float,
        nargs="+",
        default=[0.5, 1.0, 2.0, 4.0, 8.0],
        help="inverse temperatures",
    )
    parser.add_argument(
        "--random", type=nonnegative_int, default=32, help="random starts per system"
    )
    parser.add_argument(
        "--flow",
        type=nonnegative_int,
        default=8,
        help="(SA) trajectories per system whose metastable states seed searches",
    )
    parser.add_argument(
        "--flow-times",
        type=positive_float,
        nargs="+",
        default=[10.0, 100.0, 1000.0],
        help="times at which flow states are taken as seeds",
    )
    parser.add_argument(
        "--gtol",
        type=positive_float,
        default=1e-10,
        help="a search counts as converged when |grad| <= gtol (for e^-β E_β)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="test-sized run: n 3 4, d 2, β 1 6, few seeds (seconds)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="PRNG seed in [0, 2**63 - 1]")
    parser.add_argument("--out", default="attnflow-landscape", help="output folder")


FIELDS = [
    "d",
    "n",
    "beta",
    "kind",
    "num_positive",
    "num_negative",
    "num_zero",
    "orbit_dimension",
    "paper_strict_saddle",
    "synchronised",
    "num_clusters",
    "energy",
    "normalized_energy",
    "max_eigenvalue",
    "min_eigenvalue",
    "grad_norm",
    "source",
    "hits",
    "angles_or_tokens",
]


def _row(survey, point):
    import numpy as np

    if survey.d == 2:
        config = np.sort(np.mod(np.arctan2(point.x[:, 1], point.x[:, 0]), 2 * np.pi)).tolist()
    else:
        config = point.x.tolist()
    eig = point.eigenvalues
    return {
        "d": survey.d,
        "n": survey.n,
        "beta": survey.beta,
        "kind": point.kind,
        "num_positive": point.num_positive,
        "num_negative": point.num_negative,
        "num_zero": point.num_zero,
        "orbit_dimension": point.orbit_dimension,
        "paper_strict_saddle": point.is_paper_strict_saddle,
        "synchronised": point.synchronised,
        "num_clusters": point.num_clusters,
        "energy": point.energy,
        "normalized_energy": point.normalized_energy,
        "max_eigenvalue": float(eig.max()) if eig.size else float("nan"),
        "min_eigenvalue": float(eig.min()) if eig.size else float("nan"),
        "grad_norm": point.grad_norm,
        "source": point.source,
        "hits": point.hits,
        "angles_or_tokens": json.dumps(config),
    }


def _summary(survey):
    sync_max = sum(p.kind == "local maximum" and p.synchronised for p in survey.points)
    return {
        "d": survey.d,
        "n": survey.n,
        "beta": survey.beta,
        "seeds": survey.num_seeds,
        "converged": survey.num_converged,
        "distinct": len(survey.points),
        "sync_maxima": sync_max,
        **survey.counts,
        "paper_strict_saddles": sum(p.is_paper_strict_saddle for p in survey.points),
        "counterexample": survey.counterexample,
        "inconclusive": survey.inconclusive,
    }


def run(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.random as jr

    import attnflow as af

    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    out = output_folder(args.out)
    key = jr.key(args.seed)
    summaries, rows = [], []
    header = (
        f"{'d':>2} {'n':>3} {'beta':>7} {'seeds':>5} {'conv':>4} {'dist':>4} "
        f"{'max(sync)':>9} {'max(other)':>10} {'min':>4} {'saddle':>6} {'degen':>5} "
        f"{'paper-ss':>8}  verdict"
    )
    print(header)
    print("-" * len(header))
    start = time.perf_counter()
    for d in args.d:
        for n in args.n:
            for beta in args.beta:
                key, sub = jr.split(key)
                survey = af.landscape.survey_critical_points(
                    n,
                    d,
                    beta,
                    key=sub,
                    num_random=args.random,
                    num_flow=args.flow,
                    flow_times=tuple(args.flow_times),
                    gtol=args.gtol,
                )
                s = _summary(survey)
                summaries.append(s)
                rows += [_row(survey, p) for p in survey.points]
                verdict = (
                    "COUNTEREXAMPLE to Problem 3"
                    if s["counterexample"]
                    else "inconclusive (degenerate)"
                    if s["inconclusive"]
                    else "all non-sync points have an ascent direction"
                )
                print(
                    f"{d:>2} {n:>3} {beta:>7.3g} {s['seeds']:>5} {s['converged']:>4} "
                    f"{s['distinct']:>4} {s['sync_maxima']:>9} "
                    f"{s['local maximum'] - s['sync_maxima']:>10} {s['local minimum']:>4} "
                    f"{s['strict saddle']:>6} {s['degenerate']:>5} "
                    f"{s['paper_strict_saddles']:>8}  {verdict}"
                )
    elapsed = time.perf_counter() - start
    counterexample = any(s["counterexample"] for s in summaries)
    with open(out / "landscape.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    settings = {k: v for k, v in vars(args).items() if not k.startswith("_")}
    (out / "landscape.json").write_text(
        json.dumps(
            {
                "args": settings,
                "seconds": elapsed,
                "counterexample_found": counterexample,
                "inconclusive_found": any(s["inconclusive"] for s in summaries),
                "systems": summaries,
            },
            indent=2,
        )
    )
    print(
        f"\nnon-synchronised local maximum (counterexample to Problem 3) found: "
        f"{'YES' if counterexample else 'no'}   ({elapsed:.1f} s)"
    )
    print(f"wrote {out / 'landscape.csv'}, {out / 'landscape.json'}")
    return 0
