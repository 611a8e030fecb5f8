"""Strict test configuration (equinox-style): float64 by default, rank and dtype promotion
strict, four host devices for the sharding tests. Float32 behaviour is tested with explicit
dtypes.

Memory: a pytest-xdist worker runs many test files in one process, and every program JAX
compiles stays cached (with its XLA executable) for the life of the process. After each test
file the caches are cleared and matplotlib's figures closed, so a worker holds the programs of
one file at a time; a file whose tests compile independent programs (``release_compiled``
marker) clears them after every test."""

import ctypes
import gc
import os
import sys
import tempfile

os.environ.setdefault("MPLBACKEND", "Agg")
# The suite compiles hundreds of small programs and runs each briefly: XLA's LLVM optimisation
# passes cost more compile time than they save (measured: 21-40% less CPU per test file).
# Comparisons between two code paths compile both with the same flags.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
).strip()

# Compiled programs are also kept on disk and shared by the xdist workers and the subprocesses
# the suite starts (notebooks, CLI, docs build): the same small programs recur across test files,
# and the per-file cache clearing below would otherwise compile each again (XLA's backend compile
# is about 60% of the suite's CPU time). JAX keys each entry on the program, the flags and the
# versions, so a stale entry is never used. ATTNFLOW_TEST_JAX_CACHE=0 turns it off.
if os.environ.get("ATTNFLOW_TEST_JAX_CACHE", "1") != "0":
    _cache = os.path.join(tempfile.gettempdir(), f"attnflow-test-jax-cache-{os.getuid()}")
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _cache)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
else:
    # The CLI and the notebooks switch on a per-user cache (attnflow.enable_compilation_cache):
    # not from the suite when its own cache is off.
    os.environ.setdefault("ATTNFLOW_COMPILATION_CACHE", "0")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
# Strict dtype promotion (as diffrax's and equinox's suites run): mixing array dtypes
# (int32 + int64, float32 + float64) raises; Python scalars stay weakly typed.
jax.config.update("jax_numpy_dtype_promotion", "strict")
# Subprocesses (the CLI and notebook tests) run under strict promotion too.
os.environ.setdefault("JAX_NUMPY_DTYPE_PROMOTION", "strict")
jax.config.update("jax_num_cpu_devices", 4)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one pytest-xdist worker per core, at most 4 (each worker holds its own JAX)."""
    return max(1, min(4, os.cpu_count() or 1))


# The longest test files start first (seconds of a full run, `--durations=0` summed per file):
# xdist hands out whole files in collection order (``--no-loadscope-reorder``), and a long file
# started last would leave the other worker idle at the end of the run.
LONGEST_FIRST = (
    "test_docstrings.py",
    "test_stored_adjoint.py",
    "test_sharding.py",
    "test_noisy_phase.py",
    "test_meanfield.py",
    "test_phase_statistics.py",
    "test_homogenized.py",
    "test_api_walk.py",
    "test_fig1.py",
    "test_fig_normalization.py",
    "test_noise.py",
    "test_device_check.py",
    "test_normalization_speed.py",
    "test_site.py",
    "test_grad.py",
    "test_trainable.py",
    "test_blocked.py",
    "test_solve_diffrax.py",
    "test_attention_core.py",
    "test_field_contract.py",
    "test_meanfield_sphere.py",
    "test_pinned_behaviours.py",
    "test_sinkhorn_attention.py",
    "test_normalization_schemes.py",
    "test_measures.py",
    "test_piecewise.py",
    "test_fig46.py",
    "test_negative_beta.py",
    "test_stationary.py",
    "test_validation_solve.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


def _release_memory():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")
    jax.clear_caches()
    gc.collect()
    _return_freed_heap()


def _return_freed_heap():
    """Hand the heap freed by the cleared caches back to the OS (glibc keeps it otherwise, and
    a worker's resident memory only grows); a no-op where there is no glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _memory_kb():
    """(VmRSS, VmHWM) of this process in kB, from /proc (Linux); (0, 0) elsewhere."""
    try:
        with open("/proc/self/status") as status:
            fields = dict(line.split(":", 1) for line in status if line.startswith("Vm"))
        return tuple(int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM"))
    except (OSError, KeyError, ValueError):
        return 0, 0


# A program with a run-time check (equinox.error_if) calls back into Python to raise, and jax
# 0.10.2 never writes such a program to the on-disk cache: every solve with save times and every
# jitted solve or gradient compiles again in every file and every run. The files below run with
# equinox's "nan" error mode instead (a failed check returns NaN, no callback), so their
# programs are cached. Only files where no test asserts a traced error and every test has an
# assertion that NaN fails (a finite value, a comparison with a reference, a norm of 1); in them
# np.testing.assert_allclose / assert_array_equal also fail on NaN (they take NaN == NaN as
# equal otherwise), so a check that fired cannot pass as agreement. Measured with -n 0
# and a warm cache, CPU (user + sys): test_grad.py 57.5 s -> 27.5 s (cold: 52.1 s).
# test_stored_adjoint.py is not in the list: on a cold cache (CI's) it cost more in nan mode
# (135.6 s against 106.1 s). Equinox reads the mode when a
# program is traced, so the caches are cleared on the way in and out (no program traced in one
# mode is reused in the other). ATTNFLOW_TEST_ERROR_MODE=raise runs every file in raise mode.
NAN_MODE_FILES = frozenset({"test_grad.py", "test_solve.py"})


def _nan_strict(compare, name):
    """numpy's array comparison, failing on NaN anywhere (NaN == NaN passes it otherwise): in
    nan mode a check that fired shows up as NaN, and both sides of a comparison may carry it."""
    import numpy as np

    def strict(actual, desired, *args, **kwargs):
        for side, value in (("actual", actual), ("desired", desired)):
            values = np.asarray(value)
            if values.dtype.kind in "fc" and np.isnan(values).any():
                raise AssertionError(
                    f"{name}: NaN in {side} (a failed run-time check in nan mode?)"
                )
        return compare(actual, desired, *args, **kwargs)

    return strict


@pytest.fixture(autouse=True, scope="module")
def _cacheable_error_mode(request):
    import equinox._errors as errors
    import numpy as np

    if (
        request.path.name not in NAN_MODE_FILES
        or os.environ.get("ATTNFLOW_TEST_ERROR_MODE", "") == "raise"
    ):
        yield
        return
    before = errors.EQX_ON_ERROR
    compares = {n: getattr(np.testing, n) for n in ("assert_allclose", "assert_array_equal")}
    jax.clear_caches()
    errors.EQX_ON_ERROR = "nan"
    for name, compare in compares.items():
        setattr(np.testing, name, _nan_strict(compare, name))
    try:
        yield
    finally:
        errors.EQX_ON_ERROR = before
        for name, compare in compares.items():
            setattr(np.testing, name, compare)
        jax.clear_caches()


# Releasing costs about 0.8 s a file (89 s of the two workers' time in a full run, most of it
# gc.collect and freeing executables) and throws away programs the next file may compile again;
# never releasing let each worker grow past 6 GB and crash. So a file's programs are released
# only once the worker holds more than this (resident memory; always where it cannot be read).
# Full run, 2 workers: 3 GB -> 10 of 104 files released, suite 567 s, peaks 4.0 / 3.5 GB (the
# 4.0 is test_docstrings.py alone, the first file); 1.5 GB -> 30 files, 596 s; every file: 654 s.
RELEASE_ABOVE_KB = int(os.environ.get("ATTNFLOW_TEST_RELEASE_ABOVE_MB", "3072")) * 1024


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs_after_each_file(request):
    yield
    log = os.environ.get("ATTNFLOW_TEST_MEMLOG")  # a path: one line per test file
    before = _memory_kb()
    if before[0] == 0 or before[0] > RELEASE_ABOVE_KB:
        _release_memory()
    else:
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.close("all")
    if log:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        after = _memory_kb()
        with open(log, "a") as out:
            out.write(f"{worker} {request.node.nodeid} rss={before[0]} hwm={before[1]} ")
            out.write(f"rss_after_release={after[0]}\n")


@pytest.fixture(autouse=True)
def _release_compiled_programs_after_marked_tests(request):
    yield
    if request.node.get_closest_marker("release_compiled") is not None:
        _release_memory()
