# %% [markdown]
# # A movie of clustering tokens
#
# (SA) tokens on the sphere S² (or the circle), coloured by cluster, written one frame at a time:
# an MP4 when ffmpeg is installed, a streamed GIF otherwise. Memory does not grow with the number
# of frames, so long movies are fine. `ATTNFLOW_QUICK=1` makes a tiny one.

# %%
import os
import pathlib

import jax
import jax.random as jr
import numpy as np

import attnflow as af
from attnflow import plot
from attnflow.figures import movie

jax.config.update("jax_enable_x64", True)
af.enable_compilation_cache()  # compiled programs kept on disk across runs
QUICK = os.environ.get("ATTNFLOW_QUICK") == "1"
params = movie.PRESETS["quick" if QUICK else "default"]
out = pathlib.Path("notebook-outputs")
out.mkdir(exist_ok=True)

# %% [markdown]
# `movie.states` is a generator: one jitted solve per frame interval, so only the current frame
# exists at any time. `plot.token_movie` draws and encodes each frame as it arrives.

# %%
times = np.linspace(0.0, params["t1"], params["frames"])
x0 = af.random_tokens(jr.key(0), params["n"], params["d"])
fmt = plot.available_movie_format()
path, frames = plot.token_movie(
    movie.states(x0, params["beta"], times),
    out / f"tokens.{fmt}",
    times=times,
    labels=lambda x: np.asarray(af.cluster_labels(x, params["delta"])),
    fps=params["fps"],
    dpi=params["dpi"],
    fmt=fmt,
)
print(f"wrote {frames} frames to {path} ({path.stat().st_size / 1e3:.0f} kB, {fmt})")

# %% [markdown]
# The last frame, drawn again as a still.

# %%
*_, last = movie.states(x0, params["beta"], times[[0, -1]])
draw = plot.tokens_on_sphere if params["d"] == 3 else plot.tokens_on_circle
ax = draw(
    np.asarray(last),
    labels=np.asarray(af.cluster_labels(last, params["delta"])),
    title=f"t = {times[-1]:g}: {int(af.count_clusters(last, params['delta']))} clusters",
)


# %% [markdown]
# Run as a script with `ATTNFLOW_OUT=folder`, this notebook saves its figures there as PNG
# (`movie.png`, `movie-2.png`, …; `attnflow.plot.save_figures`).

# %%
from attnflow import plot  # noqa: E402

plot.save_figures("movie")
