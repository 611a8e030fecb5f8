"""The noisy phase diagram in (β, κ): SA and USA on S¹ and S² (survey arXiv:2512.01868 §7).

Each panel is :func:`attnflow.meanfield.noisy_phase_diagram`: the long-time order parameter
r = |∫x dρ| of the Fokker–Planck equation over β (horizontal) and κ/κ_c(β) (vertical, log), from
the near-uniform start (top row) and the concentrated start (bottom row). Drawn on it: κ_c
(the line κ/κ_c = 1), the saddle-node κ_sn(β)/κ_c(β) where the upper branch is born (dashed), the
tricritical point (star); between the dashed line and κ_c the two starts differ (hysteresis).
Points whose final density has several bumps carry the number; a white dot marks a state still
moving at the horizon (residual of the stationary equation above ``stationary_tol``); grey cells
are not resolved by the grid.
"""

import pathlib
import time

import jax
import numpy as np

from attnflow.figures._output import write_outputs

_COMMON = {
    "horizon": 100.0,
    "num_saves": 21,
    "epsilon": 1e-2,
    "perturbed_modes": 4,
    "concentration": 4.0,
    "rtol": 1e-5,
    "atol": 1e-8,
    "resolution_tol": 1e-5,
    "stationary_tol": 1e-4,
}

PRESETS = {
    "quick": {
        **_COMMON,
        "circle_modes": 32,
        "sphere_degree": 16,
        "sphere_degree_usa": 16,
        "betas_circle": [0.0, 2.0, 3.5, 5.0],
        "betas_sphere": [0.0, 1.5, 3.0, 4.5],
        "betas_sphere_usa": [0.0, 1.0, 2.0, 3.0],
        "num_kappas": 6,
        "kappa_ratio_range": [0.6, 2.0],
        "horizon": 60.0,
        "num_saves": 7,
    },
    "default": {
        **_COMMON,
        "circle_modes": 48,
        "sphere_degree": 24,
        "sphere_degree_usa": 32,
        "betas_circle": np.linspace(0.0, 6.0, 12).tolist(),
        "betas_sphere": np.linspace(0.0, 5.0, 12).tolist(),
        "betas_sphere_usa": np.linspace(0.0, 3.0, 12).tolist(),
        "num_kappas": 24,
        "kappa_ratio_range": [0.5, 2.5],
    },
}
# The default's solver and grids (SA on S² is resolved everywhere at degree 24), on a finer
# (β, κ) grid, with 64 modes on S¹.
PRESETS["full"] = {
    **PRESETS["default"],
    "circle_modes": 64,
    "betas_circle": np.linspace(0.0, 7.0, 24).tolist(),
    "betas_sphere": np.linspace(0.0, 6.0, 24).tolist(),
    "betas_sphere_usa": np.linspace(0.0, 3.0, 24).tolist(),
    "num_kappas": 48,
}

PANELS = (("softmax", 2), ("n", 2), ("softmax", 3), ("n", 3))
"""USA on S² gets its own degree and β range: its concentrated states have a von Mises–Fisher
concentration of about κe^β, so at β = 5 and κ = 2.5κ_c they need a degree near 60 (SA's stay
below 20); with the degree 32 of the default, USA on S² is resolved up to β = 3 except the corner
of large β and κ (grey), which holds the first-order region (tricritical β ≈ 1.82)."""


def diagram_options(params: dict) -> dict:
    """The κ/κ_c grid and the keyword arguments of :func:`noisy_phase_diagram` of a preset."""
    low, high = params["kappa_ratio_range"]
    ratios = np.geomspace(low, high, params["num_kappas"])
    return {"kappa_ratios": ratios, **{key: params[key] for key in _COMMON}}


def panel_grid(params: dict, normalization: str, d: int):
    """The grid and the β values of one panel."""
    from attnflow import meanfield as mf

    if d == 2:
        return mf.CircleGrid(params["circle_modes"]), params["betas_circle"]
    if normalization == "n":
        return mf.SphereGrid(params["sphere_degree_usa"]), params["betas_sphere_usa"]
    return mf.SphereGrid(params["sphere_degree"]), params["betas_sphere"]


def panel_name(normalization: str, d: int) -> str:
    return f"{'usa' if normalization == 'n' else 'sa'}_s{d - 1}"


def compute(params: dict, seed: int) -> dict:
    from attnflow import meanfield as mf

    options = diagram_options(params)
    data: dict = {"kappa_ratios": options["kappa_ratios"]}
    for normalization, d in PANELS:
        name = panel_name(normalization, d)
        grid, betas = panel_grid(params, normalization, d)
        start = time.perf_counter()
        pd = mf.noisy_phase_diagram(
            grid,
            betas,
            normalization=normalization,
            key=jax.random.key(seed),
            progress=True,
            **options,
        )
        data[f"{name}_seconds"] = time.perf_counter() - start
        for field in (
            "betas",
            "kappas",
            "times",
            "order_parameter",
            "order_parameter_history",
            "bumps",
            "lasted",
            "residual",
            "stationary",
            "resolved",
            "modes_needed",
            "steps",
            "stop_time",
            "kappa_critical",
            "kappa_saddle_node",
            "theory_order_parameter",
            "tricritical_beta",
            "tricritical_kappa",
        ):
            data[f"{name}_{field}"] = np.asarray(getattr(pd, field))
    return data


def _edges(centres, log=False):
    c = np.log(centres) if log else np.asarray(centres, float)
    if c.size == 1:
        e = np.array([c[0] - 0.5, c[0] + 0.5])
    else:
        mid = (c[1:] + c[:-1]) / 2
        e = np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])
    return np.exp(e) if log else e


def plot(data: dict, params: dict):
    from attnflow.plot._common import plt

    ratios = data["kappa_ratios"]
    fig, axes = plt.subplots(2, 4, figsize=(15, 6.6), sharey=True)
    mesh = None
    for column, (normalization, d) in enumerate(PANELS):
        name = panel_name(normalization, d)
        betas = data[f"{name}_betas"]
        r = data[f"{name}_order_parameter"]
        for row in range(2):
            ax = axes[row, column]
            ax.set_facecolor("0.75")  # unresolved cells (NaN)
            mesh = ax.pcolormesh(
                _edges(betas),
                _edges(ratios, log=True),
                np.ma.masked_invalid(r[row].T),
                vmin=0,
                vmax=1,
                cmap="viridis",
                shading="flat",
            )
            ax.set_yscale("log")
            ax.axhline(1.0, color="w", lw=1.0)
            saddle = data[f"{name}_kappa_saddle_node"] / data[f"{name}_kappa_critical"]
            ax.plot(betas, saddle, "w--", lw=1.0)
            tb = float(data[f"{name}_tricritical_beta"])
            if np.isfinite(tb):
                ax.plot([tb], [1.0], "*", color="orangered", ms=11, mec="k")
            bumps = data[f"{name}_bumps"][row]
            moving = ~data[f"{name}_stationary"][row] & data[f"{name}_resolved"][row]
            for b, k in zip(*np.nonzero(bumps > 1), strict=True):
                ax.text(
                    betas[b],
                    ratios[k],
                    str(bumps[b, k]),
                    color="w",
                    ha="center",
                    va="center",
                    fontsize=7,
                )
            for b, k in zip(*np.nonzero(moving), strict=True):
                ax.plot(betas[b], ratios[k], ".", color="w", ms=3)
            model = "USA" if normalization == "n" else "SA"
            start = "near-uniform start" if row == 0 else "concentrated start"
            title = f"{model} on S{d - 1}: {start}"
            if row == 0 and np.isfinite(tb):
                title += f"\ntricritical β ≈ {tb:.2f}"
            ax.set_title(title, fontsize=9)
            if row == 1:
                ax.set_xlabel("β")
        axes[0, 0].set_ylabel("κ / κ_c(β)")
        axes[1, 0].set_ylabel("κ / κ_c(β)")
    fig.colorbar(mesh, ax=axes, label="r = |∫x dρ| at the horizon", shrink=0.8)
    fig.suptitle(
        "Noisy attention, Fokker–Planck at τ = t/κ = "
        f"{params['horizon']:g}: white line κ_c, dashed κ_sn (theory)",
        fontsize=10,
    )
    return fig


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``noisy-phase.{png,npz,json}``."""
    jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()
    data = compute(params, seed)
    computed = time.perf_counter()
    fig = plot(data, params)
    timings = {"compute": computed - start, "plot": time.perf_counter() - computed}
    record = {"seed": seed}
    for normalization, d in PANELS:
        name = panel_name(normalization, d)
        timings[name] = float(data[f"{name}_seconds"])
        steps = data[f"{name}_steps"]
        record[name] = {
            "tricritical_beta": float(data[f"{name}_tricritical_beta"]),
            "tricritical_kappa": float(data[f"{name}_tricritical_kappa"]),
            "points": int(steps[0].size),
            "solves": int(steps.size),
            "steps_total": int(steps.sum()),
            "steps_mean_per_solve": float(steps.mean()),
            "steps_max": int(steps.max()),
            "transport_evaluations_total": int(6 * steps.sum()),
            "unresolved": int((~data[f"{name}_resolved"]).sum()),
            "hysteresis_points": int(
                np.nansum(
                    np.abs(data[f"{name}_order_parameter"][1] - data[f"{name}_order_parameter"][0])
                    > 0.05
                )
            ),
            "multi_bump_states": int((data[f"{name}_bumps"] > 1).sum()),
        }
    return write_outputs(out, "noisy-phase", fig, data, {**params, **record}, timings)
