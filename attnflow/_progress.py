"""Progress reporting for long computations: a tqdm bar on a terminal, plain log lines elsewhere.

A bar redrawn with carriage returns is unreadable in a log file or a CI log, so when the output
stream is not a terminal :class:`Progress` writes one line per ``interval`` seconds (and one at
the end) instead. Compilation is its own phase: it is reported before the bar starts, with its
duration, so the rate shown by the bar is the rate of the computation alone.
"""

import contextlib
import sys
import time


class Progress:
    """Progress over ``total`` items (``unit``), reported to ``file`` (default: stderr).

    Args:
        desc: what is computed, the prefix of every line.
        total: number of items (systems, cells, calls).
        unit: the items' name.
        enabled: False reports nothing.
        file: a text stream; a terminal gets a tqdm bar, anything else log lines.
        interval: seconds between log lines (and tqdm's ``mininterval`` on a terminal).

    Example:
        >>> import io
        >>> from attnflow._progress import Progress
        >>> log = io.StringIO()
        >>> with Progress("demo", 4, "systems", file=log, interval=0) as bar:
        ...     with bar.compiling():
        ...         pass
        ...     bar.update(4)
        >>> lines = log.getvalue().splitlines()
        >>> lines[0].startswith("demo: compiled in"), lines[-1].startswith("demo: 4/4 systems")
        (True, True)
    """

    def __init__(self, desc, total, unit, *, enabled=True, file=None, interval=None):
        self.desc, self.total, self.unit, self.enabled = desc, int(total), unit, enabled
        self.file = sys.stderr if file is None else file
        isatty = getattr(self.file, "isatty", lambda: False)
        self.terminal = bool(isatty())
        self.interval = (0.1 if self.terminal else 10.0) if interval is None else interval
        self.done = 0
        self.start = self.last = time.perf_counter()
        self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextlib.contextmanager
    def compiling(self):
        """Report the block as the compilation phase (time excluded from the rate)."""
        start = time.perf_counter()
        if self.enabled and self.terminal:
            print(f"{self.desc}: compiling…", end="\r", file=self.file, flush=True)
        yield
        seconds = time.perf_counter() - start
        if self.enabled:
            print(f"{self.desc}: compiled in {seconds:.1f} s", file=self.file, flush=True)
        self.start = self.last = time.perf_counter()

    def update(self, count):
        """``count`` more items done."""
        self.done += int(count)
        if not self.enabled:
            return
        if self.terminal:
            if self.bar is None:
                from tqdm.auto import tqdm

                self.bar = tqdm(
                    total=self.total,
                    desc=self.desc,
                    # A space before the unit, and the rate never inverted ("3.50s/it"):
                    # "0.29 systems/s" reads the same at every speed.
                    unit=f" {self.unit}",
                    bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} "
                    "[{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]",
                    file=self.file,
                    mininterval=self.interval,
                )
            self.bar.update(int(count))
            return
        now = time.perf_counter()
        if now - self.last >= self.interval and self.done < self.total:
            self._line(now)
            self.last = now

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.enabled and not self.terminal and self.done:
            self._line(time.perf_counter())

    def _line(self, now):
        seconds = now - self.start
        rate = self.done / seconds if seconds > 0 else float("inf")
        percent = 100 * self.done / max(self.total, 1)
        print(
            f"{self.desc}: {self.done}/{self.total} {self.unit} ({percent:.0f}%), "
            f"{seconds:.1f} s, {rate:.3g} {self.unit}/s",
            file=self.file,
            flush=True,
        )
