"""Where the reverse-mode cost of `solve` comes from (issue 12): the gradient of a scalar of the
solution (n = 256, d = 64, t1 = 10, float32, SA with random Q, K, V, as in grad.py) against the
forward solve, with the same 17 Tsit5 steps taken three ways:

- diffrax, constant step, ``RecursiveCheckpointAdjoint(checkpoints=17)`` (every step a
  checkpoint: the backward pass recomputes each step's forward once, then its VJP);
- a plain ``lax.scan`` over diffrax's own Tsit5 step, differentiated by JAX with every residual
  stored (no recomputation at all: the floor of any checkpointing scheme);
- the same scan with ``jax.checkpoint`` on the step (recompute each step, as diffrax does);
- one field evaluation and its VJP with respect to (x, Q, K, V).

Compiled first; medians of ``--repeats`` calls timed round-robin (grad.py's ``median_times``);
memory is XLA's buffer assignment (temporaries + outputs).

    python benchmarks/reverse_floor.py [--repeats 7]
"""

import argparse
import pathlib
import sys

import diffrax
import jax
import jax.numpy as jnp

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import grad as G  # noqa: E402  (enables x64, as grad.py does)

import attnflow as af  # noqa: E402

N, T1 = 17, 10.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    dtype = jnp.float32
    params, x0, target = G.problem(256, 64, dtype)
    dt = T1 / N
    solver = diffrax.Tsit5()

    def field_of(params):
        beta = jnp.asarray(G.BETA, dtype)
        return af.SelfAttention(beta, params["Q"], params["K"], params["V"])

    def scanned(params, x0, checkpoint):
        terms = diffrax.ODETerm(field_of(params))
        state0 = solver.init(terms, 0.0, dt, x0, None)

        def body(carry, t0):
            y, state = carry
            y1, _, _, state, _ = solver.step(terms, t0, t0 + dt, y, None, state, False)
            return (y1, state), None

        if checkpoint:
            body = jax.checkpoint(body)
        (y, _), _ = jax.lax.scan(body, (x0, state0), jnp.arange(N, dtype=dtype) * dt)
        return jnp.sum(target * y)

    constant = dict(stepsize_controller=diffrax.ConstantStepSize(), dt0=dt, max_steps=N)
    diffrax_loss = G.make_loss(target, **constant)
    diffrax_grad_loss = G.make_loss(
        target, adjoint=diffrax.RecursiveCheckpointAdjoint(checkpoints=N), **constant
    )
    cases = {
        "diffrax forward": jax.jit(diffrax_loss),
        "diffrax gradient (checkpoint every step)": jax.jit(jax.grad(diffrax_grad_loss, (0, 1))),
        "scan forward": jax.jit(lambda p, x: scanned(p, x, False)),
        "scan gradient, residuals stored": jax.jit(
            jax.grad(lambda p, x: scanned(p, x, False), (0, 1))
        ),
        "scan gradient, jax.checkpoint per step": jax.jit(
            jax.grad(lambda p, x: scanned(p, x, True), (0, 1))
        ),
    }
    seconds = G.median_times(list(cases.values()), (params, x0), args.repeats)
    print(f"jax {jax.__version__}; n = 256, d = 64, {N} Tsit5 steps, float32\n")
    print("| program | median (ms) | / its forward | memory (MiB) |")
    print("|---|---|---|---|")
    base = {"diffrax": seconds[0], "scan": seconds[2]}
    for (name, fn), t in zip(cases.items(), seconds, strict=True):
        mib = G.program_bytes(fn, (params, x0)) / 2**20
        print(f"| {name} | {1e3 * t:.2f} | {t / base[name.split()[0]]:.2f} | {mib:.1f} |")

    field = jax.jit(lambda p, x: field_of(p)(0.0, x))
    cotangent = jnp.ones_like(x0)
    vjp = jax.jit(lambda p, x: jax.vjp(lambda q, y: field_of(q)(0.0, y), p, x)[1](cotangent))
    f_time, v_time = G.median_times([field, vjp], (params, x0), 4 * args.repeats)
    f_flops, v_flops = (xla_flops(fn, (params, x0)) for fn in (field, vjp))
    print(
        f"\none field evaluation {1e6 * f_time:.0f} µs, {f_flops / 1e6:.1f} MFLOP (XLA); "
        f"forward + VJP in (x, Q, K, V) {1e6 * v_time:.0f} µs, {v_flops / 1e6:.1f} MFLOP "
        f"({v_time / f_time:.2f}× the time, {v_flops / f_flops:.2f}× the FLOPs); "
        f"{N} steps = {6 * N + 1} field evaluations forward"
    )


def xla_flops(fn, args):
    """FLOPs of one call of the jitted ``fn`` from XLA's cost analysis."""
    cost = fn.lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost.get("flops", float("nan")))


if __name__ == "__main__":
    main()
