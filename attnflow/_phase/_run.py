"""Dispatch of a phase diagram's systems: the realisations × β grid cut into calls of one compiled
shape, spread over the local devices, and the exact integer counts summed (on the host after
each call, or on the device and fetched once: :mod:`._settings`)."""

import collections
import contextlib
import functools
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._check import failed_solves_message
from .._integrators._dopri5 import EVALUATIONS_PER_STEP
from .._integrators._tolerance import floor_tolerances
from .._progress import Progress
from ._form import AbstractStateForm
from ._integrate import Problem, integrate
from ._settings import EngineSettings


class PhaseDiagramResult(eqx.Module):
    """A phase diagram with the work its integration took (:func:`attnflow.phase_diagram_result`).

    Every system (β = betas[b], realisation r) is integrated with its own adaptive DP5(4)
    step (scipy's ``RK45`` rule); a step costs 6 field evaluations, and each system one more
    for its first stage, so ``evaluations = 6 (accepted + rejected) + 1`` per system.
    ``slot_steps`` counts the steps of all slots of all calls, idle ones included (the work a
    device does: ``6 slot_steps`` batched evaluations).
    """

    probability: Float[Array, "betas ts"]
    """P[b, k], the clustered fraction of pairs (what :func:`attnflow.phase_diagram` returns)."""
    accepted: Int[Array, "betas realizations"]
    """Accepted steps of each system (up to its early stop)."""
    rejected: Int[Array, "betas realizations"]
    """Rejected steps of each system."""
    slot_steps: int = eqx.field(static=True)
    """Steps of all slots (systems in flight) of all calls."""

    @property
    def evaluations(self) -> Int[Array, "betas realizations"]:
        """Field evaluations of each system, 6 (accepted + rejected) + 1."""
        return EVALUATIONS_PER_STEP * (self.accepted + self.rejected) + 1


@functools.partial(jax.jit, static_argnames=("slots", "refill"))
def _solve_call(pb: Problem, *, slots, refill):
    """Counts (len(betas), T) summed over realisations, the number of systems out of steps and
    the call's statistics, for initial states pb.y0 (R, n, m) of ``pb.form``."""
    # The integrator works on flat states (slots, n·m): XLA's CPU loops over a small minor
    # dimension (m = 32, or 2 on the circle) run several times slower than over n·m.
    pb = pb._replace(y0=pb.y0.reshape(pb.y0.shape[0], -1))
    return integrate(pb, slots=slots, refill_size=refill)


class _Task(NamedTuple):
    """One call: realisations ``rows`` (the first n_r real, the rest padding) × β ``cols``."""

    rows: np.ndarray
    n_r: int
    cols: np.ndarray
    n_b: int


def _tasks(R, B, chunk, block):
    """Calls of one shape: the last chunk and block are padded by repetition."""
    for c in range(math.ceil(R / chunk)):
        rows = np.minimum(np.arange(c * chunk, (c + 1) * chunk), R - 1)
        for b in range(math.ceil(B / block)):
            cols = np.minimum(np.arange(b * block, (b + 1) * block), B - 1)
            yield _Task(rows, min(chunk, R - c * chunk), cols, min(block, B - b * block))


class _Sums:
    """Exact sums of the calls' outputs: counts in int64 on the host, or int32 on the device
    (exact while R n(n − 1) < 2³¹, which the caller checks)."""

    def __init__(self, n_betas, T, R, on_device):
        self.on_device = on_device
        self.counts = {} if on_device else np.zeros((n_betas, T), np.int64)
        self.steps = np.zeros((2, n_betas, R), np.int64)
        self.pending = []
        self.failed = 0
        self.slot_steps = 0

    def add(self, task: _Task, result, device):
        out, stuck, stats = result
        if self.on_device:
            padded = jnp.zeros((self.steps.shape[1],) + out.shape[1:], jnp.int32)
            part = padded.at[task.cols[: task.n_b]].add(out[: task.n_b])
            self.counts[device] = self.counts.get(device, 0) + part
            self.pending.append((task, stuck, stats))
            return
        self.counts[task.cols[: task.n_b]] += np.asarray(out)[: task.n_b]
        self._fetch(task, stuck, stats)

    def _fetch(self, task, stuck, stats):
        self.failed += int(stuck)
        rows = task.rows[: task.n_r]
        for i, a in enumerate((stats.accepted, stats.rejected)):
            self.steps[i][np.ix_(task.cols[: task.n_b], rows)] = np.asarray(a)[
                : task.n_b, : task.n_r
            ]
        self.slot_steps += int(stats.iterations)

    def finish(self):
        if self.on_device:
            counts = sum(np.asarray(c, np.int64) for c in self.counts.values())
            for task, stuck, stats in self.pending:
                self._fetch(task, stuck, stats)
            self.counts = counts
        return self.counts


def _dispatch(tasks, call, sums: _Sums, bar: Progress, in_flight_max: int):
    """Dispatch every call (``call(i, task)`` → (result, device)), keeping at most
    ``in_flight_max`` un-summed (0: sum each at once, on its device), and return the counts."""
    in_flight = collections.deque()
    for i, task in enumerate(tasks):
        # jit compiles on the calling thread before it dispatches: the first call is the
        # compilation phase.
        with bar.compiling() if i == 0 else contextlib.nullcontext():
            result, dev = call(i, task)
        in_flight.append((task, result, dev))
        while len(in_flight) > max(in_flight_max - 1, 0):
            done, result_done, dev_done = in_flight.popleft()
            sums.add(done, result_done, dev_done)
            bar.update(done.n_r * done.n_b)
    while in_flight:
        done, result_done, dev_done = in_flight.popleft()
        sums.add(done, result_done, dev_done)
        bar.update(done.n_r * done.n_b)
    return sums.finish()


class Engine(NamedTuple):
    """What a phase diagram is integrated with (besides the state form and its systems)."""

    settings: EngineSettings
    rtol: float
    atol: float
    max_steps: int
    first_step: float | None
    progress: bool


def run(
    y0, form: AbstractStateForm, params: dict[str, Any], betas, ts, *, engine: Engine, n, early_stop
):
    """Integrate every (β, realisation) system and sum the exact counts.

    ``y0``: (R, n, m) initial states of ``form``; ``params``: per-realisation arrays (R, …),
    the systems' own parameters of ``form.rate``. Calls are dispatched asynchronously
    round-robin over ``jax.local_devices()`` (with several CPU devices, e.g.
    ``jax_num_cpu_devices``, calls run in parallel on separate cores). Returns a
    :class:`PhaseDiagramResult`.
    """
    R, dtype, cfg = y0.shape[0], y0.dtype, engine.settings
    chunk, block = min(cfg.chunk_size, R), min(cfg.beta_block, len(betas))
    # Few systems per call: fewer slots (the queue refills 1/8 of them at a time).
    width = min(cfg.slots, chunk * block)
    rtol, atol = floor_tolerances(engine.rtol, engine.atol, dtype)
    first = None if engine.first_step is None else jnp.asarray(engine.first_step, dtype)
    devices = jax.local_devices()
    shared = {
        dev: jax.device_put(
            (
                form,
                jnp.asarray(ts, dtype),
                jnp.asarray(rtol, dtype),
                jnp.asarray(atol, dtype),
                jnp.asarray(engine.max_steps, jnp.int32),
                first,
            ),
            dev,
        )
        for dev in devices
    }
    on_device = cfg.accumulate == "device" and R * n * (n - 1) < 2**31
    sums = _Sums(len(betas), len(ts), R, on_device)
    tasks = list(_tasks(R, len(betas), chunk, block))
    full = n * (n - 1) if early_stop else None

    def call(i, task):
        dev = devices[i % len(devices)]
        form_d, ts_d, rtol_d, atol_d, steps_d, first_d = shared[dev]
        y_c, betas_c, params_c = jax.device_put(
            (
                y0[task.rows],
                jnp.asarray(betas[task.cols], dtype),
                {name: a[task.rows] for name, a in params.items()},
            ),
            dev,
        )
        pb = Problem(
            form_d,
            y_c,
            params_c,
            betas_c,
            ts_d,
            task.n_r,
            task.n_b,
            rtol_d,
            atol_d,
            steps_d,
            full,
            first_d,
        )
        return _solve_call(pb, slots=width, refill=max(1, width // 8)), dev

    with Progress("phase diagram", R * len(betas), "systems", enabled=engine.progress) as bar:
        counts = _dispatch(tasks, call, sums, bar, 0 if on_device else 2 * len(devices))
    if sums.failed:
        raise RuntimeError(
            failed_solves_message(
                "phase diagram",
                sums.failed,
                R * len(betas),
                ts[-1],
                engine.max_steps,
                normalization=getattr(form, "normalization", None),
                dtype=dtype,
            )
        )
    return PhaseDiagramResult(
        probability=jnp.asarray(counts / (R * n * (n - 1))),
        accepted=jnp.asarray(sums.steps[0]),
        rejected=jnp.asarray(sums.steps[1]),
        slot_steps=sums.slot_steps * width,
    )
