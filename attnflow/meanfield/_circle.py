"""Densities on the circle S¹ as Fourier series, with the attention velocity as convolutions.

A density w.r.t. the uniform probability measure σ = dθ/2π is stored as the real vector

    c = (a_0, a_1, …, a_K, b_1, …, b_K),   ρ(θ) = a_0 + Σ_{k=1}^{K} a_k cos kθ + b_k sin kθ,

so the mass is ∫ρ dσ = a_0, the uniform density is c = (1, 0, …, 0) and the first moment is
∫x ρ dσ = (a_1, b_1)/2 (the Kuramoto order parameter r = |(a_1, b_1)|/2). Products are formed
on m ≥ 3K + 1 equispaced nodes θ_q = 2πq/m, which makes the quadratic products of the
continuity equation alias-free on the modes |k| ≤ K (the 3/2 rule).

With x = (cos θ, sin θ) and the unit tangent e_θ = (−sin θ, cos θ), ⟨y, e_θ⟩ = sin(φ − θ), so
the attention velocity of arXiv:2312.10794 (2.3)/(2.4) at V = λI is X = λ X_θ e_θ with

    X_θ(θ) = ∫ g(θ − φ) ρ(φ) dσ(φ),   g(u) = −sin u e^{β cos u}                    (USA),
    X_θ(θ) = (g∗ρ)(θ) / (h∗ρ)(θ),      h(u) = e^{β cos u}                             (SA),

two convolutions, i.e. Fourier multipliers: ĥ_k = I_k(β) (Funk–Hecke; the modified Bessel
function) and ĝ_k = i k I_k(β)/β. The multipliers come from the trapezoid rule on M equispaced
points of the scaled kernels e^{β cos u − |β|} (exponentially scaled: no overflow for any β),
which is the Funk–Hecke integral computed by quadrature: it returns I_k(β) + I_{k±M}(β) + …,
exact to rounding once I_{M−K}(β) ≪ ε I_0(β) (checked). No division by β: β = 0 (Kuramoto)
and β < 0 need no special case.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import check_sa_normalization, check_size, check_unit_rows, expected, is_traced
from ._grid import AbstractDensityGrid, check_grid_array, check_grid_beta, check_node_count


def _default_kernel_points(modes: int) -> int:
    # I_k(β)/I_0(β) ≈ e^{−k²/(2β)}: the check needs I_{(M−K)/2} ≲ 1e3 ε I_0, i.e. M ≳ 17√|β| + K.
    return max(512, 2 ** math.ceil(math.log2(4 * (modes + 1))))


class CircleGrid(AbstractDensityGrid):
    """Fourier modes |k| ≤ K on the circle S¹ ⊂ R² and m equispaced quadrature nodes.

    Coefficients are the real vector ``(a_0, a_1, …, a_K, b_1, …, b_K)`` of length 2K + 1 of
    ρ(θ) = a_0 + Σ_k a_k cos kθ + b_k sin kθ (a density w.r.t. the uniform probability measure
    σ: ρ ≡ 1 is ``(1, 0, …, 0)``; the mass is a_0). Velocities are the convolutions of the
    module docstring, with Fourier multipliers I_k(β) computed once per call by an M-point
    trapezoid rule on the exponentially scaled kernel.

    Args:
        modes: the largest frequency K (≥ 4).
        points: the number m of quadrature nodes, ≥ 3K + 1 (default 3K + 1, the smallest that
            makes quadratic products alias-free on the modes; more points give a finer
            evaluation grid with the same coefficient layout).
        kernel_points: M, the trapezoid points for the kernel's Fourier coefficients (default
            max(512, 4(K + 1)) rounded up to a power of two: enough for |β| ≲ 700 at K ≤ 64).

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> grid = mf.CircleGrid(8)
        >>> c = jnp.zeros(17).at[0].set(1.0).at[1].set(0.5)   # ρ = 1 + 0.5 cos θ
        >>> rho = grid.to_values(c)
        >>> grid.points, round(float(rho[0]), 12), round(float(grid.quadrature_weights() @ rho), 12)
        (25, 1.5, 1.0)
    """

    modes: int = eqx.field(static=True)
    points: int = eqx.field(static=True)
    kernel_points: int = eqx.field(static=True)
    dimension: int = eqx.field(static=True, default=2)

    def __init__(self, modes: int, *, points: int | None = None, kernel_points: int | None = None):
        # Values at 3K + 1 nodes and a kernel table of about 4K: refused before any work.
        self.modes = check_size(modes, "modes", low=4, per_unit=4, what="grid values (4 × modes)")
        low = 3 * self.modes + 1
        why = f"at least 3K + 1 = {low} nodes for K = {self.modes} modes (alias-free products)"
        self.points = check_node_count(points, "points", low, why)
        if kernel_points is None:
            kernel_points = _default_kernel_points(self.modes)
        self.kernel_points = check_size(
            kernel_points, "kernel_points", low=2 * self.modes + 2, what="kernel samples"
        )
        self.dimension = 2

    # --- layout --------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """2K + 1, the number of real coefficients."""
        return 2 * self.modes + 1

    def angles(self, dtype=None) -> Float[Array, " m"]:
        """The node angles θ_q = 2πq/m (default floating dtype unless ``dtype``)."""
        dtype = jnp.result_type(float) if dtype is None else dtype
        return jnp.arange(self.points, dtype=dtype) * (2 * math.pi / self.points)

    def nodes(self) -> Float[Array, "m 2"]:
        theta = self.angles()
        return jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)

    def quadrature_weights(self) -> Float[Array, " m"]:
        return jnp.full((self.points,), 1.0 / self.points, jnp.result_type(float))

    def degrees(self) -> Array:
        k = jnp.arange(1, self.modes + 1)
        return jnp.concatenate([jnp.zeros(1, k.dtype), k, k])

    def max_degree(self) -> int:
        return self.modes

    def laplacian(self) -> Array:
        k = self.degrees()
        return -(k * k).astype(jnp.result_type(float))

    def _to_complex(self, c):
        """c ↦ the complex coefficients ĉ_k, k = 0..K, of ρ = Σ_{|k|≤K} ĉ_k e^{ikθ}."""
        c = self._check_coefficients(c)
        K = self.modes
        a, b = c[: K + 1], c[K + 1 :]
        tail = jax.lax.complex(a[1:], -b) / 2
        return jnp.concatenate([a[:1].astype(tail.dtype), tail])

    def _from_complex(self, z):
        K = self.modes
        return jnp.concatenate([z[:1].real, 2 * z[1 : K + 1].real, -2 * z[1 : K + 1].imag])

    def _check_coefficients(self, c, name: str = "coefficients"):
        what = f"coefficients ((2K + 1,) for K = {self.modes} modes)"
        return check_grid_array(c, name, (self.size,), what)

    def to_values(self, coefficients):
        z = self._to_complex(coefficients)
        spectrum = jnp.zeros(self.points // 2 + 1, z.dtype).at[: self.modes + 1].set(z)
        return jnp.fft.irfft(spectrum, n=self.points) * self.points

    def from_values(self, values):
        values = check_grid_array(values, "values", (self.points,), "values at the nodes")
        z = jnp.fft.rfft(values) / self.points
        return self._from_complex(z[: self.modes + 1])

    def evaluate(self, coefficients, points):
        c = self._check_coefficients(coefficients)
        points = check_unit_rows(points, "points")
        if jnp.ndim(points) != 2 or jnp.shape(points)[1] != 2:
            expected("points", "unit vectors of shape (n, 2)", points)
        theta = jnp.arctan2(points[:, 1], points[:, 0])
        K = self.modes
        k = jnp.arange(1, K + 1, dtype=theta.dtype)
        phase = theta[:, None] * k[None, :]
        return c[0] + jnp.cos(phase) @ c[1 : K + 1] + jnp.sin(phase) @ c[K + 1 :]

    # --- the attention kernel -----------------------------------------------------------------

    def _kernel_spectrum(self, beta):
        M = self.kernel_points
        dtype = jnp.result_type(beta) if hasattr(beta, "dtype") else jnp.result_type(float)
        dtype = dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.result_type(float)
        u = jnp.arange(M, dtype=dtype) * (2 * math.pi / M)
        beta = jnp.asarray(beta, dtype)
        scaled = jnp.exp(beta * jnp.cos(u) - jnp.abs(beta))
        # rfft is Σ_j f(u_j) e^{−iku_j}: for h it is M e^{−|β|} I_k(β) (+ aliases); for the odd
        # g = −sin u e^{β cos u} = h'/β it is i k × (that)/β, so its imaginary part is taken.
        return jnp.fft.rfft(scaled).real / M, jnp.fft.rfft(-jnp.sin(u) * scaled).imag / M

    def kernel_multipliers(self, beta):
        """e^{−|β|} I_k(β) and e^{−|β|} k I_k(β)/β for k = 0..K (the multipliers of h and of
        g/i), from the M-point trapezoid rule (see the module docstring), shape (K + 1,) each.

        Example:
            >>> import attnflow.meanfield as mf, scipy.special as sp
            >>> h, g = mf.CircleGrid(8).kernel_multipliers(3.0)
            >>> exact = sp.ive(2, 3.0)   # e^{−3} I_2(3)
            >>> bool(abs(h[2] - exact) < 1e-15), bool(abs(g[2] - 2 * exact / 3) < 1e-15)
            (True, True)
        """
        h, g = self._kernel_spectrum(check_grid_beta(beta))
        return h[: self.modes + 1], g[: self.modes + 1]

    def check_kernel(self, beta):
        M, K = self.kernel_points, self.modes
        h, _ = self._kernel_spectrum(check_grid_beta(beta))
        # The aliasing error of the multipliers is I_{M−K}(β) + …, below the coefficients past
        # (M − K)/2 (they decrease in k).
        alias = jnp.abs(h[(M - K) // 2 :]).max() / h[0]
        limit = 1e3 * jnp.finfo(h.dtype).eps
        message = (
            f"beta: the kernel e^(β cos u) is not resolved by kernel_points = {M}: its Fourier "
            f"coefficients I_k(β) at k ≥ {(M - K) // 2} exceed {float(limit):.1e} × I_0(β); "
            "build the grid with more kernel_points (about 17·sqrt(|β|) + K suffice)"
        )
        if is_traced(alias):
            return eqx.error_if(jnp.asarray(beta, h.dtype), alias > limit, message)
        if float(alias) > float(limit):
            raise ValueError(message)
        return beta

    def _convolutions(self, coefficients, beta):
        z = self._to_complex(coefficients)
        h, g = self.kernel_multipliers(jnp.asarray(beta, coefficients.dtype))
        h, g = h.astype(z.dtype), g.astype(z.dtype)
        n = self.points // 2 + 1
        pad = jnp.zeros(n, z.dtype)
        potential = jnp.fft.irfft(pad.at[: self.modes + 1].set(h * z), n=self.points)
        # X_θ has Fourier coefficients ĝ_k ĉ_k with ĝ_k = i k I_k/β (g odd, g = (1/β) h').
        i_z = jax.lax.complex(-z.imag, z.real)
        drift = jnp.fft.irfft(pad.at[: self.modes + 1].set(g * i_z), n=self.points)
        return potential * self.points, drift * self.points

    def interaction_potential(self, coefficients, beta):
        potential, _ = self._convolutions(coefficients, beta)
        return potential

    def angular_velocity(self, coefficients, beta, normalization: str = "softmax"):
        """X_θ at the nodes (the coordinate of X along e_θ), shape (m,); USA without e^{|β|}
        is multiplied back here."""
        normalization = check_sa_normalization(normalization)
        potential, drift = self._convolutions(coefficients, beta)
        if normalization == "softmax":
            return drift / potential
        return drift * jnp.exp(jnp.abs(jnp.asarray(beta, drift.dtype)))

    def velocity(self, coefficients, beta, normalization):
        x_theta = self.angular_velocity(coefficients, beta, normalization)
        theta = self.angles(x_theta.dtype)
        e_theta = jnp.stack([-jnp.sin(theta), jnp.cos(theta)], axis=1)
        return x_theta[:, None] * e_theta

    def divergence(self, flux):
        theta = self.angles(flux.dtype)
        f_theta = -jnp.sin(theta) * flux[:, 0] + jnp.cos(theta) * flux[:, 1]
        c = self.from_values(f_theta)
        K = self.modes
        k = jnp.arange(1, K + 1, dtype=c.dtype)
        a, b = c[1 : K + 1], c[K + 1 :]
        # ∂_θ(a cos kθ + b sin kθ) = k b cos kθ − k a sin kθ.
        return jnp.concatenate([jnp.zeros(1, c.dtype), k * b, -k * a])
