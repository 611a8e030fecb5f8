"""Modes of a Gaussian kernel density estimator: the number of metastable clusters
(Geshkovski, Rigollet, Sun, arXiv:2412.09080; docs/maths.md §10).

For samples X_1..X_n and bandwidth β^{-1/2}, the estimator f(x) = Σ_i e^{−β(x − X_i)²/2} has
E[#modes] = Θ(√(β log β)) for N(0, 1) samples and n^c ≲ β ≲ n^{2−c}. On the sphere
e^{β⟨x, y⟩} = e^β e^{−β|x − y|²/2}, so in its early phase (USA) on the circle is the gradient
ascent of the von Mises density f(θ) = Σ_i e^{β cos(θ − θ_i)} (``circular=True``): the count
of its modes is the count of clusters the tokens are drawn to first.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, Int

from .._check import (
    MAX_GRID_POINTS,
    MAX_STEPS_LIMIT,
    check_bool,
    check_budget,
    check_real,
    check_size,
)


def _check(samples, beta, points_per_bandwidth, circular=False):
    check_bool(circular, "circular")
    check_real(samples, "samples"), check_real(beta, "beta")
    samples = np.asarray(samples)
    if samples.ndim < 1 or samples.shape[-1] < 1:
        raise ValueError(
            f"samples: expected an array (..., n) with n >= 1, got shape {samples.shape}"
        )
    if not np.issubdtype(samples.dtype, np.floating):
        samples = samples.astype(float)
    if not np.all(np.isfinite(samples)):
        raise ValueError("samples: expected finite values, got NaN or inf")
    if np.ndim(beta) != 0 or not (math.isfinite(float(beta)) and float(beta) > 0):
        raise ValueError(f"beta: expected a finite scalar > 0 (bandwidth β^(-1/2)), got {beta!r}")
    if not (isinstance(points_per_bandwidth, (int, np.integer)) and points_per_bandwidth >= 4):
        raise ValueError(
            f"points_per_bandwidth: expected an integer >= 4, got {points_per_bandwidth!r}"
        )
    return samples, float(beta)


def _derivative_line(x, samples, beta):
    """sign-preserving f'(x)·e^{m(x)}: −Σ_i (x − X_i) e^{−β(x − X_i)²/2 + m}, m = min_i β(x−X_i)²/2.
    x (G,), samples (n,)."""
    diff = x[:, None] - samples[None, :]
    q = 0.5 * beta * diff * diff
    return -jnp.sum(diff * jnp.exp(jnp.min(q, axis=1, keepdims=True) - q), axis=1)


def _derivative_circle(x, samples, beta):
    """sign-preserving derivative of Σ_i e^{β cos(θ − θ_i)}: −Σ_i sin(θ − θ_i) e^{β(cos − max)}."""
    diff = x[:, None] - samples[None, :]
    q = beta * jnp.cos(diff)
    return -jnp.sum(jnp.sin(diff) * jnp.exp(q - jnp.max(q, axis=1, keepdims=True)), axis=1)


def _grid(samples, beta, points_per_bandwidth, circular):
    sigma = 1 / math.sqrt(beta)
    if circular:
        points = max(16, int(math.ceil(2 * math.pi / sigma * points_per_bandwidth)))
        lo = np.zeros(samples.shape[:-1])
        width = np.full(samples.shape[:-1], 2 * math.pi)
        return lo, width, points
    # No critical point outside [min X, max X]: f' > 0 left of it and < 0 right of it.
    lo, hi = samples.min(axis=-1), samples.max(axis=-1)
    width = np.maximum(hi - lo, sigma)
    points = max(16, int(math.ceil(width.max() / sigma * points_per_bandwidth)) + 1)
    return lo - 0.5 * sigma, width + sigma, points


@functools.partial(jax.jit, static_argnames=("points", "chunk", "circular"))
def _sign_grid(samples, beta, lo, width, points, chunk, circular):
    """x on the grid and f'(x) > 0, for a batch: samples (B, n), lo and width (B,)."""
    derivative = _derivative_circle if circular else _derivative_line
    steps = jnp.arange(points, dtype=samples.dtype) / (points - (0 if circular else 1))

    def one(sample, lo, width):
        x = lo + width * steps
        values = jax.lax.map(lambda c: derivative(c, sample, beta), x.reshape(-1, chunk))
        return x, values.reshape(-1) > 0

    return jax.lax.map(lambda args: one(*args), (samples, lo, width))


def _pad(points, chunk):
    return -(-points // chunk) * chunk


def kde_mode_count(
    samples: ArrayLike,
    beta: float,
    *,
    circular: bool = False,
    points_per_bandwidth: int = 16,
) -> Int[np.ndarray, "*batch"]:
    """The number of modes (local maxima) of the Gaussian kernel density estimator with
    bandwidth β^{-1/2} (Geshkovski–Rigollet–Sun):

        f(x) = Σ_i exp(−β (x − X_i)² / 2)         (``circular=False``, on the real line),
        f(θ) = Σ_i exp(β cos(θ − θ_i))             (``circular=True``, angles on the circle).

    The sign of f' is evaluated (overflow-free: each sum is scaled by its largest term) on a grid
    of ``points_per_bandwidth`` points per β^{-1/2} covering [min X, max X] (no critical point
    lies outside) or the whole circle; every + → − sign change brackets exactly one mode.
    Modes closer than the grid spacing to an antimode (a near-degenerate pair) can be missed;
    :func:`attnflow.measures.kde_modes` refines the brackets to the modes themselves.

    Args:
        samples: (..., n) samples (angles when ``circular``); batch dimensions are vectorised.
        beta: β > 0.
        circular: use the von Mises kernel on the circle.
        points_per_bandwidth: grid points per bandwidth (≥ 4).

    Returns:
        Integer array of shape ``samples.shape[:-1]``.

    Example:
        >>> import numpy as np
        >>> from attnflow.measures import kde_mode_count
        >>> int(kde_mode_count(np.array([-3.0, 0.0, 0.1, 3.0]), 4.0))
        3
        >>> int(kde_mode_count(np.array([0.0, 0.1, np.pi]), 30.0, circular=True))
        2
    """
    samples, beta = _check(samples, beta, points_per_bandwidth, circular)
    counts = [len(b) for b in _brackets(samples, beta, circular, points_per_bandwidth)]
    return np.asarray(counts, dtype=int).reshape(samples.shape[:-1])


def _brackets(samples, beta, circular, points_per_bandwidth, chunk=512):
    lo, width, points = _grid(samples, beta, points_per_bandwidth, circular)
    check_budget(
        "samples",
        points * max(1, math.prod(samples.shape[:-1])),
        MAX_GRID_POINTS,
        what="grid points (spread of the samples / β^(-1/2) × points_per_bandwidth, per set)",
        hint="lower beta or points_per_bandwidth, or bring the samples closer together",
    )
    chunk = min(chunk, points)
    points = _pad(points, chunk)
    result = []
    flat = jnp.asarray(samples.reshape(-1, samples.shape[-1]))
    dtype = flat.dtype
    xs, signs = _sign_grid(
        flat,
        jnp.asarray(beta, dtype),
        jnp.asarray(lo.reshape(-1), dtype),
        jnp.asarray(width.reshape(-1), dtype),
        points,
        chunk,
        circular,
    )
    for x, positive in zip(np.asarray(xs), np.asarray(signs), strict=True):
        nxt = np.roll(positive, -1) if circular else positive[1:]
        here = positive if circular else positive[:-1]
        starts = np.flatnonzero(here & ~nxt)
        ends = (starts + 1) % len(x) if circular else starts + 1
        right = np.where(ends > starts, x[ends], x[ends] + 2 * math.pi)
        result.append(np.stack([x[starts], right], axis=-1))
    return result


def kde_modes(
    samples: ArrayLike,
    beta: float,
    *,
    circular: bool = False,
    points_per_bandwidth: int = 16,
    iterations: int = 60,
) -> list[Float[np.ndarray, " modes"]]:
    """The modes of the estimator of :func:`attnflow.measures.kde_mode_count`, refined by
    bisection of f' inside
    each bracket (``iterations`` halvings). Returns one sorted array of mode locations per sample
    set (a list over the flattened batch); on the circle, angles in [0, 2π).

    Example:
        >>> import numpy as np
        >>> from attnflow.measures import kde_modes
        >>> [round(float(m), 6) for m in kde_modes(np.array([-1.0, 1.0]), 9.0)[0]]
        [-1.0, 1.0]
    """
    samples, beta = _check(samples, beta, points_per_bandwidth, circular)
    iterations = check_size(
        iterations, "iterations", limit=MAX_STEPS_LIMIT, what="mean-shift iterations"
    )
    derivative = _derivative_circle if circular else _derivative_line
    flat = samples.reshape(-1, samples.shape[-1])
    found = []
    for sample, bracket in zip(
        flat, _brackets(samples, beta, circular, points_per_bandwidth), strict=True
    ):
        a, b = bracket[:, 0].copy(), bracket[:, 1].copy()
        for _ in range(iterations):
            mid = 0.5 * (a + b)
            positive = np.asarray(derivative(jnp.asarray(mid), jnp.asarray(sample), beta)) > 0
            a, b = np.where(positive, mid, a), np.where(positive, b, mid)
        modes = 0.5 * (a + b)
        found.append(np.sort(np.mod(modes, 2 * math.pi)) if circular else modes)
    return found


def kde_band_fraction(
    samples: ArrayLike,
    beta: float,
    *,
    points_per_bandwidth: int = 16,
) -> Float[np.ndarray, "*batch"]:
    """The fraction of the modes t of the Gaussian kernel density estimator of
    :func:`attnflow.measures.kde_mode_count` (on the line) that lie in the band

        2 log n − 3 log β ≤ t² ≤ 2 log n − log β,

    the region where the expected number of samples per bandwidth, n φ(t) β^{-1/2}, lies
    between about 1 and β. It is read off the proof of Geshkovski–Rigollet–Sun's main result
    (arXiv:2412.09080, §1.1: E[#modes] = Θ(√(β log β)) for N(0, 1) samples, β, n → ∞ with
    n^c ≲ β ≲ n^{2−c}), whose Kac–Rice estimates put the modes, asymptotically, in such "belts";
    it is not a statement of the paper with an explicit fraction. Outside it: isolated samples
    in the tails (t² > 2 log n − log β) and the smooth bulk (t² < 2 log n − 3 log β).

    **What holds at finite n** (measured, 8 sample sets per n, n = 300 … 10⁴, default
    ``points_per_bandwidth``): at β = n the band holds 0.84–0.87 of the modes on average
    (0.77–0.93 per sample set); at β = n^{1.5}, 0.72–0.77; at β = √n, the lower end of the
    range, at most half (mean 0.06 at n = 300 rising to 0.40 at n = 10⁴). Not "almost all":
    the convergence in n is slow, and the fraction is a diagnostic of where the modes are, not
    a bound.

    Args:
        samples: (..., n) samples; batch dimensions are vectorised.
        beta: β > 0 (bandwidth β^{-1/2}).
        points_per_bandwidth: as in :func:`attnflow.measures.kde_mode_count`.

    Returns:
        Float array of shape ``samples.shape[:-1]`` (nan for a set without modes).

    Example:
        >>> import numpy as np
        >>> from attnflow.measures import kde_band_fraction
        >>> x = np.random.default_rng(0).standard_normal(1000)
        >>> 0.5 < float(kde_band_fraction(x, 1000.0)) <= 1.0
        True
    """
    samples, beta = _check(samples, beta, points_per_bandwidth)
    n = samples.shape[-1]
    lo = 2 * math.log(n) - 3 * math.log(beta)
    hi = 2 * math.log(n) - math.log(beta)
    fractions = []
    for modes in kde_modes(samples, beta, points_per_bandwidth=points_per_bandwidth):
        inside = (modes**2 >= lo) & (modes**2 <= hi)
        fractions.append(inside.mean() if modes.size else math.nan)
    return np.asarray(fractions, dtype=float).reshape(samples.shape[:-1])
