"""One computation shared by a figure's command-line run and its notebook in one test file.

A figure's CLI (``make``) and its notebook call the same ``compute`` with the same preset and
seed. While :func:`computed_once` is active, each patched ``compute`` runs once per distinct set of
arguments and later calls with equal arguments get that result (a fresh dict over the same
arrays): the CLI's files and the notebook's printed numbers are then checked on one run, and
each test still runs its own code path (writing files, plotting, the notebook's assertions).
Arguments that only change what is printed (``progress``) are not part of the key.
"""

import contextlib
import functools
import inspect

import pytest

IGNORED = ("progress",)


def _key(value):
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("seq", tuple(_key(v) for v in value))
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return ("object", id(value))  # models and the like: the same object (cached loaders)


def _memoized(function, calls):
    results = {}
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()  # compute(p) and compute(p, 0) are the same call
        key = _key({k: v for k, v in bound.arguments.items() if k not in IGNORED})
        if key not in results:
            results[key] = function(*args, **kwargs)
        calls.append((function.__module__, key))
        result = results[key]
        return dict(result) if isinstance(result, dict) else result

    return wrapper


@contextlib.contextmanager
def computed_once(*modules, name="compute"):
    """Patch ``module.<name>`` of every module with a memoised version for the duration; yields
    the list of call keys (one entry per call, repeated keys are the shared runs)."""
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        for module in modules:
            patch.setattr(module, name, _memoized(getattr(module, name), calls))
        yield calls


def reused(calls) -> int:
    """How many of the recorded calls got the result of an earlier call."""
    return len(calls) - len(set(calls))
