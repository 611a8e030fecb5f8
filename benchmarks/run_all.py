"""Regenerate every benchmark section: run each script, one at a time, and record the machine.

Each script in ``SCRIPTS`` runs as its own subprocess (so no JAX state or thread pool is shared);
its stdout goes to ``benchmarks/results/<name>.md`` and its stderr, if any, to
``benchmarks/results/<name>.log``. ``benchmarks/results/MACHINE.md`` records the machine (CPU model,
cores, RAM), the Python/jax/jaxlib/numpy/scipy versions, and for each script the date, git commit,
arguments, exit status, wall time and the load average before and after it. Entries of scripts
not run this time (``--only``/``--skip``) are kept from the previous run (``machine.json``), with
their own date and commit.

The numbers hold only on a quiet machine: it refuses to start when the 1-minute load average is
above 1.0, unless ``--force``, and before each script it waits (up to ``SETTLE_S`` seconds) for
the load left by the previous one to fall below 1.0.

Usage:
    python benchmarks/run_all.py                      # every section, full sizes
    python benchmarks/run_all.py --quick --force      # smoke run (not for the record)
    python benchmarks/run_all.py --only work_precision solve
    python benchmarks/run_all.py --skip pretrained
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MAX_LOAD = 1.0
SETTLE_S = 60  # before each script, wait up to this long for the 1-min load to fall below 1

# name -> extra arguments (paths relative to the repository root, the scripts' cwd); otherwise each
# script runs at its own argparse defaults. `--quick` is added for the scripts whose argparse has
# it; the others run at their defaults under `--quick` too.
SCRIPTS = {
    "work_precision": [
        "--json",
        "benchmarks/results/work_precision.json",
        "--png",
        "benchmarks/results/work_precision.png",
    ],
    "attention_core": [],
    "grad": [],
    "reverse_floor": [],
    "scaling": [],
    "phase_diagram": ["--repeats", "5", "--full-figure"],
    "solve": [],
    "variants_a": [],
    "variants_b": [],
    "hessian": [],
    "pretrained": [],
    "kinetic": [],
    "limit_geometry": [],
    "homogenized": [],
    # the exponentiated-gradient rows are capped (they stall near 1e-7; 300 steps at N = 10^4
    # take 27 s), and the particle-move rows, about 1 min each at N = 10^4, run once.
    "measures": ["--repeats", "5", "--max-repeats", "1", "--eg-steps", "300"],
}


def supports_quick(name):
    return '"--quick"' in (HERE / f"{name}.py").read_text()


def git_commit():
    def git(*args):
        out = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True)
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD") or "unknown"
    return commit + (
        " (with uncommitted changes)"
        if git("status", "--porcelain", "--untracked-files=no")
        else ""
    )


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_gib():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine():
    return dict(
        cpu=cpu_model(),
        cores=os.cpu_count(),
        affinity=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        ram=ram_gib(),
        platform=platform.platform(),
        python=platform.python_version(),
        versions={p: version(p) for p in ("jax", "jaxlib", "numpy", "scipy", "attnflow")},
        threads_env={
            k: os.environ[k]
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")
            if k in os.environ
        },
    )


def load():
    return [round(x, 2) for x in os.getloadavg()]


def write_markdown(record):
    m = record["machine"]
    lines = [
        "# Machine and conditions of benchmarks/results",
        "",
        f"- last run: {record['date']}, commit {record['commit']}"
        + (" — quick mode, not for the record" if record["quick"] else ""),
        f"- command: `{record['command']}`",
        f"- CPU: {m['cpu']}; {m['cores']} logical cores ({m['affinity']} usable by this process)",
        f"- RAM: {m['ram']}",
        f"- OS: {m['platform']}",
        f"- Python {m['python']}, " + ", ".join(f"{p} {v}" for p, v in m["versions"].items()),
        f"- thread settings: {m['threads_env'] or 'none set'}",
        "",
        "Load average is (1, 5, 15 min), read just before and just after each script.",
        "",
        "| script | date (UTC) | commit | arguments | exit | wall (s) | load before | load after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in SCRIPTS:
        e = record["scripts"].get(name)
        if e is None:
            lines.append(f"| {name} | not run | | | | | | |")
            continue
        lines.append(
            f"| {name} | {e['date']} | {e['commit'][:12]} | `{' '.join(e['args'])}` | "
            f"{e['returncode']} | {e['wall_s']:.1f} | {e['load_before']} | {e['load_after']} |"
        )
    (RESULTS / "MACHINE.md").write_text("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(SCRIPTS), metavar="NAME")
    parser.add_argument("--skip", nargs="+", choices=list(SCRIPTS), default=[], metavar="NAME")
    parser.add_argument(
        "--quick", action="store_true", help="pass --quick to the scripts that support it"
    )
    parser.add_argument(
        "--force", action="store_true", help=f"run even when the 1-min load is above {MAX_LOAD}"
    )
    args = parser.parse_args()

    names = [n for n in (args.only or SCRIPTS) if n not in args.skip]
    before = load()
    if before[0] > MAX_LOAD and not args.force:
        print(
            f"run_all: 1-minute load average is {before[0]} (> {MAX_LOAD}); timings would not "
            "hold. Wait for a quiet machine, or pass --force (the load is recorded either way).",
            file=sys.stderr,
        )
        sys.exit(2)

    RESULTS.mkdir(exist_ok=True)
    store = RESULTS / "machine.json"
    previous = json.loads(store.read_text()) if store.exists() else {}
    commit = git_commit()
    record = dict(
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
        commit=commit,
        command=" ".join([Path(sys.executable).name, *sys.argv]),
        quick=args.quick,
        machine=machine(),
        scripts=previous.get("scripts", {}),
    )

    failed = []
    for name in names:
        extra = list(SCRIPTS[name])
        if args.quick and supports_quick(name):
            extra.append("--quick")
        waited = 0
        while not args.quick and load()[0] > MAX_LOAD and waited < SETTLE_S:
            time.sleep(5)
            waited += 5
        entry = dict(
            date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M"),
            commit=commit,
            args=extra,
            quick=args.quick,
            load_before=load(),
        )
        print(f"[run_all] {name} {' '.join(extra)} (load {entry['load_before']})", flush=True)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(HERE / f"{name}.py"), *extra],
            capture_output=True,
            text=True,
            cwd=HERE.parent,
        )
        entry["wall_s"] = time.perf_counter() - start
        entry["load_after"] = load()
        entry["returncode"] = proc.returncode
        (RESULTS / f"{name}.md").write_text(proc.stdout)
        log = RESULTS / f"{name}.log"
        if proc.stderr:
            log.write_text(proc.stderr)
        elif log.exists():
            log.unlink()
        if proc.returncode:
            failed.append(name)
            print(f"[run_all] {name} FAILED (exit {proc.returncode}); see {log}", flush=True)
        record["scripts"][name] = entry
        store.write_text(json.dumps(record, indent=1))
        write_markdown(record)

    print(f"[run_all] done; load before {before}, after {load()}; results in {RESULTS}")
    if failed:
        print(f"[run_all] failed: {' '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
