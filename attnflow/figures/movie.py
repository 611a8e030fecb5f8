"""A movie of tokens clustering under (SA), on the circle (d = 2) or the sphere S² (d = 3).

The trajectory is integrated segment by segment with :func:`attnflow.solve` (one jitted solve
reused for every segment) and each frame is drawn and encoded as soon as its state is known
(:func:`attnflow.plot.token_movie`): neither the frames nor the trajectory are held in memory
beyond the few arrays kept for the ``.npz`` (which holds the n × d states of the frames, not
images). The movie is an MP4 when ffmpeg is installed and a streamed GIF otherwise; tokens are
coloured by cluster (:func:`attnflow.cluster_labels` with δ = 10⁻³). No LaTeX is needed.

``movie.png`` is a contact sheet of four frames.
"""

import pathlib
import time

import jax
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow import plot
from attnflow.figures._output import write_outputs

PRESETS = {
    "quick": {
        "n": 16,
        "d": 2,
        "beta": 4.0,
        "t1": 10.0,
        "frames": 5,
        "fps": 5,
        "dpi": 50,
        "delta": 1e-3,
        "format": None,
    },
    "default": {
        "n": 64,
        "d": 3,
        "beta": 4.0,
        "t1": 20.0,
        "frames": 100,
        "fps": 15,
        "dpi": 80,
        "delta": 1e-3,
        "format": None,
    },
    "full": {
        "n": 128,
        "d": 3,
        "beta": 9.0,
        "t1": 30.0,
        "frames": 300,
        "fps": 25,
        "dpi": 110,
        "delta": 1e-3,
        "format": None,
    },
}


@jax.jit
def _segment(x, beta, t0, t1):
    return af.solve(af.SelfAttention(beta), x, t1, t0=t0).ys[-1]


def states(x0, beta: float, times):
    """Yield the tokens at each of ``times`` (increasing, starting at the time of ``x0``), one
    solve per segment: a generator, so a movie can be as long as wanted."""
    x = x0
    yield x
    for t0, t1 in zip(times[:-1], times[1:], strict=True):
        x = _segment(x, beta, t0, t1)
        yield x


def make(params: dict, out: pathlib.Path, seed: int) -> list[pathlib.Path]:
    """Write the movie, a contact sheet ``movie.png`` and ``movie.{npz,json}``."""
    jax.config.update("jax_enable_x64", True)
    from attnflow.plot._common import plt

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fmt = params["format"] or plot.available_movie_format()
    target = out / ("movie_frames" if fmt == "png" else f"movie.{fmt}")
    times = np.linspace(0.0, params["t1"], params["frames"])
    x0 = af.random_tokens(jr.key(seed), params["n"], params["d"])
    kept = []

    def recorded():
        for x in states(x0, params["beta"], times):
            x = np.asarray(x)
            kept.append(x)
            yield x

    def labels(x):
        return np.asarray(af.cluster_labels(x, params["delta"]))

    path, frames = plot.token_movie(
        recorded(),
        target,
        times=times,
        labels=labels,
        fps=params["fps"],
        dpi=params["dpi"],
        fmt=fmt,
    )
    written = time.perf_counter()
    xs = np.stack(kept)
    picks = np.unique(np.linspace(0, frames - 1, 4).round().astype(int))
    three_d = params["d"] == 3
    fig = plt.figure(figsize=(2.8 * len(picks), 2.9))
    for j, k in enumerate(picks):
        ax = fig.add_subplot(1, len(picks), j + 1, projection="3d" if three_d else None)
        draw = plot.tokens_on_sphere if three_d else plot.tokens_on_circle
        draw(xs[k], labels=labels(xs[k]), ax=ax, title=f"t = {times[k]:.2f}")
    fig.suptitle(f"(SA), n = {params['n']}, d = {params['d']}, β = {params['beta']:g}")
    data = {
        "ts": times,
        "tokens": xs,
        "clusters": np.array([len(np.unique(labels(x))) for x in xs]),
    }
    record = {**params, "format": fmt, "movie": path.name, "frames": frames, "seed": seed}
    timings = {"solve_and_write_movie": written - start}
    return write_outputs(out, "movie", fig, data, record, timings) + [path]
