"""The device check of issue #34, sections run by ``benchmarks/device_check.sh``.

Sections (``--section``):

- ``device``: the JAX backend and the device name.
- ``fig3``: Fig. 3 of the paper, every panel of the preset (``full``: d = 2 … 1024, n = 32,
  90 β, 200 save times, 1024 realisations, float32 rtol 1e-3; ``quick`` on the CPU), one
  :func:`attnflow.phase_diagram` per panel with ``statistics=True``: wall time, accepted and
  rejected steps, field evaluations (6 per step + 1 per system) and slot steps, and the device.
- ``layout``: the phase engine's two layout presets (``backend="cpu"``: 256 × 8 systems per
  call, 128 in flight, counts summed on the host; ``backend="accelerator"``: 1024 × 32 per call,
  16384 in flight, counts summed on the device) on the same device, float64: P and every
  system's step counts must be bitwise equal (the documented guarantee). Exit status 1 if not.

Usage: ``python benchmarks/device_check.py --section fig3 --preset full``.
"""

import argparse
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402
import numpy as np  # noqa: E402

import attnflow as af  # noqa: E402
from attnflow.figures import fig3  # noqa: E402


def device() -> str:
    d = jax.devices()[0]
    kind = getattr(d, "device_kind", d.platform)
    return f"{jax.default_backend()} / {kind} ({jax.device_count()} device(s))"


def section_device(args):
    print(f"device: {device()}")
    print(f"jax {jax.__version__}, attnflow {getattr(af, '__version__', '?')}, pid {os.getpid()}")


def section_fig3(args):
    params = dict(fig3.PRESETS[args.preset])
    if args.ds:
        params["ds"] = args.ds
    betas, ts = fig3.grids(params)
    print(f"### Fig. 3, preset {args.preset!r}, on {device()}\n")
    print(
        f"n = {params['n']}, {len(betas)} β × {len(ts)} save times, "
        f"{params['realizations']} realisations, {params['dtype']}, rtol {params['rtol']}\n"
    )
    print(
        "| d | seconds | accepted steps | rejected steps | field evaluations | slot steps "
        "| P(β_max, t_max) |"
    )
    print("|---|---|---|---|---|---|---|")
    total = 0.0
    for k, d in enumerate(params["ds"]):
        start = time.perf_counter()
        result = af.phase_diagram(
            jr.key(k),
            n=params["n"],
            d=d,
            betas=betas,
            ts=ts,
            realizations=params["realizations"],
            delta=params["delta"],
            rtol=params["rtol"],
            atol=params["atol"],
            dtype=jnp.dtype(params["dtype"]),
            progress=False,
            statistics=True,
        )
        P = np.asarray(jax.block_until_ready(result.probability))
        seconds = time.perf_counter() - start
        total += seconds
        print(
            f"| {d} | {seconds:.2f} | {int(np.sum(result.accepted))} | "
            f"{int(np.sum(result.rejected))} | {int(np.sum(result.evaluations))} | "
            f"{result.slot_steps} | {P[-1, -1]:.4f} |",
            flush=True,
        )
        assert np.all((P >= 0) & (P <= 1)), "P outside [0, 1]"
    print(f"\nfig3 total: {total:.1f} s over {len(params['ds'])} panels on {device()}")


def section_layout(args):
    betas = np.linspace(0.5, 9.0, args.betas)
    ts = np.linspace(0.0, 30.0, 11)
    results = {}
    for backend in ("cpu", "accelerator"):
        start = time.perf_counter()
        results[backend] = af.phase_diagram(
            jr.key(7),
            n=args.n,
            d=args.d,
            betas=betas,
            ts=ts,
            realizations=args.realizations,
            dtype=jnp.float64,
            backend=backend,
            progress=False,
            statistics=True,
        )
        jax.block_until_ready(results[backend].probability)
        print(f"layout {backend!r}: {time.perf_counter() - start:.2f} s on {device()}")
    a, b = results["cpu"], results["accelerator"]
    same = all(
        np.array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)))
        for f in ("probability", "accepted", "rejected")
    )
    diff = float(np.max(np.abs(np.asarray(a.probability) - np.asarray(b.probability))))
    print(
        f"layout check (float64, n = {args.n}, d = {args.d}, {len(betas)} β, "
        f"{args.realizations} realisations): cpu vs accelerator layout bitwise equal: {same} "
        f"(max |ΔP| = {diff:.3g})"
    )
    if not same:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", required=True, choices=["device", "fig3", "layout"])
    parser.add_argument("--preset", default="full", choices=sorted(fig3.PRESETS))
    parser.add_argument("--ds", type=int, nargs="+", help="fig3: these panels only")
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--betas", type=int, default=16)
    parser.add_argument("--realizations", type=int, default=2048)
    args = parser.parse_args()
    {"device": section_device, "fig3": section_fig3, "layout": section_layout}[args.section](args)


if __name__ == "__main__":
    main()
