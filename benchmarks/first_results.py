"""First results sooner (issue 40): what a fresh process spends before its first result, and
what the per-user compilation cache saves a second process.

Each measurement is a fresh Python process (JAX's in-memory caches start empty), run with its own
cache folder: *cold* is the first process on an empty folder, *warm* the next process on the same
folder. Per process it records the wall time from the parent's spawn to exit, the import of
attnflow, and JAX's own monitoring events: tracing to a jaxpr, lowering to MLIR, and the backend
compile (which, for a cache hit, is the time to load the program from disk); the rest is running
the computation and Python around it. Two error modes: equinox's default ``EQX_ON_ERROR=raise``,
whose programs with a run-time check use a host callback and are never written to the cache by
jax 0.10.2, and ``EQX_ON_ERROR=nan`` (docs/getting-started.md#compilation-cache).

Entry points:

- ``first-look``: the README's "A first look" snippet, read from README.md (so it stays the one
  the README shows);
- ``fig3``: ``attnflow figure fig3``, the README's main command (its CLI, in the child process).

    python benchmarks/first_results.py                       # both, 3 rounds, both error modes
    python benchmarks/first_results.py --entries first-look --rounds 1 --modes raise  # smoke
    python benchmarks/first_results.py --json benchmarks/results/first_results.json

Targets (issue 40, idle 2-core machine): first-look <= 12 s cold and <= 6 s warm; fig3's warm
run <= half its cold run. Time on a quiet machine only: the numbers are wall times.
"""

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    "/jax/core/compile/backend_compile_duration": "compile_s",
}


def first_look_code() -> str:
    """The python block under README.md's "## A first look"."""
    text = (ROOT / "README.md").read_text("utf-8")
    section = text.split("## A first look", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def child(entry: str, out: str) -> None:
    """Run one entry point in this (fresh) process and print one JSON line of timings."""
    start = float(os.environ["FIRST_RESULTS_SPAWNED"])
    before_import = time.time()
    import jax

    totals = dict.fromkeys(EVENTS.values(), 0.0)
    counts = {"programs": 0, "cache_hits": 0, "cache_misses": 0}

    def on_duration(event, duration, **_):
        if event in EVENTS:
            totals[EVENTS[event]] += duration
        if event == "/jax/core/compile/backend_compile_duration":
            counts["programs"] += 1

    def on_event(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            counts["cache_hits"] += 1
        elif event == "/jax/compilation_cache/cache_misses":
            counts["cache_misses"] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    # attnflow imports its modules on first use: import what both entry points use, so that
    # the import is timed on its own (jax, equinox, diffrax, the solve and the phase engine).
    import attnflow._phase  # noqa: F401
    import attnflow._solve  # noqa: F401

    import_s = time.time() - before_import
    if entry == "first-look":
        # The snippet opts in with af.enable_compilation_cache() (the folder: this process's
        # JAX_COMPILATION_CACHE_DIR).
        exec(compile(first_look_code(), "README first look", "exec"), {"__name__": "__main__"})
    elif entry == "fig3":
        from attnflow.cli import main

        assert main(["figure", "fig3", "--out", out]) == 0
    else:
        raise SystemExit(f"unknown entry {entry!r}")
    # Programs neither hit nor missed were never looked up: those with a host callback.
    counts["uncacheable"] = counts["programs"] - counts["cache_hits"] - counts["cache_misses"]
    record = {"import_s": import_s, "in_process_s": time.time() - start, **totals, **counts}
    print("FIRST_RESULTS " + json.dumps(record), flush=True)


def measure(entry: str, cache: str, mode: str, out: str) -> dict:
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("JAX_COMPILATION_CACHE") or key == "ATTNFLOW_COMPILATION_CACHE":
            del env[key]
    env.update(
        JAX_COMPILATION_CACHE_DIR=cache,
        EQX_ON_ERROR=mode,
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        FIRST_RESULTS_SPAWNED=repr(time.time()),
    )
    spawned = time.perf_counter()
    run = subprocess.run(
        [sys.executable, __file__, "--child", entry, "--out", out],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - spawned
    if run.returncode != 0:
        raise RuntimeError(f"{entry} ({mode}) failed:\n{run.stderr[-3000:]}")
    line = next(x for x in run.stdout.splitlines() if x.startswith("FIRST_RESULTS "))
    record = json.loads(line.split(" ", 1)[1])
    record["wall_s"] = wall
    record["run_s"] = (
        record["in_process_s"]
        - record["import_s"]
        - record["trace_s"]
        - record["lower_s"]
        - record["compile_s"]
    )
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", nargs="+", default=["first-look", "fig3"])
    parser.add_argument("--modes", nargs="+", default=["raise", "nan"], choices=["raise", "nan"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write every record here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.out)
        return
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cores {os.cpu_count()}, load average at start {load:.2f}")
    records = []
    for round_index in range(args.rounds):
        for entry in args.entries:
            for mode in args.modes:
                with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
                    for state in ("cold", "warm"):
                        record = measure(entry, cache, mode, out)
                        record.update(entry=entry, mode=mode, state=state, round=round_index)
                        records.append(record)
                        print(
                            f"  {entry:10s} {mode:5s} {state}: {record['wall_s']:6.1f} s wall "
                            f"(import {record['import_s']:.1f}, trace {record['trace_s']:.1f}, "
                            f"lower {record['lower_s']:.1f}, compile {record['compile_s']:.1f}, "
                            f"run {record['run_s']:.1f}; programs {record['programs']}: "
                            f"{record['cache_hits']} loaded, {record['cache_misses']} compiled "
                            f"and written, {record['uncacheable']} with a host callback)",
                            flush=True,
                        )
    keys = ("wall_s", "import_s", "trace_s", "lower_s", "compile_s", "run_s")
    print(
        f"\nmedians over {args.rounds} round(s), seconds; load average at end "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(
        "| entry point | EQX_ON_ERROR | process | wall | import | trace | lower | compile | run |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    medians = {}
    for entry in args.entries:
        for mode in args.modes:
            for state in ("cold", "warm"):
                chosen = [
                    r
                    for r in records
                    if (r["entry"], r["mode"], r["state"]) == (entry, mode, state)
                ]
                m = {k: statistics.median(r[k] for r in chosen) for k in keys}
                medians[(entry, mode, state)] = m
                cells = " | ".join(f"{m[k]:.1f}" for k in keys)
                print(f"| {entry} | {mode} | {state} | {cells} |")
    print("\nwhat a second process gains (cold wall - warm wall, and warm / cold):")
    for entry in args.entries:
        for mode in args.modes:
            cold, warm = medians[(entry, mode, "cold")], medians[(entry, mode, "warm")]
            print(
                f"  {entry} ({mode}): {cold['wall_s'] - warm['wall_s']:.1f} s "
                f"({warm['wall_s'] / cold['wall_s']:.2f} of the first)"
            )
    if "first-look" in args.entries and "raise" in args.modes:
        cold, warm = (
            medians[("first-look", "raise", "cold")],
            medians[("first-look", "raise", "warm")],
        )
        print(
            f"target first-look <= 12 s cold: {cold['wall_s']:.1f} s; <= 6 s warm: "
            f"{warm['wall_s']:.1f} s"
        )
    if "fig3" in args.entries and "raise" in args.modes:
        cold, warm = medians[("fig3", "raise", "cold")], medians[("fig3", "raise", "warm")]
        print(f"target fig3 warm <= half of cold: {warm['wall_s'] / cold['wall_s']:.2f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"records": records}, indent=1))


if __name__ == "__main__":
    main()
