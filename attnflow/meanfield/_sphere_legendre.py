"""Real spherical-harmonic transforms on a Gauss–Legendre × uniform-longitude grid, in jnp.

The basis is orthonormal for the uniform probability measure σ of S² (so ρ ≡ 1 has the single
coefficient c_00 = 1):

    Y_ℓ0 = P̄_ℓ0(cos θ),  Y_ℓm = √2 P̄_ℓm(cos θ) cos(mφ),  Y_ℓ,−m = √2 P̄_ℓm(cos θ) sin(mφ)  (m > 0),

with P̄_ℓm the associated Legendre functions normalised by ∫_{−1}^{1} P̄_ℓm² dx/2 = 1 (no
Condon–Shortley phase). Coefficients are a flat real vector of length L², entry ℓ(ℓ+1)+m.

The grid has n_θ Gauss–Legendre latitudes and n_φ = 2n_θ − 1 equispaced longitudes; with
n_θ ≥ L it integrates exactly every polynomial of degree ≤ 2n_θ − 1, so the forward transform
(quadrature against Y_ℓm) inverts the synthesis for degree < L, and with n_θ ≥ ⌈3L/2⌉ it also
integrates products of three band-limited functions exactly (the dealiasing rule of ρ·X·∇Y).

The Legendre tables are built once in NumPy float64 by the standard stable three-term
recurrence (Holmes–Featherstone form, no factorials) and the transform per order m is a
matrix product; the longitude direction is a real FFT. Cost O(L² n_θ) per transform, which for
L ≤ 128 is a handful of small matrix products.
"""

import numpy as np


def legendre_tables(max_degree: int, x: np.ndarray):
    """P̄_ℓm(x) and dP̄_ℓm/dθ at x = cos θ for 0 ≤ m ≤ ℓ < max_degree, NumPy float64.

    Returns two arrays of shape (max_degree [m], max_degree [ℓ], len(x)), zero for ℓ < m.
    The θ-derivative uses (1 − x²) dP_ℓ^m/dx = −ℓ x P_ℓ^m + (ℓ + m) P_{ℓ−1}^m in normalised form,
    so x must avoid ±1 (Gauss–Legendre nodes do).
    """
    x = np.asarray(x, dtype=np.float64)
    s = np.sqrt(1.0 - x * x)
    size = max_degree
    p = np.zeros((size, size, x.size))
    dp = np.zeros_like(p)
    diag = np.ones_like(x)
    for m in range(size):
        if m > 0:
            diag = np.sqrt((2 * m + 1) / (2 * m)) * s * diag
        p[m, m] = diag
        if m + 1 < size:
            p[m, m + 1] = np.sqrt(2 * m + 3) * x * diag
        for ell in range(m + 2, size):
            a = np.sqrt((4 * ell * ell - 1) / (ell * ell - m * m))
            b = np.sqrt(((ell - 1) ** 2 - m * m) / (4 * (ell - 1) ** 2 - 1))
            p[m, ell] = a * (x * p[m, ell - 1] - b * p[m, ell - 2])
        for ell in range(m, size):
            below = p[m, ell - 1] if ell > m else 0.0
            c = np.sqrt((2 * ell + 1) * (ell * ell - m * m) / (2 * ell - 1)) if ell > m else 0.0
            dp[m, ell] = (ell * x * p[m, ell] - c * below) / s
    return p, dp


def flat_index(max_degree: int):
    """(ℓ, m) of each entry of the flat coefficient vector, entry ℓ(ℓ+1) + m."""
    ell = np.concatenate([np.full(2 * k + 1, k) for k in range(max_degree)])
    m = np.concatenate([np.arange(-k, k + 1) for k in range(max_degree)])
    return ell, m


def gauss_legendre_grid(latitudes: int):
    """cos θ of the Gauss–Legendre latitudes (ascending θ), their weights for dσ (summing to 1),
    and the 2·latitudes − 1 equispaced longitudes φ_k = 2πk/n_φ, all NumPy float64."""
    x, w = np.polynomial.legendre.leggauss(latitudes)
    x, w = x[::-1], w[::-1] / 2.0
    phi = 2.0 * np.pi * np.arange(2 * latitudes - 1) / (2 * latitudes - 1)
    return x, w, phi


def order_tables(max_degree: int):
    """Static gathers between the flat vector (length L², plus a trailing 0 at index L²) and the
    (m, ℓ) matrices of the cosine (m ≥ 0) and sine (m ≥ 1) parts."""
    size = max_degree
    m = np.arange(size)[:, None]
    ell = np.arange(size)[None, :]
    valid = ell >= m
    cos_index = np.where(valid, ell * (ell + 1) + m, size * size)
    sin_index = np.where(valid & (m > 0), ell * (ell + 1) - m, size * size)
    return cos_index, sin_index


def synthesize(flat, table, cos_index, sin_index, n_phi: int, *, phi_derivative: bool = False):
    """Values on the grid, shape (n_θ, n_φ), of Σ c_ℓm T_ℓm(θ) trig_m(φ) for a table T[m, ℓ, j]
    (P̄ with the √2 of m > 0 included, or its θ-derivative, or P̄/sin θ).

    With ``phi_derivative`` the φ-derivative of the trigonometric factor is taken (so the table
    P̄/sin θ gives (1/sin θ) ∂_φ). The longitude sum is an inverse real FFT of length n_φ.
    The analysis (quadrature against Y_ℓm) is the transpose of this linear map, applied to the
    weighted values, so it is not written separately.
    """
    import jax
    import jax.numpy as jnp

    padded = jnp.concatenate([flat, jnp.zeros((1,), flat.dtype)])
    cos_part = jnp.einsum("mlj,ml->jm", table, padded[cos_index])
    sin_part = jnp.einsum("mlj,ml->jm", table, padded[sin_index])
    if phi_derivative:
        orders = jnp.arange(table.shape[0], dtype=table.dtype)
        cos_part, sin_part = orders[None, :] * sin_part, -orders[None, :] * cos_part
    spectrum = jax.lax.complex(cos_part, -sin_part) * (n_phi / 2)
    spectrum = spectrum.at[:, 0].set(jax.lax.complex(cos_part[:, 0] * n_phi, 0 * cos_part[:, 0]))
    spectrum = jnp.pad(spectrum, ((0, 0), (0, n_phi // 2 + 1 - table.shape[0])))
    return jnp.fft.irfft(spectrum, n=n_phi, axis=1)
