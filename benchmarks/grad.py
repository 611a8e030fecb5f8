"""Cost of differentiating through `attnflow.solve` (issue 3): (SA), n = 256, d = 64, t1 = 10.

Part 1, one adaptive solve (Tsit5 + PID), compiled once, median of repeats timed round-robin:
- forward solve (the baseline for the ratios);
- reverse-mode gradient of a scalar loss with respect to x0 and (Q, K, V), default
  `RecursiveCheckpointAdjoint` (exact, binomial checkpointing);
- the same gradient with `attnflow.StoredStepAdjoint()` (exact: the linearisations of up to 64
  accepted steps stored, rejected steps skipped);
- the same gradient with `BacksolveAdjoint` (continuous adjoint, O(1) memory, approximate);
- forward-mode JVP along one direction (`ForwardMode`);
- Hessian-vector product in β with `solve(..., differentiable_twice=True)`.
Memory is XLA's own buffer assignment for the compiled program (`compiled.memory_analysis()`:
temporaries + outputs, arguments excluded), i.e. the peak the program needs beyond its inputs.

Part 2, reverse-mode memory against the number of steps: a constant step size with N steps
(max_steps = N), for diffrax's default checkpoint budget (`checkpoints=None`: about
sqrt(2 · max_steps) checkpoints, so it grows with max_steps, not with the steps taken), a fixed
budget of 16 checkpoints, and `DirectAdjoint` for comparison.

Part 3 (printed after part 1): `StoredStepAdjoint`'s time and memory against its number of slots.

Usage: python benchmarks/grad.py [--n 256] [--d 64] [--repeats 7] [--dtype float32]
"""

import argparse
import platform
import time

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

jax.config.update("jax_enable_x64", True)
from solve import field_flops  # noqa: E402  (benchmarks/solve.py)

import attnflow as af  # noqa: E402

BETA, T1 = 1.0, 10.0


def median_times(fns, args, repeats):
    """Median wall time of each compiled ``fn(*args)``, timed round-robin so that a change in
    the machine's load during the run affects every case alike."""
    for fn in fns:
        jax.block_until_ready(fn(*args))  # compile / warm up
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, record in zip(fns, times, strict=True):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            record.append(time.perf_counter() - start)
    return [float(np.median(record)) for record in times]


def program_bytes(fn, args):
    analysis = fn.lower(*args).compile().memory_analysis()
    if analysis is None:
        return float("nan")
    return analysis.temp_size_in_bytes + analysis.output_size_in_bytes


def problem(n, d, dtype, seed=0):
    keys = jr.split(jr.key(seed), 5)
    scale = 1 / np.sqrt(d)
    params = {
        "Q": (jnp.eye(d) + scale * jr.normal(keys[0], (d, d))).astype(dtype),
        "K": (jnp.eye(d) + scale * jr.normal(keys[1], (d, d))).astype(dtype),
        "V": (jnp.eye(d) + scale * jr.normal(keys[2], (d, d))).astype(dtype),
    }
    x0 = af.random_tokens(keys[3], n, d, dtype=dtype)
    target = jr.normal(keys[4], (n, d), dtype=dtype)
    return params, x0, target


def make_loss(target, **solve_kwargs):
    def loss(params, x0, beta=BETA):
        # β in the tokens' dtype: BacksolveAdjoint's augmented state must not mix precisions.
        beta = jnp.asarray(beta, x0.dtype)
        field = af.SelfAttention(beta, params["Q"], params["K"], params["V"])
        xs = af.solve(field, x0, T1, **solve_kwargs).ys[-1]
        return jnp.sum(target * xs)

    return loss


def part_one(n, d, dtype, repeats, rtol, atol):
    params, x0, target = problem(n, d, dtype)
    tolerances = {"rtol": rtol, "atol": atol}
    loss = make_loss(target, **tolerances)
    field = af.SelfAttention(BETA, params["Q"], params["K"], params["V"])
    stats = af.solve(field, x0, T1, **tolerances).stats
    steps = int(stats["num_steps"])
    accepted = int(stats["num_accepted_steps"])
    # Tsit5: 6 new stages a step (first-same-as-last), one more evaluation at the start.
    evaluations = 6 * steps + 1
    flops = field_flops(field, x0)
    vjp = jax.jit(lambda x: jax.vjp(lambda y: field(0.0, y, None), x)[1](x)).lower(x0).compile()
    cost = vjp.cost_analysis()
    vjp_flops = float((cost[0] if isinstance(cost, list) else cost).get("flops", float("nan")))
    direction = jax.tree.map(lambda p: jnp.ones_like(p) / p.size**0.5, params)
    backsolve = make_loss(target, adjoint=diffrax.BacksolveAdjoint(), **tolerances)
    stored = make_loss(target, adjoint=af.StoredStepAdjoint(), **tolerances)
    forward_mode = make_loss(target, adjoint=diffrax.ForwardMode(), **tolerances)
    twice = make_loss(target, differentiable_twice=True, **tolerances)
    twice_checkpointed = make_loss(
        target,
        differentiable_twice=True,
        adjoint=diffrax.RecursiveCheckpointAdjoint(),
        **tolerances,
    )

    cases = {
        "forward solve": jax.jit(loss),
        "reverse-mode gradient (RecursiveCheckpointAdjoint)": jax.jit(jax.grad(loss, (0, 1))),
        "reverse-mode gradient (StoredStepAdjoint)": jax.jit(jax.grad(stored, (0, 1))),
        "BacksolveAdjoint gradient": jax.jit(jax.grad(backsolve, (0, 1))),
        "forward-mode JVP (ForwardMode), 1 direction": jax.jit(
            lambda p, x: jax.jvp(lambda q: forward_mode(q, x), (p,), (direction,))
        ),
        "d²/dβ² (jax.hessian, differentiable_twice=True: DirectAdjoint)": jax.jit(
            lambda p, x: jax.hessian(lambda b: twice(p, x, b))(jnp.asarray(BETA, dtype))
        ),
        "d²/dβ² (jax.hessian, bounded Tsit5 + RecursiveCheckpointAdjoint)": jax.jit(
            lambda p, x: jax.hessian(lambda b: twice_checkpointed(p, x, b))(
                jnp.asarray(BETA, dtype)
            )
        ),
    }
    exact = cases["reverse-mode gradient (RecursiveCheckpointAdjoint)"](params, x0)
    approx = cases["BacksolveAdjoint gradient"](params, x0)
    leaves_exact, leaves_approx = jax.tree.leaves(exact), jax.tree.leaves(approx)
    backsolve_error = max(
        float(jnp.linalg.norm(a - e) / jnp.linalg.norm(e))
        for a, e in zip(leaves_approx, leaves_exact, strict=True)
    )
    stored_value = cases["reverse-mode gradient (StoredStepAdjoint)"](params, x0)
    stored_difference = max(
        float(jnp.max(jnp.abs(a - e)) / jnp.max(jnp.abs(e)))
        for a, e in zip(jax.tree.leaves(stored_value), leaves_exact, strict=True)
    )
    jvp_value = float(cases["forward-mode JVP (ForwardMode), 1 direction"](params, x0)[1])
    reverse_value = sum(
        float(jnp.vdot(g, v))
        for g, v in zip(jax.tree.leaves(exact[0]), jax.tree.leaves(direction), strict=True)
    )

    seconds = median_times(list(cases.values()), (params, x0), repeats)
    rows = [
        (name, time_, program_bytes(fn, (params, x0)))
        for (name, fn), time_ in zip(cases.items(), seconds, strict=True)
    ]
    base_time, base_bytes = rows[0][1], rows[0][2]
    print(
        f"\n### Part 1: n = {n}, d = {d}, t1 = {T1}, {np.dtype(dtype).name}, "
        f"rtol = {rtol:g}, atol = {atol:g} ({steps} accepted+rejected steps)\n"
    )
    print("| computation | time (ms) | × forward | memory (MiB) | × forward |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds, size in rows:
        print(
            f"| {name} | {1e3 * seconds:.1f} | {seconds / base_time:.2f} | "
            f"{size / 2**20:.1f} | {size / base_bytes:.1f} |"
        )
    print(
        f"\nWork: {steps} steps ({accepted} accepted), {evaluations} field evaluations, "
        f"{evaluations * flops / 1e9:.2f} GFLOP forward (XLA: {flops / 1e6:.1f} MFLOP an "
        f"evaluation, {vjp_flops / 1e6:.1f} MFLOP its forward + VJP). Flop floor of an exact "
        f"gradient that stores every accepted step: forward + {6 * accepted} VJPs = "
        f"{(evaluations * flops + 6 * accepted * (vjp_flops - flops)) / (evaluations * flops):.2f}"
        " × the forward."
    )
    print(f"BacksolveAdjoint relative gradient error vs exact reverse mode: {backsolve_error:.2e}")
    print(
        "StoredStepAdjoint vs the default adjoint: max |difference| / max |gradient| = "
        f"{stored_difference:.1e}"
    )
    print(
        f"forward-mode JVP vs reverse-mode gradient·direction: relative difference "
        f"{abs(jvp_value - reverse_value) / abs(reverse_value):.2e}"
    )


def slot_sweep(n, d, dtype, repeats, rtol, atol, slot_counts):
    """StoredStepAdjoint's time and memory against its number of slots (``steps=``)."""
    params, x0, target = problem(n, d, dtype)
    tolerances = {"rtol": rtol, "atol": atol}
    fns = [jax.jit(make_loss(target, **tolerances))]
    for slots in slot_counts:
        adjoint = af.StoredStepAdjoint(steps=slots)
        fns.append(jax.jit(jax.grad(make_loss(target, adjoint=adjoint, **tolerances), (0, 1))))
    seconds = median_times(fns, (params, x0), repeats)
    print(f"\n### StoredStepAdjoint: slots against time (n = {n}, d = {d})\n")
    print("| slots | " + " | ".join(str(k) for k in slot_counts) + " |")
    print("|---|" + "---:|" * len(slot_counts))
    print("| × forward | " + " | ".join(f"{t / seconds[0]:.2f}" for t in seconds[1:]) + " |")
    sizes = [program_bytes(fn, (params, x0)) / 2**20 for fn in fns[1:]]
    print("| memory (MiB) | " + " | ".join(f"{m:.1f}" for m in sizes) + " |")


def backsolve_errors(n, d, dtype, rtol, atol, t1s):
    params, x0, target = problem(n, d, dtype)

    def loss(params, x0, t1, adjoint):
        beta = jnp.asarray(BETA, dtype)
        field = af.SelfAttention(beta, params["Q"], params["K"], params["V"])
        xs = af.solve(field, x0, t1, rtol=rtol, atol=atol, adjoint=adjoint).ys[-1]
        return jnp.sum(target * xs)

    exact = jax.jit(jax.grad(lambda p, x, t: loss(p, x, t, None), (0, 1)))
    approx = jax.jit(jax.grad(lambda p, x, t: loss(p, x, t, diffrax.BacksolveAdjoint()), (0, 1)))
    cells = []
    for t1 in t1s:
        t1 = jnp.asarray(t1, dtype)
        (exact_p, exact_x), (approx_p, approx_x) = exact(params, x0, t1), approx(params, x0, t1)
        error_p = max(
            float(jnp.linalg.norm(approx_p[k] - exact_p[k]) / jnp.linalg.norm(exact_p[k]))
            for k in exact_p
        )
        error_x = float(jnp.linalg.norm(approx_x - exact_x) / jnp.linalg.norm(exact_x))
        cells.append(f"{error_p:.1e} / {error_x:.1e}")
    return cells


def backsolve_accuracy(n, d, t1s):
    """Relative error of BacksolveAdjoint against exact reverse mode, as the flow clusters."""
    print(
        f"\n### BacksolveAdjoint accuracy against t1 (n = {n}, d = {d}; relative error of "
        "the gradient in (Q, K, V) / in x0)\n"
    )
    print("| precision, tolerances | " + " | ".join(f"t1 = {t:g}" for t in t1s) + " |")
    print("|---|" + "---:|" * len(t1s))
    for dtype, rtol, atol in [(jnp.float32, 1e-5, 1e-6), (jnp.float64, 1e-10, 1e-12)]:
        cells = backsolve_errors(n, d, dtype, rtol, atol, t1s)
        print(f"| {np.dtype(dtype).name}, rtol {rtol:g} | " + " | ".join(cells) + " |")


def part_two(n, d, dtype, step_counts):
    params, x0, target = problem(n, d, dtype)
    state_mib = n * d * np.dtype(dtype).itemsize / 2**20
    adjoints = {
        "RecursiveCheckpointAdjoint() (default budget)": lambda steps: (
            diffrax.RecursiveCheckpointAdjoint()
        ),
        "RecursiveCheckpointAdjoint(checkpoints=16)": lambda steps: (
            diffrax.RecursiveCheckpointAdjoint(checkpoints=min(16, steps))
        ),
        "DirectAdjoint()": lambda steps: diffrax.DirectAdjoint(),
        "StoredStepAdjoint(steps=N) (every step stored)": lambda steps: af.StoredStepAdjoint(steps),
    }
    print(
        f"\n### Part 2: reverse-mode memory (MiB) against the number of steps "
        f"(constant step, n = {n}, d = {d}, {np.dtype(dtype).name}; one state = "
        f"{state_mib:.3f} MiB)\n"
    )
    print("| adjoint | " + " | ".join(f"N = {s}" for s in step_counts) + " |")
    print("|---|" + "---:|" * len(step_counts))
    for name, make in adjoints.items():
        cells = []
        for steps in step_counts:
            loss = make_loss(
                target,
                solver=diffrax.Tsit5(),
                stepsize_controller=diffrax.ConstantStepSize(),
                dt0=T1 / steps,
                max_steps=steps,
                adjoint=make(steps),
            )
            fn = jax.jit(jax.grad(loss, (0, 1)))
            cells.append(f"{program_bytes(fn, (params, x0)) / 2**20:.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--steps", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    parser.add_argument("--slots", type=int, nargs="+", default=[16, 24, 32, 64, 128])
    parser.add_argument(
        "--parts",
        nargs="+",
        default=["one", "slots", "backsolve", "two"],
        choices=["one", "slots", "backsolve", "two"],
        help="which parts to run (default all)",
    )
    args = parser.parse_args()
    dtype = jnp.dtype(args.dtype)
    rtol, atol = (1e-5, 1e-6) if dtype == jnp.float32 else (1e-8, 1e-10)
    print(
        f"jax {jax.__version__}, diffrax {diffrax.__version__}, {platform.processor() or '?'}, "
        f"{jax.devices()[0].platform}, {jax.device_count()} device(s)"
    )
    if "one" in args.parts:
        part_one(args.n, args.d, dtype, args.repeats, rtol, atol)
    if "slots" in args.parts:
        slot_sweep(args.n, args.d, dtype, args.repeats, rtol, atol, args.slots)
    if "backsolve" in args.parts:
        backsolve_accuracy(args.n, args.d, [1.0, 3.0, 10.0])
    if "two" in args.parts:
        part_two(args.n, args.d, dtype, args.steps)


if __name__ == "__main__":
    main()
