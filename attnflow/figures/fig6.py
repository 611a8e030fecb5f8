"""Fig. 6: the kernel of the torus Hessian, App. B,

    g_β(τ) = (cos τ − β sin² τ) e^{β cos τ},

for β = 2 (magenta) and β = 6 (cyan), with dashed lines at ±τ*_β, the root in [0, π/2) of
β sin² τ = cos τ: cos τ* = (−1 + √(1 + 4β²))/(2β) (docs/maths.md §7, derived). g is positive on
|τ| < τ* and negative on τ* < |τ| ≤ π, which is what makes every non-synchronised critical point
of E_β a strict saddle once β is large (Thm 5.1).

The curves are drawn as g_β(τ) e^{−β} (so that g(0) = 1 for both β; zeros and signs unchanged);
the ``.npz`` holds the raw g_β. The paper marks ±τ* for β = 6 only; both are marked here.
"""

import pathlib
import time

import numpy as np

import attnflow.theory as theory
from attnflow import plot
from attnflow.figures._output import write_outputs

PRESETS = {
    "quick": {"betas": [2.0, 6.0], "points": 201},
    "default": {"betas": [2.0, 6.0], "points": 2001},
    "full": {"betas": [2.0, 6.0], "points": 8001},
}


def compute(betas, points: int) -> dict:
    """τ on [−π, π] (``points`` values), g_β(τ) for each β (len(betas), points) and τ*_β."""
    taus = np.linspace(-np.pi, np.pi, points)
    values = np.stack([np.asarray(theory.hessian_kernel(taus, beta=float(b))) for b in betas])
    stars = np.array([float(theory.tau_star(float(b))) for b in betas])
    return {"tau": taus, "g": values, "beta": np.asarray(betas, float), "tau_star": stars}


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Compute, plot and write ``fig6.{png,npz,json}`` (``seed`` is unused: nothing is random)."""
    del seed
    start = time.perf_counter()
    data = compute(params["betas"], params["points"])
    computed = time.perf_counter()
    ax = plot.hessian_kernel_curves(data["tau"], data["g"], params["betas"], data["tau_star"])
    ax.set_title("Fig. 6: the kernel g of the Hessian on the torus (App. B)")
    record = {**params, "tau_star": data["tau_star"].tolist()}
    timings = {"compute": computed - start, "plot": time.perf_counter() - computed}
    return write_outputs(out, "fig6", ax.figure, data, record, timings)
