"""Animations of tokens on S¹ or S², written one frame at a time.

Frames are drawn, encoded and dropped one by one: memory does not grow with the number of
frames. MP4 goes through ffmpeg (matplotlib's ``FFMpegWriter`` pipes each frame); without ffmpeg
an animated GIF is streamed with Pillow's frame-level GIF encoder against one fixed palette;
``"png"`` writes numbered PNG files. No LaTeX is needed.
"""

import io
import pathlib
import shutil

import numpy as np

from ._circle import tokens_on_circle, tokens_on_sphere
from ._common import plt


def available_movie_format() -> str:
    """``"mp4"`` if ffmpeg is on the PATH, else ``"gif"``.

    Example:
        >>> from attnflow import plot
        >>> plot.available_movie_format() in ("mp4", "gif")
        True
    """
    return "mp4" if shutil.which("ffmpeg") else "gif"


class _GifStream:
    """An animated GIF written frame by frame (Pillow's frame-level encoder, one palette)."""

    def __init__(self, path, fps):
        self.file = open(path, "wb")
        self.duration = int(round(1000 / fps))
        self.palette = None

    def add(self, rgb):
        from PIL import GifImagePlugin, Image

        image = Image.fromarray(rgb)
        if self.palette is None:
            self.palette = image.quantize(colors=255, method=Image.Quantize.MEDIANCUT)
            frame = image.quantize(palette=self.palette, dither=Image.Dither.NONE)
            header, _ = GifImagePlugin.getheader(
                frame, info={"loop": 0, "duration": self.duration, "optimize": False}
            )
            self.file.write(b"".join(header))
        else:
            frame = image.quantize(palette=self.palette, dither=Image.Dither.NONE)
        self.file.write(b"".join(GifImagePlugin.getdata(frame, duration=self.duration)))

    def close(self):
        self.file.write(b";")
        self.file.close()


def _rgb(fig, dpi):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    from PIL import Image

    return np.asarray(Image.open(buffer).convert("RGB"))


def token_movie(
    states, path, *, times=None, labels=None, fps=10, dpi=80, fmt=None, title="t = {t:.2f}"
):
    """Write an animation of tokens on the circle (d = 2) or the sphere S² (d = 3).

    Args:
        states: an iterable of (n, d) token arrays (a generator is fine: only the current frame
            is held in memory).
        path: output file (``.mp4``/``.gif``) or, for ``fmt="png"``, a folder for
            ``frame_00000.png``, …
        times: optional iterable of times for the titles.
        labels: optional callable ``labels(x) -> (n,)`` colouring tokens by cluster.
        fps, dpi: frame rate and resolution.
        fmt: ``"mp4"`` (needs ffmpeg), ``"gif"`` or ``"png"``; default
            :func:`available_movie_format`.
        title: format string with field ``t`` (used when ``times`` is given).

    Returns:
        ``(path, frames)``: where the movie was written and the number of frames.

    Example:
        >>> import numpy as np, tempfile, pathlib
        >>> from attnflow import plot
        >>> states = (np.array([[1.0, 0.0], [np.cos(a), np.sin(a)]]) for a in (2.0, 1.0, 0.0))
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path, frames = plot.token_movie(states, pathlib.Path(tmp) / "m.gif", fmt="gif")
        ...     frames, path.stat().st_size > 0
        (3, True)
    """
    fmt = available_movie_format() if fmt is None else fmt
    if fmt not in ("mp4", "gif", "png"):
        raise ValueError(f"fmt: expected 'mp4', 'gif' or 'png', got {fmt!r}")
    if fmt == "mp4" and not shutil.which("ffmpeg"):
        raise ValueError("fmt: 'mp4' needs ffmpeg on the PATH; use 'gif' or 'png'")
    path = pathlib.Path(path)
    times = iter(()) if times is None else iter(times)
    figure, ax, sink, writer = None, None, None, None
    frames = 0
    try:
        for x in states:
            x = np.asarray(x)
            if figure is None:
                d = x.shape[-1]
                if d not in (2, 3):
                    raise ValueError(
                        f"states: expected tokens on S¹ (d = 2) or S² (d = 3), got d = {d}"
                    )
                figure = plt.figure(figsize=(4, 4))
                ax = figure.add_subplot(projection="3d" if d == 3 else None)
                if fmt == "mp4":
                    from matplotlib.animation import FFMpegWriter

                    writer = FFMpegWriter(fps=fps)
                    writer.setup(figure, str(path), dpi=dpi)
                elif fmt == "gif":
                    sink = _GifStream(path, fps)
                else:
                    path.mkdir(parents=True, exist_ok=True)
            ax.clear()
            t = next(times, None)
            heading = None if t is None else title.format(t=t)
            colours = None if labels is None else labels(x)
            draw = tokens_on_sphere if x.shape[-1] == 3 else tokens_on_circle
            draw(x, labels=colours, ax=ax, title=heading)
            if writer is not None:
                writer.grab_frame()
            elif sink is not None:
                sink.add(_rgb(figure, dpi))
            else:
                figure.savefig(path / f"frame_{frames:05d}.png", dpi=dpi)
            frames += 1
    finally:
        if writer is not None:
            writer.finish()
        if sink is not None:
            sink.close()
        if figure is not None:
            plt.close(figure)
    if frames == 0:
        raise ValueError("states: expected at least one frame, got none")
    return path, frames
