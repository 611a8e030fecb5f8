"""Densities on the sphere S² as spherical-harmonic series, with the attention velocity as a
zonal (Funk–Hecke) multiplier.

A density w.r.t. the uniform probability measure σ of S² is stored as the real vector c of
length (N + 1)², entry ℓ(ℓ + 1) + m for 0 ≤ ℓ ≤ N, −ℓ ≤ m ≤ ℓ, of

    ρ = Σ c_ℓm Y_ℓm,   Y_ℓ0 = P̄_ℓ(cos θ),  Y_ℓm = √2 P̄_ℓm(cos θ) cos mφ,  Y_ℓ,−m = √2 P̄_ℓm sin mφ,

real harmonics orthonormal for σ (P̄_ℓm normalised by ∫P̄² dx/2 = 1, no Condon–Shortley
phase): the mass is c_0, ρ ≡ 1 is c = (1, 0, …), and ∫x ρ dσ = (c_{1,1}, c_{1,−1}, c_{1,0})/√3.

Kernel. For W(x, y) = e^{β⟨x,y⟩} the Funk–Hecke theorem gives W∗Y_ℓm = λ_ℓ(β) Y_ℓm with

    λ_ℓ(β) = ½ ∫_{−1}^{1} e^{βt} P_ℓ(t) dt = i_ℓ(β) = √(π/2β) I_{ℓ+1/2}(β),

the modified spherical Bessel function. Since ∇_x e^{β⟨x,y⟩} = β P_x y e^{β⟨x,y⟩}, the attention
velocity of arXiv:2312.10794 (3.3)/(3.8) at V = I is a gradient,

    X[ρ](x) = P_x ∫ e^{β⟨x,y⟩} y ρ(y) dσ(y) = ∇Φ,   Φ = Σ μ_ℓ c_ℓm Y_ℓm,  μ_ℓ = i_ℓ(β)/β    (USA),
    X[ρ](x) = ∇Φ(x) / (W∗ρ)(x)                                                             (SA).

μ_ℓ and λ_ℓ are computed with the factor e^{−|β|} taken out (finite for every β; USA multiplies
it back once, SA's ratio cancels it) from ν_ℓ = i_ℓ(β)/β^ℓ, an entire even function of β, by the
backward ratio recurrence s_ℓ = ν_ℓ/ν_{ℓ−1} = 1/(2ℓ + 1 + β² s_{ℓ+1}) started far above N
(Miller's method; no division by β, so β = 0 and β < 0 need no special case), then
λ_ℓ = λ_{ℓ−1} β s_ℓ and μ_ℓ = λ_{ℓ−1} s_ℓ from λ_0 = sinh β/β.

Transforms. Gauss–Legendre latitudes × equispaced longitudes with n_θ = ⌊3N/2⌋ + 1 and
n_φ = 2n_θ: the rule integrates exactly every polynomial of degree ≤ 3N, so the weak divergence
∫ Y_ℓm div(ρX) dσ = −∫ ρ X·∇Y_ℓm dσ of band-N densities (the integrand has degree ≤ 3N for USA)
is alias-free (the 3/2 rule). Synthesis is one matrix product per order m plus a real FFT in φ
(``_sphere_legendre.py``); the analysis and the divergence are its transposes applied to
quadrature-weighted values, exact for band-limited integrands.

Why not s2fft (the issue asks for a maintained library unless a comparison says otherwise):
benchmarks/meanfield_s2_transforms.py compares s2fft 1.5.0 (GL sampling, ``reality=True``,
precomputed tables, method "jax") with this transform on the same grid, forward ∘ inverse
jitted, 2-core CPU under heavy load (load average 12: indicative; relative errors, median
of 5 forward+inverse, first-call compile):

            s2fft: round trip  known    ms   compile | jnp: round trip  known    ms     compile
    16 f64         2.7e−14  2.6e−14  0.36   3.3 s    |      2.8e−15  4.0e−15  0.059  1.0 s
    32 f64         2.8e−14  1.6e−14  1.3    2.7 s    |      6.4e−15  5.9e−15  0.082  0.8 s
    64 f64         1.7e−13  1.0e−13  14     7.7 s    |      2.0e−13  2.0e−13  0.62   2.9 s
    16 f32         forward_jax did not finish (>150 s) |    1.9e−7   1.6e−7   0.031  1.2 s
    64 f32                                             |    2.2e−7   1.4e−7   0.21   1.3 s

Accuracy in float64 is the same; here the jnp transform runs 6–20× faster and compiles 3×
faster, and s2fft 1.5.0's float32 forward transform did not finish (jax 0.10.2, CPU; float64
is fine). The grid also needs gradient synthesis on an oversampled grid (n_θ ≈ 3N/2 for a
band N) and its exact transpose for the divergence, in real coefficients: written here in ~60
lines; with s2fft it would be zero-padding to the band n_θ, complex ↔ real layouts and spin-±1
transforms, and a new dependency that prints a warning at import without x64. Hence jnp.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._check import (
    MAX_ARRAY_ELEMENTS,
    check_budget,
    check_finite_scalar,
    check_int,
    check_sa_normalization,
)
from . import _sphere_legendre as legendre
from ._grid import (
    AbstractDensityGrid,
    check_grid_array,
    check_grid_beta,
    check_node_count,
    check_points,
)

# Miller's backward recurrence starts this far above N: the truncation error of s_ℓ at ℓ ≤ N is
# about exp(−(S² − N²)/|β|) for S ≤ |β| and decays faster past S ≈ |β|, so 300 extra degrees
# give float64 accuracy for |β| ≲ 2000 (USA overflows float64 past β ≈ 700 anyway).
_MILLER_EXTRA = 300


def funk_hecke_multipliers(beta, degree: int):
    """e^{−|β|} λ_ℓ(β) and e^{−|β|} μ_ℓ(β), ℓ = 0, …, N, of the module docstring: the
    eigenvalues of f ↦ ∫ e^{β⟨·,y⟩} f(y) dσ(y) and of its potential Φ = (W∗f)/β on degree ℓ.

    λ_ℓ = ½∫_{−1}^{1} e^{βt}P_ℓ(t) dt = i_ℓ(β), μ_ℓ = i_ℓ(β)/β (μ_0 = 0: the gradient of a
    constant vanishes). Differentiable in β, finite for every real β.

    Returns:
        Two arrays of shape (N + 1,), in the default float dtype (float64 under x64).

    Example:
        >>> import math, scipy.special as sp
        >>> from attnflow.meanfield._sphere import funk_hecke_multipliers
        >>> lam, mu = funk_hecke_multipliers(3.0, 4)
        >>> abs(float(lam[2]) - float(sp.spherical_in(2, 3.0)) * math.exp(-3.0)) < 1e-15
        True
    """
    beta = jnp.asarray(beta, jnp.result_type(float))
    beta2 = beta * beta
    top = degree + _MILLER_EXTRA

    def step(following, ell):
        ratio = 1.0 / (2 * ell + 1 + beta2 * following)
        return ratio, ratio

    ells = jnp.arange(top, 0, -1).astype(beta.dtype)
    _, ratios = jax.lax.scan(step, jnp.zeros_like(beta), ells)
    ratios = ratios[::-1][:degree]  # s_1, …, s_N
    # e^{−|β|} sinh β / β = (1 − e^{−2|β|}) / (2|β|), → 1 at β = 0 (the double where keeps the
    # gradient finite there).
    two_b = 2 * jnp.abs(beta)
    safe = jnp.where(two_b > 0, two_b, 1.0)
    lam0 = jnp.where(two_b > 0, -jnp.expm1(-safe) / safe, 1.0 - jnp.abs(beta))
    lam = lam0 * jnp.concatenate([jnp.ones((1,), beta.dtype), jnp.cumprod(beta * ratios)])
    mu = jnp.concatenate([jnp.zeros((1,), beta.dtype), lam[:-1] * ratios])
    return lam, mu


@functools.partial(jax.jit, static_argnums=1)
def _evaluate_points(c, size, points):
    x = jnp.clip(points[:, 2], -1.0, 1.0)
    phi = jnp.arctan2(points[:, 1], points[:, 0])
    return legendre.synthesize_at(c, size, x, phi)


@functools.lru_cache(maxsize=16)
def _tables(degree: int, latitudes: int):
    """NumPy float64 tables of the grid: (P̄ with √2, dP̄/dθ with √2, m P̄/sin θ with √2),
    each (N + 1 [m], N + 1 [ℓ], n_θ), the gathers, cos θ, the latitude weights, φ."""
    x, w, phi = legendre.gauss_legendre_grid(latitudes)
    p, dp = legendre.legendre_tables(degree + 1, x)
    scale = np.where(np.arange(degree + 1) > 0, np.sqrt(2.0), 1.0)[:, None, None]
    p, dp = p * scale, dp * scale
    p_over_sin = p / np.sqrt(1.0 - x * x)
    cos_index, sin_index = legendre.order_tables(degree + 1)
    ell, _ = legendre.flat_index(degree + 1)
    return p, dp, p_over_sin, cos_index, sin_index, x, w, phi, ell


class SphereGrid(AbstractDensityGrid):
    """Real spherical harmonics of degree ℓ ≤ N on S² ⊂ R³ and a Gauss–Legendre × FFT grid.

    Coefficients are the real vector of length (N + 1)², entry ℓ(ℓ + 1) + m, of
    ρ = Σ c_ℓm Y_ℓm in the σ-orthonormal real harmonics of the module docstring (ρ ≡ 1 is
    ``(1, 0, …, 0)``; the mass is c_0). The USA velocity is ∇Φ with Φ = Σ (i_ℓ(β)/β) c_ℓm Y_ℓm
    (Funk–Hecke), SA divides it by W∗ρ = Σ i_ℓ(β) c_ℓm Y_ℓm; both at the nodes as vectors of R³.

    Args:
        degree: the largest degree N (≥ 2).
        latitudes: n_θ, the Gauss–Legendre latitudes, ≥ ⌊3N/2⌋ + 1 (the default: products of
            three band-N functions are integrated exactly); the grid has n_θ × 2n_θ nodes.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> grid = mf.SphereGrid(4)
        >>> c = jnp.zeros(25).at[0].set(1.0).at[2].set(0.5)   # ρ = 1 + 0.5·√3 z
        >>> rho = grid.to_values(c)
        >>> z = grid.nodes()[:, 2]
        >>> float(jnp.abs(rho - 1 - 0.5 * 3**0.5 * z).max()) < 1e-13, grid.latitudes
        (True, 7)
        >>> round(float(grid.quadrature_weights() @ rho), 12)
        1.0
    """

    degree: int = eqx.field(static=True)
    latitudes: int = eqx.field(static=True)
    dimension: int = eqx.field(static=True, default=3)

    def __init__(self, degree: int, *, latitudes: int | None = None):
        self.degree = check_int(degree, "degree", low=2)
        low = (3 * self.degree) // 2 + 1
        why = (
            f"at least ⌊3N/2⌋ + 1 = {low} Gauss–Legendre latitudes for degree N = "
            f"{self.degree} (alias-free products)"
        )
        # The Legendre table: (N + 1)² functions at each latitude, refused before any work
        # (first at the fewest latitudes, so that an absurd degree is named as the cause).
        check_budget(
            "degree",
            (self.degree + 1) ** 2 * low,
            MAX_ARRAY_ELEMENTS,
            what="Legendre table entries ((N + 1)² × latitudes)",
            factors={"degree": self.degree, "latitudes": low},
        )
        self.latitudes = check_node_count(latitudes, "latitudes", low, why)
        check_budget(
            "latitudes",
            (self.degree + 1) ** 2 * self.latitudes,
            MAX_ARRAY_ELEMENTS,
            what="Legendre table entries ((N + 1)² × latitudes)",
            factors={"degree": self.degree, "latitudes": self.latitudes},
        )
        self.dimension = 3

    # --- layout --------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """(N + 1)², the number of real coefficients."""
        return (self.degree + 1) ** 2

    @property
    def longitudes(self) -> int:
        """n_φ = 2 n_θ equispaced longitudes."""
        return 2 * self.latitudes

    def _tables(self, dtype):
        p, dp, p_over_sin, cos_index, sin_index, *_ = _tables(self.degree, self.latitudes)
        return (jnp.asarray(p, dtype), jnp.asarray(dp, dtype), jnp.asarray(p_over_sin, dtype))

    def _grid(self):
        *_, x, w, _, _ = _tables(self.degree, self.latitudes)
        phi = 2.0 * np.pi * np.arange(self.longitudes) / self.longitudes
        return x, w, phi

    def _dtype(self, array=None):
        if array is not None and jnp.issubdtype(jnp.result_type(array), jnp.floating):
            return jnp.result_type(array)
        return jnp.result_type(float)

    def _check_coefficients(self, c, name: str = "coefficients"):
        what = f"coefficients ((N + 1)² for degree N = {self.degree})"
        return check_grid_array(c, name, (self.size,), what)

    def nodes(self) -> Float[Array, "m 3"]:
        x, _, phi = self._grid()
        s = np.sqrt(1.0 - x * x)
        points = np.stack(
            [
                np.outer(s, np.cos(phi)),
                np.outer(s, np.sin(phi)),
                np.outer(x, np.ones_like(phi)),
            ],
            axis=-1,
        )
        return jnp.asarray(points.reshape(-1, 3), self._dtype())

    def quadrature_weights(self) -> Float[Array, " m"]:
        _, w, phi = self._grid()
        return jnp.asarray(
            np.outer(w, np.full(phi.size, 1.0 / phi.size)).reshape(-1), self._dtype()
        )

    def degrees(self) -> Array:
        return jnp.asarray(_tables(self.degree, self.latitudes)[-1])

    def max_degree(self) -> int:
        return self.degree

    def laplacian(self) -> Array:
        ell = _tables(self.degree, self.latitudes)[-1].astype(np.float64)
        return jnp.asarray(-ell * (ell + 1), self._dtype())

    # --- transforms -----------------------------------------------------------------------------

    def _synthesize(self, c, which: str):
        _, _, _, cos_index, sin_index, *_ = _tables(self.degree, self.latitudes)
        p, dp, p_over_sin = self._tables(c.dtype)
        table = {"value": p, "theta": dp, "phi": p_over_sin}[which]
        values = legendre.synthesize(
            c, table, cos_index, sin_index, self.longitudes, phi_derivative=which == "phi"
        )
        return values.reshape(-1)

    def _gradient(self, c):
        """∇_S f at the nodes, (m, 3), for f = Σ c_ℓm Y_ℓm: ∂_θ f e_θ + (sin θ)^{−1} ∂_φ f e_φ."""
        x, _, phi = self._grid()
        s = np.sqrt(1.0 - x * x)
        e_theta = np.stack(
            [np.outer(x, np.cos(phi)), np.outer(x, np.sin(phi)), np.outer(-s, np.ones_like(phi))],
            axis=-1,
        ).reshape(-1, 3)
        zero = np.zeros_like(phi)
        e_phi = np.broadcast_to(
            np.stack([-np.sin(phi), np.cos(phi), zero], axis=-1), (x.size, phi.size, 3)
        ).reshape(-1, 3)
        d_theta = self._synthesize(c, "theta")
        d_phi = self._synthesize(c, "phi")
        return d_theta[:, None] * jnp.asarray(e_theta, c.dtype) + d_phi[:, None] * jnp.asarray(
            e_phi, c.dtype
        )

    def to_values(self, coefficients):
        coefficients = self._check_coefficients(coefficients)
        c = jnp.asarray(coefficients, self._dtype(coefficients))
        return self._synthesize(c, "value")

    def from_values(self, values):
        m = self.latitudes * self.longitudes
        values = check_grid_array(values, "values", (m,), "values at the nodes")
        values = jnp.asarray(values, self._dtype(values))
        weighted = self.quadrature_weights().astype(values.dtype) * values
        example = jax.ShapeDtypeStruct((self.size,), values.dtype)
        (coefficients,) = jax.linear_transpose(lambda c: self._synthesize(c, "value"), example)(
            weighted
        )
        return coefficients

    def gradient(self, coefficients) -> Float[Array, "m 3"]:
        """The surface gradient ∇_S f of f = Σ c_ℓm Y_ℓm at the nodes, tangent vectors (m, 3).

        Example:
            >>> import jax.numpy as jnp, attnflow.meanfield as mf
            >>> grid = mf.SphereGrid(3)
            >>> g = grid.gradient(jnp.zeros(16).at[2].set(1.0))   # f = √3 z: ∇f = √3 (e_z − z x)
            >>> x = grid.nodes()
            >>> e_z = jnp.array([[0.0, 0.0, 1.0]])
            >>> float(jnp.abs(g - 3**0.5 * (e_z - x[:, 2:] * x)).max()) < 1e-13
            True
        """
        coefficients = self._check_coefficients(coefficients)
        return self._gradient(jnp.asarray(coefficients, self._dtype(coefficients)))

    def divergence(self, flux):
        # Weak form: ∫ Y div F dσ = −∫ ∇Y·F dσ, i.e. minus the transpose of the gradient
        # synthesis applied to the quadrature-weighted flux (exact for band-limited integrands).
        flux = jnp.asarray(flux, self._dtype(flux))
        weighted = self.quadrature_weights().astype(flux.dtype)[:, None] * flux
        example = jax.ShapeDtypeStruct((self.size,), flux.dtype)
        (coefficients,) = jax.linear_transpose(self._gradient, example)(weighted)
        return -coefficients

    # --- the attention kernel -----------------------------------------------------------------

    def evaluate(self, coefficients, points):
        """ρ = Σ c_ℓm Y_ℓm at arbitrary unit vectors ``points`` (n, 3), shape (n,): the real
        harmonics synthesised at the points by the three-term Legendre recurrence in ℓ (all
        orders at once) and cos mφ, sin mφ; O(N² n) work, O(N n) memory (20,000 points at
        N = 32 in well under a second, where quadrature against the reproducing kernel,
        :func:`evaluate_by_quadrature`, takes about a minute).

        Example:
            >>> import jax.numpy as jnp, attnflow.meanfield as mf
            >>> grid = mf.SphereGrid(4)
            >>> c = jnp.zeros(25).at[0].set(1.0).at[2].set(0.5)   # ρ = 1 + 0.5·√3 z
            >>> x = jnp.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
            >>> [round(float(v), 6) for v in grid.evaluate(c, x)]
            [1.866025, 1.0]
        """
        coefficients = self._check_coefficients(coefficients)
        c = jnp.asarray(coefficients, self._dtype(coefficients))
        points = check_points(self, points)
        return _evaluate_points(c, self.degree + 1, points.astype(c.dtype))

    def check_kernel(self, beta):
        # The Funk–Hecke multipliers are closed forms (no quadrature of the kernel): nothing to
        # resolve.
        return beta

    def kernel_multipliers(self, beta):
        """e^{−|β|} λ_ℓ(β) = e^{−|β|} i_ℓ(β) and e^{−|β|} μ_ℓ(β) = e^{−|β|} i_ℓ(β)/β per
        coefficient (gathered by degree), shape ((N + 1)²,) each; see
        :func:`funk_hecke_multipliers`.

        Example:
            >>> import attnflow.meanfield as mf, numpy as np, scipy.special as sp
            >>> lam, mu = mf.SphereGrid(3).kernel_multipliers(2.0)
            >>> bool(np.isclose(float(mu[5]), sp.spherical_in(2, 2.0) / 2.0 * np.exp(-2.0)))
            True
        """
        ell = _tables(self.degree, self.latitudes)[-1]
        lam, mu = funk_hecke_multipliers(check_grid_beta(beta), self.degree)
        return lam[ell], mu[ell]

    def interaction_potential(self, coefficients, beta):
        coefficients = self._check_coefficients(coefficients)
        lam, _ = self.kernel_multipliers(beta)
        c = jnp.asarray(coefficients, self._dtype(coefficients))
        return self._synthesize(c * lam.astype(c.dtype), "value")

    def velocity(self, coefficients, beta, normalization):
        normalization = check_sa_normalization(normalization)
        beta = check_finite_scalar(beta, "beta")
        coefficients = self._check_coefficients(coefficients)
        c = jnp.asarray(coefficients, self._dtype(coefficients))
        lam, mu = self.kernel_multipliers(beta)
        drift = self._gradient(c * mu.astype(c.dtype))
        if normalization == "softmax":
            potential = self._synthesize(c * lam.astype(c.dtype), "value")
            return drift / potential[:, None]
        return drift * jnp.exp(jnp.abs(jnp.asarray(beta, c.dtype)))
