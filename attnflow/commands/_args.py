"""Argument checks shared by the subcommands: bad values fail at parse time or before any
computation, with a message naming the option (never a traceback after minutes of work)."""

import argparse
import math
import pathlib
import tempfile

# jax.random.key takes a signed 64-bit seed.
MAX_SEED = 2**63 - 1


class UsageError(Exception):
    """A bad command-line value found before computing; the CLI prints it and exits with 2."""


def seed(text: str) -> int:
    """A PRNG seed: an integer in [0, 2**63 - 1]."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(
            f"expected a seed in [0, 2**63 - 1] (what jax.random.key takes), got {text}"
        )
    return value


def _number(text: str, kind, *, low, strict: bool, what: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value) or value < low or (strict and value == low):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
    return value


def finite_float(text: str) -> float:
    """Any finite real number (e.g. β: β < 0 is the repulsive model)."""
    return _number(text, float, low=-math.inf, strict=False, what="a finite number")


def positive_int(text: str) -> int:
    return _number(text, int, low=0, strict=True, what="an integer >= 1")


def nonnegative_int(text: str) -> int:
    return _number(text, int, low=0, strict=False, what="an integer >= 0")


def positive_float(text: str) -> float:
    return _number(text, float, low=0.0, strict=True, what="a finite number > 0")


def nonnegative_float(text: str) -> float:
    return _number(text, float, low=0.0, strict=False, what="a finite number >= 0")


def at_least(low: int):
    """An integer >= low (e.g. d >= 2 for the sphere S^(d-1))."""

    def check(text: str) -> int:
        return _number(text, int, low=low, strict=False, what=f"an integer >= {low}")

    return check


def output_folder(path) -> pathlib.Path:
    """Create the output folder and check that a file can be written in it, before computing."""
    out = pathlib.Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {str(out)!r} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise UsageError(f"--out: cannot write to {str(out)!r} ({reason})") from None
    return out
