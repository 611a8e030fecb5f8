"""Strict test configuration (equinox-style): float64 by default, rank promotion raises,
four host devices for the sharding tests. Float32 behaviour is tested with explicit dtypes."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
# The suite compiles hundreds of small programs and runs each briefly: XLA's LLVM optimisation
# passes cost more compile time than they save (measured: 21-40% less CPU per test file).
# Comparisons between two code paths compile both with the same flags.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
).strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_num_cpu_devices", 4)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one pytest-xdist worker per core, at most 4 (each worker holds its own JAX)."""
    return max(1, min(4, os.cpu_count() or 1))
