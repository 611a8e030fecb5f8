"""Cost of the model variants of issue 6 (part A) relative to plain self-attention.

Same n, d, β and depth-time t1 for every row. Two baselines, each timed in this process:
  * continuous time: ``solve(SelfAttention(β), x0, t1)`` (Tsit5, rtol 1e-6, atol 1e-9);
  * discrete time: ``layers(SelfAttention(β), x0, L, t1/L)``.
Every variant is compiled first, then timed with ``block_until_ready``; the table reports the
median and the minimum of ``--repeats`` runs and their ratios to the matching baseline (on a
shared machine the minimum is the steadier estimate).

    python benchmarks/variants_a.py [--n 64] [--d 16] [--t1 5] [--layers 100] [--repeats 5]
"""

import argparse
import statistics
import time

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr

import attnflow as af

jax.config.update("jax_enable_x64", True)


def timings(fn, repeats):
    """(median, min) wall seconds over ``repeats`` runs, after one compiling run."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--t1", type=float, default=5.0)
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--sigma", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n, d, t1, L, beta = args.n, args.d, args.t1, args.layers, 1.0
    step = t1 / L
    key_x, key_w, key_r, key_n = jr.split(jr.key(0), 4)
    x0 = af.random_tokens(key_x, n, d)
    kw = jr.split(key_w, 4)
    m = 4 * d
    ff = af.FeedForward(
        jr.normal(kw[0], (d, m)) / jnp.sqrt(m),
        jr.normal(kw[1], (m, d)) / jnp.sqrt(d),
        jr.normal(kw[2], (m,)),
        jax.nn.gelu,
    )
    V = jr.normal(kw[3], (d, d)) / jnp.sqrt(d)
    sa = af.SelfAttention(beta)
    random_field = af.random_multihead_attention(
        key_r, d, num_layers=L, num_heads=args.heads, t1=t1, beta=beta
    )

    def pure_solve(field):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Tsit5(),
            0.0,
            t1,
            None,
            x0,
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9),
            max_steps=4096,
        )
        return sol.ys

    def sde(solver, form="stratonovich", common=False, brownian="tree"):
        return lambda: (
            af.solve_sde(
                sa,
                x0,
                t1,
                sigma=args.sigma,
                key=key_n,
                dt=step,
                solver=solver,
                form=form,
                common_noise=common,
                brownian=brownian,
            ).ys
        )

    continuous = {
        "SA, solve (baseline)": lambda: af.solve(sa, x0, t1).ys,
        "TransformerBlock (SA + MLP (2.8)), solve": lambda: (
            af.solve(af.TransformerBlock(sa, ff), x0, t1).ys
        ),
        "pure SA (9.1) on R^d, V random, Tsit5": lambda: pure_solve(
            af.PureSelfAttention(beta, V=V)
        ),
        "rescaled pure SA (9.3), expm per RHS, Tsit5": lambda: pure_solve(
            af.RescaledSelfAttention(beta, V=V)
        ),
        f"noisy SA, σ={args.sigma}, SlowRK (default), dt={step:g}": sde(None),
        f"noisy SA, Heun (Stratonovich), dt={step:g}": sde(diffrax.Heun()),
        f"noisy SA, Euler–Maruyama (Itô), dt={step:g}": sde(None, form="ito"),
        f"noisy SA, common noise, SlowRK, dt={step:g}": sde(None, common=True),
        f"noisy SA, SlowRK, brownian='fast', dt={step:g}": sde(None, brownian="fast"),
        f"noisy SA, Euler–Maruyama, brownian='fast', dt={step:g}": sde(
            None, form="ito", brownian="fast"
        ),
    }
    discrete = {
        "SA, layers (baseline)": lambda: af.layers(sa, x0, L, step),
        "Lie–Trotter layers (SA then MLP)": lambda: af.lie_trotter_layers(sa, ff, x0, L, step),
        f"random multi-head, H={args.heads}, resampled per layer": lambda: af.layers(
            random_field, x0, L, step
        ),
        "hardmax SA on the sphere, layers": lambda: af.layers(
            af.HardmaxSelfAttention(), x0, L, step
        ),
        "hardmax (9.5), residual_layers": lambda: af.residual_layers(
            af.HardmaxRescaledAttention(), x0, L, step
        ),
    }
    print(
        f"n={n}, d={d}, β={beta}, t1={t1}, L={L} layers (step {step:g}), "
        f"median of {args.repeats}, device {jax.devices()[0].platform}\n"
    )
    print("| variant | median (ms) | × baseline | min (ms) | × baseline (min) |")
    print("|---|---:|---:|---:|---:|")
    for table in (continuous, discrete):
        base = None
        for name, fn in table.items():
            median, fastest = timings(jax.jit(fn), args.repeats)
            base = base or (median, fastest)
            print(
                f"| {name} | {1e3 * median:.2f} | {median / base[0]:.2f} | {1e3 * fastest:.2f} "
                f"| {fastest / base[1]:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
