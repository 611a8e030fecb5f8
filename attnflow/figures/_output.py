"""Writing a figure's picture and its data: ``NAME.png``, ``NAME.npz`` and ``NAME.json``."""

import json
import pathlib
import platform
import time

import numpy as np


def versions() -> dict[str, str]:
    import importlib.metadata as md

    names = ("attnflow", "jax", "jaxlib", "diffrax", "equinox", "numpy", "matplotlib")
    found = {}
    for name in names:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = "absent"
    found["python"] = platform.python_version()
    return found


def write_outputs(
    out: pathlib.Path, name: str, fig, data: dict, params: dict, timings: dict
) -> list[pathlib.Path]:
    """Save ``fig`` as ``out/NAME.png``, ``data`` (arrays) as ``NAME.npz`` and a JSON record of
    ``params``, package versions, the machine and ``timings`` (seconds). Returns the three paths."""
    import jax
    import matplotlib.pyplot as plt

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    png, npz, js = out / f"{name}.png", out / f"{name}.npz", out / f"{name}.json"
    fig.savefig(png, dpi=130, bbox_inches="tight")
    plt.close(fig)
    np.savez(npz, **{k: np.asarray(v) for k, v in data.items()})
    record = {
        "figure": name,
        "params": params,
        "timings_s": timings,
        "versions": versions(),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "devices": [str(d) for d in jax.devices()],
        },
        "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    js.write_text(json.dumps(record, indent=2, default=str))
    return [png, npz, js]
