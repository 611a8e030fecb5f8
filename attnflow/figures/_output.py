"""Writing a figure's picture and its data: ``NAME.png``, ``NAME.npz`` and ``NAME.json``."""

import contextlib
import json
import os
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


FORMATS = ("png", "svg", "pdf")
# How write_outputs saves the picture: the command line's --format and --dpi set these.
_SAVE = {"format": "png", "dpi": 200}


@contextlib.contextmanager
def saving(*, format: str = "png", dpi: int = 200):
    """Within the block, :func:`write_outputs` saves the picture as ``format`` (png, svg or
    pdf: the last two are vector) at ``dpi`` (raster parts)."""
    if format not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {format!r}")
    if not isinstance(dpi, int) or dpi < 10:
        raise ValueError(f"dpi: expected an integer >= 10, got {dpi!r}")
    previous = dict(_SAVE)
    _SAVE.update(format=format, dpi=dpi)
    try:
        yield
    finally:
        _SAVE.update(previous)


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (``os.getloadavg``), None where unavailable:
    recorded beside the timings, which hold only on an idle machine."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def write_outputs(
    out: pathlib.Path, name: str, fig, data: dict, params: dict, timings: dict
) -> list[pathlib.Path]:
    """Save ``fig`` as ``out/NAME.png`` (or ``.svg``/``.pdf`` inside :func:`saving`), ``data``
    (arrays) as ``NAME.npz`` and a JSON record of ``params``, package versions, the machine,
    its load average at the end of the run and ``timings`` (seconds). Returns the three paths."""
    import jax
    import matplotlib.pyplot as plt

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    png, npz, js = out / f"{name}.{_SAVE['format']}", out / f"{name}.npz", out / f"{name}.json"
    fig.savefig(png, dpi=_SAVE["dpi"], bbox_inches="tight")
    plt.close(fig)
    np.savez(npz, **{k: np.asarray(v) for k, v in data.items()})
    record = {
        "figure": name,
        "params": params,
        "timings_s": timings,
        # The timings hold for the machine's load: (1, 5, 15)-minute load averages at the end.
        "load_average": load_average(),
        "cpu_count": os.cpu_count(),
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


def compute_plot_write(
    out: pathlib.Path,
    name: str,
    compute,
    plot,
    params: dict,
    seed: int,
    *,
    record=None,
    timings=None,
) -> list[pathlib.Path]:
    """``data = compute(params, seed)`` and ``plot(data, params)``, each timed, written by
    :func:`write_outputs` with ``params`` and the seed as the record: ``record(data)`` adds
    entries to it and ``timings(data)`` to the timings."""
    start = time.perf_counter()
    data = compute(params, seed)
    computed = time.perf_counter()
    fig = plot(data, params)
    seconds = {"compute": computed - start, "plot": time.perf_counter() - computed}
    extra_record = {} if record is None else record(data)
    extra_timings = {} if timings is None else timings(data)
    return write_outputs(
        out, name, fig, data, {**params, "seed": seed, **extra_record}, {**seconds, **extra_timings}
    )
