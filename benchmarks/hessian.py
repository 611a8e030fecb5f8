"""Hessian spectra of the interaction energy on (S^{d-1})^n (issue 4).

For E_β (β = 2, weights 1/n) at a metastable state of (SA) (100 layers of step 0.1 from uniform
tokens), on the circle (d = 2) and on S² (d = 3):

- dense: `riemannian_hessian` (n(d−1) HVP columns via jax.hessian in tangent coordinates) and
  `numpy.linalg.eigvalsh` of the (n(d−1))² matrix, for n(d−1) up to ~2000;
- matrix-free: `hessian_extreme_eigenvalues` (Lanczos on `hessian_vector_product`, orbit
  projected out, full reorthogonalisation), for the same sizes (accuracy against dense) and
  larger n;
- baseline, same process: one Hessian-vector product (its ratio says what a dense Hessian costs
  in HVPs) and one Euclidean gradient.

Every function is compiled first; times are medians of repeats, `block_until_ready`.

Usage: python benchmarks/hessian.py [--dense 250 500 1000 2000] [--lanczos 4000]
       [--iterations 60] [--repeats 3]
"""

import argparse
import platform
import time

import equinox as eqx
import jax
import jax.random as jr
import numpy as np

jax.config.update("jax_enable_x64", True)
import attnflow as af  # noqa: E402

BETA = 2.0


def median_time(fn, repeats):
    """Median wall time of ``fn()`` after one warm-up (compiling) call, and its last result."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def metastable_state(n, d):
    x0 = af.random_tokens(jr.key(n + d), n, d)
    return af.layers(af.SelfAttention(BETA), x0, 100, 0.1)[-1]


@eqx.filter_jit
def gradient(energy, x):
    return jax.grad(energy)(x)


@eqx.filter_jit
def hvp(energy, x, v):
    """The public HVP under jit, as inside Lanczos (no per-call input validation)."""
    return af.landscape.hessian_vector_product(energy, x, v)


def compressed_extremes(h, x):
    """Extreme eigenvalues of the dense Hessian with the rotation orbit removed."""
    orbit = np.asarray(af.landscape.rotation_orbit_basis(x))
    complement = np.linalg.svd(orbit, full_matrices=True)[0][:, orbit.shape[1] :]
    values = np.linalg.eigvalsh(complement.T @ h @ complement)
    return values[0], values[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dense",
        type=int,
        nargs="+",
        default=[250, 500, 1000, 2000],
        help="sizes n(d-1) for the dense spectrum",
    )
    parser.add_argument(
        "--lanczos", type=int, nargs="+", default=[4000], help="extra sizes n(d-1) for Lanczos only"
    )
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    energy = af.InteractionEnergy(BETA)
    print(
        f"# Hessian spectra, β = {BETA}, float64; {platform.processor() or platform.machine()}, "
        f"{jax.devices()[0].platform}, jax {jax.__version__}\n"
    )
    print(
        "| d | n | n(d−1) | grad (s) | HVP (s) | dense Hessian (s) | Hessian/HVP | eigvalsh (s) "
        "| Lanczos (s) | Lanczos/dense total | max rel. error of Lanczos extremes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in args.dims:
        for size in sorted(set(args.dense) | set(args.lanczos)):
            n = size // (d - 1)
            x = metastable_state(n, d)
            v = af.tangent(x, jr.normal(jr.key(1), x.shape))
            repeats = args.repeats if size < 1000 else 1
            t_grad, _ = median_time(lambda x=x: gradient(energy, x), max(repeats, 3))
            t_hvp, _ = median_time(lambda x=x, v=v: hvp(energy, x, v), max(repeats, 3))
            t_lanczos, (lo, hi) = median_time(
                lambda x=x: af.landscape.hessian_extreme_eigenvalues(
                    energy, x, num_iterations=args.iterations
                ),
                repeats,
            )
            if size in args.dense:
                t_hess, h = median_time(lambda x=x: af.riemannian_hessian(energy, x), repeats)
                h = np.asarray(h)
                start = time.perf_counter()
                np.linalg.eigvalsh(h)
                t_eig = time.perf_counter() - start
                ref = compressed_extremes(h, x)
                err = max(
                    abs(float(lo) - ref[0]) / abs(ref[0]), abs(float(hi) - ref[1]) / abs(ref[1])
                )
                dense = (
                    f"{t_hess:.3g} | {t_hess / t_hvp:.0f} | {t_eig:.3g} | {t_lanczos:.3g} | "
                    f"{t_lanczos / (t_hess + t_eig):.3f} | {err:.1e}"
                )
            else:
                dense = f"— | — | — | {t_lanczos:.3g} | — | —"
            print(
                f"| {d} | {n} | {n * (d - 1)} | {t_grad:.3g} | {t_hvp:.3g} | {dense} |", flush=True
            )


if __name__ == "__main__":
    main()
