"""Counted work of the main paths against committed baselines (issue 40; STYLE habit 15: a
path that does not use a feature pays nothing for it).

Deterministic, not timed. For each path the compiled program (XLA's optimised HLO, from
``jax.jit(...).lower(...).compile()``) is counted: ``cost_analysis()`` FLOPs, transcendentals
and bytes accessed (a ``while`` loop's body counted once, i.e. per step), the number of
instructions of each op kind in every computation of ``compiled.as_text()`` (fused ones
included), and the HLO size (instructions, and their characters without the
``metadata={...}`` that names source files and lines); and, where the path integrates, its
solver steps (and field evaluations). A count more than 5% above its baseline
(``tests/baselines/counted_work.json``) fails, naming the path, the count, the baseline and
the value now. Counts that fall pass: a regenerated baseline records the gain.

Paths: one SA field evaluation, :func:`attnflow.solve` at fixed tolerances, a
:func:`attnflow.phase_diagram` call (the phase engine's compiled step, captured from the call
itself), the stored-step gradient (:class:`attnflow.StoredStepAdjoint`), and
:func:`attnflow.meanfield.solve_density` on S¹ and on S². All float64, small sizes.

**Settings the counts assume** (those of ``tests/conftest.py``): the CPU backend, x64, strict
dtype and rank promotion, four CPU devices, ``XLA_FLAGS=--xla_backend_optimization_level=0``
(it changes the LLVM backend, not the HLO passes: the counts were found the same without it),
and the jax/jaxlib versions recorded in the baseline file. The persistent compilation cache of
the suite does not change them (a program loaded from it is the same program). Under another
backend, jax version or without x64 the test skips (the counts of another compiler are not
comparable); regenerate there. The counts were checked to be identical in separate processes,
with and without the persistent cache.

**Updating the baselines** is a deliberate edit, explained in its commit (which path, which
counts, why)::

    python tests/test_counted_work.py --update

runs this file under pytest (the suite's settings) and rewrites the baseline file.
"""

import functools
import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from compiled_work import hlo_op_counts, phase_step, program_counts

import attnflow as af
from attnflow import meanfield as mf

BASELINES = pathlib.Path(__file__).parent / "baselines" / "counted_work.json"
UPDATE = os.environ.get("ATTNFLOW_UPDATE_COUNTED_WORK") == "1"
GROWTH = 0.05  # a count may grow by at most 5% over its baseline


def _compiled_run(fn, *args):
    """(counts of fn's compiled program, its outputs on args): one compilation."""
    compiled = jax.jit(fn).lower(*args).compile()
    return program_counts(compiled), compiled(*args)


# --- The paths ---------------------------------------------------------------------------------


def sa_field():
    """One evaluation of SelfAttention(β = 2) on n = 16 tokens in d = 4."""
    field = af.SelfAttention(2.0)
    x = af.random_tokens(jr.key(0), 16, 4)
    counts, _ = _compiled_run(lambda x: field(0.0, x), x)
    return counts


def _steps(stats) -> dict[str, int]:
    return {
        "steps accepted": int(stats["num_accepted_steps"]),
        "steps rejected": int(stats["num_rejected_steps"]),
    }


def solve():
    """solve(SelfAttention(1), x0, 5) with n = 8, d = 3 at rtol = 1e-6, atol = 1e-9."""
    field = af.SelfAttention(1.0)
    x0 = af.random_tokens(jr.key(1), 8, 3)

    def run(x0):
        sol = af.solve(field, x0, 5.0, rtol=1e-6, atol=1e-9)
        return sol.ys[-1], sol.stats

    counts, (_, stats) = _compiled_run(run, x0)
    return {**counts, **_steps(stats)}


def phase_diagram():
    """The phase engine's step as phase_diagram compiles it (the log-distance form: n = 6,
    d = 8, β ∈ {1, 4}, 8 realisations, one call), and the steps of its systems."""
    options = dict(n=6, d=8, betas=[1.0, 4.0], ts=[0.0, 5.0, 30.0], realizations=8)
    compiled, pb = phase_step(jr.key(2), **options, progress=False)
    _, stuck, stats = compiled(pb)
    assert int(stuck) == 0
    accepted, rejected = int(np.sum(stats.accepted)), int(np.sum(stats.rejected))
    return {
        **program_counts(compiled),
        "steps accepted": accepted,
        "steps rejected": rejected,
        "slot steps": int(stats.iterations),
        # + one first stage per system
        "field evaluations": 6 * (accepted + rejected) + int(np.size(stats.accepted)),
    }


def stored_step_gradient():
    """d/dβ of a solve's output through StoredStepAdjoint(steps=16), n = 8, d = 3, t1 = 2."""
    x0 = af.random_tokens(jr.key(3), 8, 3)

    def loss(beta):
        sol = af.solve(af.SelfAttention(beta), x0, 2.0, adjoint=af.StoredStepAdjoint(steps=16))
        return jnp.sum(sol.ys[-1][0]), sol.stats

    grad = jax.grad(loss, has_aux=True)
    counts, (_, stats) = _compiled_run(grad, jnp.asarray(1.0))
    return {**counts, **_steps(stats)}


def _density_solve(grid, rho0, beta, t1):
    def run(rho0):
        sol = mf.solve_density(grid, rho0, t1, beta=beta, rtol=1e-6, atol=1e-9)
        return sol.coefficients, sol.stats

    counts, (_, stats) = _compiled_run(run, rho0)
    return {**counts, **_steps(stats)}


def solve_density_circle():
    """meanfield.solve_density on CircleGrid(16), SA, β = 2, t1 = 1."""
    grid = mf.CircleGrid(16)
    return _density_solve(grid, grid.from_values(1 + 0.5 * jnp.cos(grid.angles())), 2.0, 1.0)


def solve_density_sphere():
    """meanfield.solve_density on SphereGrid(8), SA, β = 1, t1 = 0.5 (ρ = 1 + 0.2·√3 z)."""
    grid = mf.SphereGrid(8)
    return _density_solve(grid, jnp.zeros(grid.size).at[0].set(1.0).at[2].set(0.2), 1.0, 0.5)


PATHS = {
    "sa_field": sa_field,
    "solve": solve,
    "phase_diagram": phase_diagram,
    "stored_step_gradient": stored_step_gradient,
    "solve_density_circle": solve_density_circle,
    "solve_density_sphere": solve_density_sphere,
}


# --- Baselines ---------------------------------------------------------------------------------


def settings() -> dict[str, str]:
    """What the counts depend on besides the code: compiler versions, backend, x64."""
    import jaxlib

    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "backend": jax.default_backend(),
        "x64": str(jax.config.jax_enable_x64),
    }


@functools.cache
def _baselines() -> dict:
    return json.loads(BASELINES.read_text()) if BASELINES.exists() else {}


def grown(path: str, baseline: dict, now: dict) -> list[str]:
    """One line per count of ``now`` more than 5% above ``baseline`` (a count the baseline lacks
    is 0 there), each naming the path, the count, the baseline and the value now."""
    lines = []
    for name, value in now.items():
        base = baseline.get(name, 0)
        if value > base * (1 + GROWTH):
            change = f"+{value / base - 1:.2%}" if base else "new"
            lines.append(f"{path}: {name} grew from {base:g} to {value:g} ({change})")
    return lines


def _update(path: str, counts: dict):
    data = json.loads(BASELINES.read_text()) if BASELINES.exists() else {}
    data["settings"] = settings()
    data.setdefault("paths", {})[path] = counts
    BASELINES.parent.mkdir(exist_ok=True)
    BASELINES.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("path", list(PATHS))
def test_counted_work_does_not_grow(path):
    if UPDATE:
        _update(path, PATHS[path]())
        return
    recorded = _baselines()
    assert path in recorded.get("paths", {}), f"{path}: no baseline; run --update"
    if recorded["settings"] != settings():
        pytest.skip(
            f"counts recorded under {recorded['settings']}, this is {settings()}: regenerate "
            "with python tests/test_counted_work.py --update"
        )
    lines = grown(path, recorded["paths"][path], PATHS[path]())
    if lines:
        pytest.fail("counted work grew by more than 5%:\n" + "\n".join(lines), pytrace=False)


def test_the_guard_names_what_grew():
    """The comparison itself: 5% passes, more fails with the path, count, baseline and now; a
    new op kind is growth; falling counts pass. The op counter reads tuple shapes."""
    base = {"op maximum": 12.0, "flops": 100.0}
    assert grown("p", base, {"op maximum": 12, "flops": 105.0}) == []
    assert grown("p", base, {"op maximum": 11, "flops": 50.0}) == []
    assert grown("p", base, {"op maximum": 23, "flops": 100.0, "op sort": 1}) == [
        "p: op maximum grew from 12 to 23 (+91.67%)",
        "p: op sort grew from 0 to 1 (new)",
    ]
    text = (
        "HloModule m\n\n%fused (p: f64[2]) -> f64[2] {\n  %p = f64[2]{0} parameter(0)\n"
        '  ROOT %e = f64[2]{0} exponential(f64[2]{0} %p), metadata={op_name="x"}\n}\n\n'
        "ENTRY %main (a: f64[2]) -> (f64[2], s32[]) {\n  %a = f64[2]{0} parameter(0)\n"
        "  %w = (f64[2]{0}, s32[]) while((f64[2]{0}, s32[]) %t), condition=%c, body=%b\n"
        "  ROOT %f = f64[2]{0} fusion(f64[2]{0} %a), kind=kLoop, calls=%fused\n}\n"
    )
    assert hlo_op_counts(text) == {"parameter": 2, "exponential": 1, "while": 1, "fusion": 1}


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_counted_work.py --update")
    BASELINES.unlink(missing_ok=True)
    env = dict(os.environ, ATTNFLOW_UPDATE_COUNTED_WORK="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-n", "0", __file__]
    sys.exit(subprocess.run(command, env=env, cwd=pathlib.Path(__file__).parents[1]).returncode)
