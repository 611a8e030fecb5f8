"""Spherical-harmonic transforms for the S² mean-field grid: s2fft against a jnp Gauss–Legendre
× FFT transform (attnflow/meanfield/_sphere_legendre.py), on accuracy and speed.

Both transform a real band-limited function (degrees ℓ < L, L² real degrees of freedom) between
its coefficients and its values on the same Gauss–Legendre grid (L latitudes × (2L − 1)
longitudes). s2fft uses its complex layout (L, 2L − 1) with ``reality=True`` and precomputed
Legendre tables (``generate_precomputes_jax``), method "jax"; the alternative uses real
harmonics, a flat vector of L² coefficients, one matrix product per order and a real FFT.

Accuracy, per L and dtype (float64, and float32 in a subprocess with x64 off):
  round trip  max |forward(inverse(c)) − c| / max |c| for random coefficients;
  known       max |forward(f) − c| / max |c| where f = Σ c_ℓm Y_ℓm is evaluated on the grid by
              SciPy's ``sph_harm_y`` in float64 (independent of both transforms).
Speed: one jitted function forward ∘ inverse, compiled first, median of 5 calls (and the compile
time of the first call), both run in this process with the same XLA threads.

Usage: python benchmarks/meanfield_s2_transforms.py [--degrees 16 32 64] [--repeats 5]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def _scipy_values(coefficients_complex, degree, thetas, phis):
    """Σ f_ℓm Y_ℓm on the grid (complex orthonormal harmonics with the Condon–Shortley phase)."""
    import scipy.special

    def sph_harm_y(ell, m, theta, phi):
        if hasattr(scipy.special, "sph_harm_y"):  # SciPy ≥ 1.15
            return scipy.special.sph_harm_y(ell, m, theta, phi)
        return scipy.special.sph_harm(m, ell, phi, theta)

    theta, phi = np.meshgrid(thetas, phis, indexing="ij")
    values = np.zeros(theta.shape, dtype=np.complex128)
    for ell in range(degree):
        for m in range(-ell, ell + 1):
            values += coefficients_complex[ell, degree - 1 + m] * sph_harm_y(ell, m, theta, phi)
    return values.real


def _random_real_signal(degree, rng):
    """Complex coefficients (L, 2L−1) of a real signal: f_ℓ,−m = (−1)^m conj(f_ℓm)."""
    flm = np.zeros((degree, 2 * degree - 1), dtype=np.complex128)
    for ell in range(degree):
        flm[ell, degree - 1] = rng.standard_normal()
        for m in range(1, ell + 1):
            value = rng.standard_normal() + 1j * rng.standard_normal()
            flm[ell, degree - 1 + m] = value
            flm[ell, degree - 1 - m] = (-1) ** m * np.conj(value)
    return flm


def _complex_to_real_flat(flm, degree):
    """Coefficients of the same function in attnflow's real basis (orthonormal for dσ)."""
    out = []
    for ell in range(degree):
        for m in range(-ell, ell + 1):
            if m == 0:
                value = flm[ell, degree - 1].real
            elif m > 0:
                value = np.sqrt(2) * (-1) ** m * flm[ell, degree - 1 + m].real
            else:
                value = -np.sqrt(2) * (-1) ** m * flm[ell, degree - 1 - m].imag
            out.append(value / np.sqrt(4 * np.pi))
    return np.asarray(out)


def _median_time(fn, arg, repeats):
    start = time.perf_counter()
    fn(arg).block_until_ready()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(arg).block_until_ready()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), compile_s


def _run(degrees, repeats, dtype_name, libraries):
    import jax
    import jax.numpy as jnp

    if "s2fft" in libraries:
        try:
            import s2fft
        except ImportError as error:  # not a dependency of attnflow: only this comparison
            raise SystemExit("this benchmark needs s2fft: pip install 's2fft>=1.5'") from error

    from attnflow.meanfield import _sphere_legendre as gl

    dtype = jnp.float64 if dtype_name == "float64" else jnp.float32
    rows = []
    for degree in degrees:
        rng = np.random.default_rng(degree)
        flm = _random_real_signal(degree, rng)
        x, w, phi = gl.gauss_legendre_grid(degree)
        values = _scipy_values(flm, degree, np.arccos(x), phi)
        scale = np.abs(flm).max()

        # s2fft
        s2_rt = s2_known = s2_time = s2_compile = float("nan")
        if "s2fft" in libraries:
            pre_inv = s2fft.generate_precomputes_jax(degree, 0, sampling="gl", forward=False)
            pre_fwd = s2fft.generate_precomputes_jax(degree, 0, sampling="gl", forward=True)

            def s2_inverse(a, pre_inv=pre_inv, degree=degree):
                return s2fft.inverse_jax(a, degree, sampling="gl", reality=True, precomps=pre_inv)

            def s2_forward(f, pre_fwd=pre_fwd, degree=degree):
                return s2fft.forward_jax(f, degree, sampling="gl", reality=True, precomps=pre_fwd)

            ctype = jnp.complex128 if dtype_name == "float64" else jnp.complex64
            s2_round = jax.jit(lambda a, i=s2_inverse, f=s2_forward: f(i(a)))
            flm_j = jnp.asarray(flm, dtype=ctype)
            s2_time, s2_compile = _median_time(s2_round, flm_j, repeats)
            s2_rt = float(np.abs(np.asarray(s2_round(flm_j)) - flm).max() / scale)
            known = jax.jit(s2_forward)(jnp.asarray(values, dtype))
            s2_known = float(np.abs(np.asarray(known) - flm).max() / scale)

        # jnp Gauss–Legendre × FFT
        p, _ = gl.legendre_tables(degree, x)
        p[1:] *= np.sqrt(2.0)
        table = jnp.asarray(p, dtype)
        cos_index, sin_index = gl.order_tables(degree)
        weights = jnp.asarray(np.outer(w, np.full(phi.size, 1.0 / phi.size)), dtype)
        example = jnp.zeros(degree * degree, dtype)

        def gl_inverse(c, table=table, cos_index=cos_index, sin_index=sin_index, n=phi.size):
            return gl.synthesize(c, table, cos_index, sin_index, n)

        def gl_forward(f, inverse=gl_inverse, weights=weights, example=example):
            (out,) = jax.linear_transpose(inverse, example)(weights * f)
            return out

        real = _complex_to_real_flat(flm, degree)
        real_j = jnp.asarray(real, dtype)
        gl_round = jax.jit(lambda c, i=gl_inverse, f=gl_forward: f(i(c)))
        gl_time, gl_compile = _median_time(gl_round, real_j, repeats)
        rscale = np.abs(real).max()
        gl_rt = float(np.abs(np.asarray(gl_round(real_j)) - real).max() / rscale)
        gl_known = float(
            np.abs(np.asarray(jax.jit(gl_forward)(jnp.asarray(values, dtype))) - real).max()
            / rscale
        )
        rows.append(
            dict(
                L=degree,
                dtype=dtype_name,
                s2fft_roundtrip=s2_rt,
                s2fft_known=s2_known,
                s2fft_ms=1e3 * s2_time,
                s2fft_compile_s=s2_compile,
                jnp_roundtrip=gl_rt,
                jnp_known=gl_known,
                jnp_ms=1e3 * gl_time,
                jnp_compile_s=gl_compile,
            )
        )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--degrees", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dtype", choices=["float64", "float32", "both"], default="both")
    parser.add_argument(
        "--libraries", nargs="+", choices=["s2fft", "jnp"], default=["s2fft", "jnp"]
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per dtype")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dtype != "both":
        import jax

        jax.config.update("jax_enable_x64", args.dtype == "float64")
        rows = _run(args.degrees, args.repeats, args.dtype, args.libraries)
        if args.json:
            print(json.dumps(rows))
        else:
            _print_rows(rows)
        return
    for dtype in ("float64", "float32"):
        # Each dtype in its own process: x64 is a global switch, and s2fft reads it at import.
        # A stalled compilation (seen: s2fft in float32) is reported, not waited for.
        command = [sys.executable, __file__, "--dtype", dtype, "--json", "--repeats"]
        command += [str(args.repeats), "--degrees", *map(str, args.degrees)]
        command += ["--libraries", *args.libraries]
        try:
            out = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=True,
                env=os.environ,
                timeout=args.timeout,
            )
        except subprocess.TimeoutExpired:
            print(f"{dtype}: did not finish within {args.timeout} s")
            continue
        _print_rows(json.loads(out.stdout.strip().splitlines()[-1]))


def _print_rows(rows):
    print(
        f"{'L':>4} {'dtype':>8} | {'s2fft rt':>9} {'known':>9} {'ms':>8} {'compile s':>9} | "
        f"{'jnp rt':>9} {'known':>9} {'ms':>8} {'compile s':>9}"
    )
    for r in rows:
        print(
            f"{r['L']:>4} {r['dtype']:>8} | {r['s2fft_roundtrip']:9.1e} {r['s2fft_known']:9.1e} "
            f"{r['s2fft_ms']:8.3f} {r['s2fft_compile_s']:9.2f} | {r['jnp_roundtrip']:9.1e} "
            f"{r['jnp_known']:9.1e} {r['jnp_ms']:8.3f} {r['jnp_compile_s']:9.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
