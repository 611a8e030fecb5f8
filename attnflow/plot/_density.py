"""Pictures of a density on the circle S¹ and on the sphere S² (``attnflow.meanfield``'s
coefficients, evaluated by the grid's own ``evaluate``)."""

import numpy as np

from .._check import check_bool, check_finite_scalar, check_int, check_real_values
from ._common import finish, plt


def _evaluated(grid, coefficients, points):
    evaluate = getattr(grid, "evaluate", None)
    if evaluate is None or getattr(grid, "dimension", None) != points.shape[1]:
        raise ValueError(
            f"grid: expected an attnflow.meanfield grid on S^{points.shape[1] - 1} "
            f"(CircleGrid for the circle, SphereGrid for the sphere), got {type(grid).__name__}"
        )
    coefficients = np.asarray(check_real_values(coefficients, "coefficients"), np.float64)
    return np.asarray(evaluate(coefficients, points))


def density_on_sphere(
    grid,
    coefficients,
    *,
    ax=None,
    path=None,
    title=None,
    resolution: int = 96,
    cmap: str = "viridis",
    elev: float = 25.0,
    azim: float = 35.0,
    colorbar: bool = True,
):
    """Draw ρ = Σ c_ℓm Y_ℓm on the sphere S², coloured by its value, from its coefficients on a
    :class:`attnflow.meanfield.SphereGrid` (evaluated on a ``resolution`` × 2·``resolution``
    latitude–longitude mesh by ``grid.evaluate``). A 3-d axes is created if ``ax`` is None.
    Returns the axes.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> from attnflow import plot
        >>> grid = mf.SphereGrid(4)
        >>> ax = plot.density_on_sphere(grid, jnp.zeros(25).at[0].set(1.0).at[2].set(0.5))
        >>> ax.name
        '3d'
    """
    resolution = check_int(resolution, "resolution", low=4, high=2048)
    colorbar = check_bool(colorbar, "colorbar")
    theta = np.linspace(0.0, np.pi, resolution)
    phi = np.linspace(0.0, 2 * np.pi, 2 * resolution)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    xyz = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], axis=-1)
    values = _evaluated(grid, coefficients, xyz.reshape(-1, 3)).reshape(t.shape)
    if ax is None:
        fig = plt.figure(figsize=(4.2, 3.6))
        ax = fig.add_subplot(projection="3d")
    fig = ax.figure
    norm = plt.Normalize(vmin=float(values.min()), vmax=float(values.max()))
    colors = plt.get_cmap(cmap)(norm(values))
    ax.plot_surface(
        xyz[..., 0],
        xyz[..., 1],
        xyz[..., 2],
        facecolors=colors,
        rstride=1,
        cstride=1,
        linewidth=0,
        antialiased=False,
        shade=False,
    )
    ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1), xticks=[], yticks=[], zticks=[], title=title)
    ax.set_box_aspect((1, 1, 1), zoom=1.2)
    ax.view_init(elev=check_finite_scalar(elev, "elev"), azim=check_finite_scalar(azim, "azim"))
    ax.set_axis_off()
    if colorbar:
        mappable = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
        fig.colorbar(mappable, ax=ax, shrink=0.6, pad=0.02, label="ρ (uniform = 1)")
    finish(fig, path)
    return ax


def density_on_circle(grid, coefficients, *, ax=None, path=None, title=None, points: int = 512):
    """Draw ρ(θ) on the circle from its coefficients on a :class:`attnflow.meanfield.CircleGrid`
    (``points`` angles, evaluated by ``grid.evaluate``), against the uniform density 1.
    Returns the axes.

    Example:
        >>> import jax.numpy as jnp, attnflow.meanfield as mf
        >>> from attnflow import plot
        >>> c = jnp.zeros(9).at[0].set(1.0).at[1].set(0.5)   # ρ = 1 + 0.5 cos θ
        >>> ax = plot.density_on_circle(mf.CircleGrid(4), c)
        >>> ax.get_xlabel()
        'θ'
    """
    points = check_int(points, "points", low=8, high=2**20)
    theta = np.linspace(0.0, 2 * np.pi, points)
    values = _evaluated(grid, coefficients, np.stack([np.cos(theta), np.sin(theta)], axis=1))
    fig, ax = plt.subplots(figsize=(5, 3)) if ax is None else (ax.figure, ax)
    ax.plot(theta, values, lw=2)
    ax.axhline(1.0, color="0.6", lw=1, ls="--")
    ax.set(xlabel="θ", ylabel="ρ(θ)", xlim=(0, 2 * np.pi), title=title)
    ax.set_xticks([0, np.pi / 2, np.pi, 3 * np.pi / 2, 2 * np.pi], ["0", "π/2", "π", "3π/2", "2π"])
    ax.grid(alpha=0.3)
    finish(fig, path)
    return ax
