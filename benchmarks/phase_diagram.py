"""One panel of Fig. 3 (n = 32, d = 32, 90 β in [0.1, 9], t in [0, 30], 200 save times, 1024
realisations): attnflow.phase_diagram_from_tokens against the NumPy explicit-Euler scheme of the
authors (step 0.1, float64, vectorised over realisations), on the same initial tokens, each
checked against a tight reference.

Timing:
- attnflow at its defaults (float32, rtol 1e-3): the whole panel (all 90 β), on every CPU
  device (``jax_num_cpu_devices`` = cores), wall and process CPU time;
- other attnflow settings: every ``--beta-stride``-th β of the grid (a representative sample of
  the β-dependent cost), multiplied by the stride;
- NumPy Euler costs the same for every β (300 fixed steps, single-threaded): timed on
  ``--numpy-betas`` values of β and multiplied up to 90.
Accuracy: every method on the first ``--accuracy-realizations`` systems of that β sample against
attnflow at float64, rtol = 1e-10 (itself checked against per-system diffrax Tsit5 solves at
rtol = 1e-10). The six-panel figure: the d = 2 (coordinates) and d = 8 (log-distance form)
panels timed on the β sample, the four d ≥ 32 panels cost what d = 32 costs (log-distance form,
whose cost per step does not depend on d; checked on d = 1024). ``attnflow figure fig3 --full``
times the six panels themselves, and so does ``--full-figure`` here.

Run: ``python benchmarks/phase_diagram.py`` (a few minutes on 2 cores);
``--quick`` for a smoke test.
"""

import argparse
import os
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_num_cpu_devices", max(1, os.cpu_count() or 1))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import attnflow as af  # noqa: E402
from attnflow._phase._log_distance import LogDistance  # noqa: E402

N, D, DELTA = 32, 32, 1e-3
BETAS = np.linspace(0.1, 9.0, 90)
TS = np.linspace(0.0, 30.0, 200)


def numpy_euler(x0, beta, ts, step=0.1, delta=DELTA):
    """The authors' scheme: x ← normalize(x + step Σ_j a_ij x_j), statistics at checkpoints
    (first step with t ≥ checkpoint), vectorised over realisations. Returns P (len(ts),)."""
    x = x0.copy()
    n = x.shape[1]
    off = ~np.eye(n, dtype=bool)
    out = np.empty(len(ts))
    t, k = 0.0, 0
    while k < len(ts) and ts[k] <= 0:
        out[k] = np.mean((x @ x.transpose(0, 2, 1))[:, off] >= 1 - delta)
        k += 1
    while k < len(ts):
        logits = beta * (x @ x.transpose(0, 2, 1))
        logits -= logits.max(axis=-1, keepdims=True)
        np.exp(logits, out=logits)
        logits /= logits.sum(axis=-1, keepdims=True)
        y = x + step * (logits @ x)
        x = y / np.linalg.norm(y, axis=-1, keepdims=True)
        t += step
        if t >= ts[k]:
            value = np.mean((x @ x.transpose(0, 2, 1))[:, off] >= 1 - delta)
            while k < len(ts) and t >= ts[k]:
                out[k] = value
                k += 1
    return out


def timed(fn, repeats, label=None):
    """Median wall and CPU time of ``repeats`` calls; with ``label``, print every call's."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    if label:
        print(
            f"{label}: {repeats} runs, wall {[round(w, 2) for w in walls]} s, "
            f"cpu {[round(c, 2) for c in cpus]} s",
            flush=True,
        )
    return result, statistics.median(walls), statistics.median(cpus)


def attnflow_run(x0, betas, dtype, rtol, atol, label=None):
    """attnflow at its default layout (``chunk_size``, ``beta_block``, ``slots`` from the
    backend); with ``label``, the work of the last call is printed (field evaluations per
    system, accepted and rejected steps, and FLOPs of the log-distance field times the
    evaluations of all slots)."""
    x = jnp.asarray(x0, dtype)

    def run():
        result = af.phase_diagram_from_tokens_result(
            x, betas=betas, ts=TS, rtol=rtol, atol=atol, max_steps=100_000
        )
        P = np.asarray(result.probability.block_until_ready())
        if label:
            print_work(label, result, x.shape[1], dtype)
        return P

    return run


def field_cost(n, dtype):
    """FLOPs and transcendentals of one log-distance field evaluation (XLA cost analysis), as
    the engine runs it for a grid of β ≥ 0 (no row shift)."""
    delta, floor = jnp.asarray(DELTA, dtype), jnp.asarray(1e-6, dtype)
    form = LogDistance((n, n), "softmax", delta, floor, signed=False)
    L = jnp.zeros((n, n), dtype)
    rate = jax.jit(lambda form, L, beta: form.rate(L, beta, {}))
    cost = rate.lower(form, L, jnp.asarray(1.0, dtype)).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return cost.get("flops", float("nan")), cost.get("transcendentals", float("nan"))


def print_work(label, result, n, dtype):
    evaluations = np.asarray(result.evaluations)
    accepted, rejected = np.asarray(result.accepted), np.asarray(result.rejected)
    slot_evaluations = 6 * result.slot_steps
    flops, exps = field_cost(n, dtype)
    print(
        f"{label}: {evaluations.size} systems, {evaluations.sum() / 1e6:.3f} M field evaluations "
        f"({evaluations.mean():.1f} per system: {accepted.mean():.2f} accepted, "
        f"{rejected.mean():.2f} rejected steps); {slot_evaluations / 1e6:.3f} M evaluated in "
        f"slots (utilisation {evaluations.sum() / slot_evaluations:.2f}); log-form field: "
        f"{flops * slot_evaluations / 1e9:.1f} GFLOP, {exps * slot_evaluations / 1e9:.2f} G "
        f"transcendentals",
        flush=True,
    )


def diffrax_fraction(x0, beta):
    sol = af.solve(
        af.SelfAttention(beta),
        jnp.asarray(x0),
        float(TS[-1]),
        ts=jnp.asarray(TS),
        rtol=1e-10,
        atol=1e-12,
        max_steps=200_000,
    )
    return np.asarray(jax.vmap(lambda x: af.clustered_fraction(x, DELTA))(sol.ys))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realizations", type=int, default=1024)
    parser.add_argument("--beta-stride", type=int, default=10)
    parser.add_argument("--numpy-betas", type=int, default=5)
    parser.add_argument("--accuracy-realizations", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny smoke test")
    parser.add_argument(
        "--full-figure",
        action="store_true",
        help="also time the six panels of `attnflow figure fig3 --full` (about 2 minutes)",
    )
    args = parser.parse_args()
    if args.quick:
        args.realizations, args.beta_stride, args.numpy_betas = 32, 30, 1
        args.accuracy_realizations, args.repeats = 8, 1

    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((args.realizations, N, D))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    sample = BETAS[:: args.beta_stride]
    scale = len(BETAS) / len(sample)
    print(
        f"devices: {jax.local_device_count()} × {jax.devices()[0].platform}; "
        f"realisations {args.realizations}; β sample {np.round(sample, 2).tolist()}"
    )

    print(f"load average before: {os.getloadavg()}")
    configs = {
        "attnflow f32, rtol 1e-3 (default)": (jnp.float32, 1e-3, 1e-6),
        "attnflow f32, rtol 1e-2": (jnp.float32, 1e-2, 1e-5),
        "attnflow f64, rtol 1e-3": (jnp.float64, 1e-3, 1e-6),
        "attnflow f64, rtol 1e-5": (jnp.float64, 1e-5, 1e-7),
    }
    default = "attnflow f32, rtol 1e-3 (default)"
    # Compile first: every device compiles its own executable, so run one call per device.
    for dtype, rtol, atol in configs.values():
        attnflow_run(x0[: 128 * jax.local_device_count()], sample[:8], dtype, rtol, atol)()
    rows, measured = {}, {}
    full_betas = BETAS if not args.quick else sample
    attnflow_run(x0, full_betas, *configs[default], label=f"work, {default}")()
    _, wall, cpu = timed(
        attnflow_run(x0, full_betas, *configs[default]), args.repeats, label=default
    )
    scale_full = len(BETAS) / len(full_betas)
    rows[default] = (wall * scale_full, cpu * scale_full)
    measured[default] = "all 90 β" if not args.quick else "β sample"
    print(f"{default}: whole panel {wall:.1f} s wall, {cpu:.1f} s cpu", flush=True)
    for name, (dtype, rtol, atol) in configs.items():
        if name == default:
            continue
        attnflow_run(x0, sample, dtype, rtol, atol, label=f"work, {name}, β sample")()
        _, wall, cpu = timed(attnflow_run(x0, sample, dtype, rtol, atol), args.repeats, name)
        rows[name] = (wall * scale, cpu * scale)
        measured[name] = f"{len(sample)} β × {scale:g}"
        print(f"{name}: sample {wall:.1f} s wall, {cpu:.1f} s cpu", flush=True)

    numpy_betas = BETAS[np.linspace(0, len(BETAS) - 1, args.numpy_betas).astype(int)]
    walls, cpus = [], []
    for beta in numpy_betas:
        _, wall, cpu = timed(lambda b=beta: numpy_euler(x0, b, TS), 1)
        walls.append(wall)
        cpus.append(cpu)
        print(f"numpy Euler β = {beta:.2f}: {wall:.1f} s wall, {cpu:.1f} s cpu", flush=True)
    euler = "NumPy Euler, step 0.1, f64"
    rows[euler] = (statistics.median(walls) * len(BETAS), statistics.median(cpus) * len(BETAS))
    measured[euler] = f"{len(numpy_betas)} β × {len(BETAS) / len(numpy_betas):g}"

    # Accuracy on the first realisations of the β sample.
    acc = x0[: args.accuracy_realizations]
    ref = attnflow_run(acc, sample, jnp.float64, 1e-10, 1e-12)()
    check = min(4, len(acc))
    diffrax_ref = np.array(
        [np.mean([diffrax_fraction(x, b) for x in acc[:check]], axis=0) for b in sample]
    )
    ours_small = attnflow_run(acc[:check], sample, jnp.float64, 1e-10, 1e-12)()
    reference_gap = np.abs(diffrax_ref - ours_small).max()
    errors = {name: attnflow_run(acc, sample, *cfg)() - ref for name, cfg in configs.items()}
    errors[euler] = np.stack([numpy_euler(acc, b, TS) for b in sample]) - ref

    # Fig. 3 at paper resolution: d = 2 runs in coordinates, every d ≥ 3 in log-distance form
    # (whose cost per step does not depend on d: checked on d = 8 and d = 1024).
    panel = {}
    for d in (2, 8, 1024):
        y = af.bartlett_tokens(jax.random.key(d), N, d, (args.realizations,))
        run = attnflow_run(y, sample, *configs[default])
        attnflow_run(y, sample, *configs[default], label=f"work, panel d = {d}, β sample")()
        _, wall, cpu = timed(run, 1)
        panel[d] = (wall * scale, cpu * scale)
        print(f"panel d = {d}: {wall * scale:.0f} s wall, {cpu * scale:.0f} s cpu (extrapolated)")
    panel[32] = rows[default]
    six = [panel[2][k] + panel[8][k] + 4 * panel[32][k] for k in (0, 1)]
    print(f"load average after: {os.getloadavg()}")

    base_wall, base_cpu = rows[euler]
    print(
        "\n| method (one Fig. 3 panel, d = 32) | timed on | wall (s) | cpu (s) | speed-up (wall) "
        "| speed-up (cpu) | max abs error in P | mean abs error in P |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, (wall, cpu) in rows.items():
        err = np.abs(errors[name])
        print(
            f"| {name} | {measured[name]} | {wall:.1f} | {cpu:.1f} | {base_wall / wall:.1f}× | "
            f"{base_cpu / cpu:.1f}× | {err.max():.4f} | {err.mean():.1e} |"
        )
    print(
        f"\nReference (attnflow, f64, rtol 1e-10) vs per-system diffrax Tsit5 (rtol 1e-10) on "
        f"{check} realisations: max |ΔP| = {reference_gap:.2e}"
    )
    print(
        f"Full six-panel Fig. 3 (90 β × 200 t × {args.realizations} realisations, f32, "
        f"rtol 1e-3): {six[0]:.0f} s wall, {six[1]:.0f} s cpu (d = 2: {panel[2][0]:.0f} s, "
        f"d = 8: {panel[8][0]:.0f} s, d = 32: {panel[32][0]:.0f} s (measured), "
        f"d = 1024: {panel[1024][0]:.0f} s wall)"
    )
    if args.full_figure:
        from attnflow.figures import fig3

        start = time.perf_counter()
        cpu_start = time.process_time()
        data = fig3.compute(fig3.PRESETS["full"], progress=False)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        per_panel = ", ".join(
            f"d = {d}: {s:.1f} s" for d, s in zip(data["d"], data["seconds"], strict=True)
        )
        print(
            f"Six panels measured (fig3 --full preset, compilation included): {wall:.0f} s wall, "
            f"{cpu:.0f} s cpu ({per_panel})"
        )


if __name__ == "__main__":
    main()
