"""The batched adaptive integrator of the phase engine: DP5(4) steps (:mod:`attnflow._integrators`)
on a slot queue, with the clustered-pair counts taken at the save times from the dense output.

One call integrates the n_b × n_r systems (β = betas[s // n_r], y0[s % n_r]). ``slots``
systems are integrated side by side (:class:`._queue.Slots`), each with its own step size and
error test (scipy's ``RK45`` rule, :mod:`attnflow._integrators._dopri5`), and a slot whose
system is finished is refilled from the queue (``refill_size`` slots at a time), so systems
with few steps do not wait for the slowest one.

Saves: a slot in which no pair changes status (``form.clustered``) between the ends of a step
keeps its count at every save time inside the step (added through a difference array); only
the slots where some pair changes status are gathered, ``slots // 4`` at a time, and counted
on the cubic Hermite interpolant at each save time.

Early stop (``full`` = n(n − 1)): a system whose count reaches ``full`` at the end of an
accepted step stops and counts ``full`` at every later save time. This is exact for V = I and
any attention weights A ≥ 0: m = min_{i≠j} G_ij cannot decrease while m ≥ 0, since at a
minimising pair each term of Ġ_ij = Σ_k A_ik (G_kj − G_ik G_ij) + Σ_k A_jk (G_ki − G_jk G_ij)
is ≥ m (1 − G_ik) ≥ 0, so a fully clustered system (m ≥ 1 − δ) stays so. A system with one
pair (or more) still outside the threshold is integrated on: only the count ``full`` stops it.
"""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._integrators._dopri5 import (
    dopri5_step,
    error_norm,
    hermite_coefficients,
    hermite_value,
    rms,
    step_factor,
)
from ._form import AbstractStateForm
from ._queue import Slots, refill

# Save times handled at once per accepted step (more are handled by further passes).
_SAVE_BLOCK = 4


def count_pairs(close, n):
    """Number of pairs i ≠ j marked in ``close`` (..., n²): a product with ones, which XLA's CPU
    backend runs faster than a boolean reduction (exact in float32 while n² < 2^24)."""
    ones = jnp.ones(close.shape[-1], jnp.float32)
    return (close.astype(jnp.float32) @ ones).astype(jnp.int32) - n


def _expand(mask, y):
    return mask.reshape(mask.shape + (1,) * (y.ndim - mask.ndim))


class Problem(NamedTuple):
    """What one call integrates: n_b × n_r systems of ``form`` and how."""

    form: AbstractStateForm
    y0: Array
    """Flat initial states (n_r, n·m) (padded rows beyond n_r are not integrated)."""
    params: Any
    """Per-realisation arrays gathered into the slots (the systems' ``params`` of the rate)."""
    betas: Array
    ts: Array
    n_r: Any
    n_b: Any
    rtol: Array
    atol: Array
    max_steps: Array
    full: int | None
    """Count of a fully clustered system (early stop), or None."""
    first_step: Array | None
    """The first trial step of every system; None: 0.1 RMS(y/s)/RMS(F(y)/s) in [1e-6, 1],
    s = atol + rtol|y|."""


class Statistics(NamedTuple):
    """Work done by one call: per system (betas, realisations) steps, and loop iterations."""

    accepted: Array
    rejected: Array
    iterations: Array
    """Passes of the slot loop (each evaluates the field 6 times in every slot)."""


class _Trial(NamedTuple):
    """One step tried in every slot."""

    h: Array
    y_new: Array
    f_new: Array
    accept: Array
    factor: Array
    t_new: Array


class _Dense(NamedTuple):
    """Per-slot data of the dense output of the step just accepted."""

    y: Array
    coeffs: list
    t: Array
    h: Array
    t_new: Array
    b: Array
    ptr: Array


def _rates(pb: Problem, y, beta, params):
    form = pb.form
    states = y.reshape(y.shape[:1] + form.shape)
    return jax.vmap(form.rate)(states, beta, params).reshape(y.shape)


def _count(pb: Problem, y):
    return count_pairs(pb.form.clustered(y), pb.form.shape[0])


def _initial_step(pb: Problem, y, f):
    if pb.first_step is not None:
        return jnp.broadcast_to(pb.first_step, y.shape[:1]).astype(y.dtype)
    scale = pb.atol + pb.rtol * jnp.abs(y)
    h = 0.1 * rms(y / scale) / jnp.maximum(rms(f / scale), 1e-10)
    return jnp.clip(h, 1e-6, 1.0).astype(y.dtype)


def _load(pb: Problem, ids, out):
    """Slot contents for systems ``ids`` (ids ≥ n_b n_r give inactive slots); their counts at
    the save times ≤ 0 are added to ``out``."""
    T = pb.ts.shape[0]
    ok = ids < pb.n_b * pb.n_r
    ids = jnp.where(ok, ids, 0)
    b, r = ids // pb.n_r, ids % pb.n_r
    y = pb.y0[r]
    beta = pb.betas[b]
    p = jax.tree.map(lambda a: a[r], pb.params)
    f = _rates(pb, y, beta, p)
    at_zero = jnp.sum(pb.ts <= 0, dtype=jnp.int32)
    before = ok[:, None] & (jnp.arange(T + 1, dtype=jnp.int32) < at_zero)[None]
    out = out.at[b].add(jnp.where(before, _count(pb, y)[:, None], 0))
    zeros = jnp.zeros(ids.shape, jnp.int32)
    return out, Slots(
        active=ok & (at_zero < T),
        b=b,
        r=r,
        beta=beta,
        params=p,
        y=y,
        f=f,
        h=_initial_step(pb, y, f),
        t=jnp.zeros(ids.shape, y.dtype),
        ptr=jnp.full(ids.shape, at_zero),
        accepted=zeros,
        rejected=zeros,
        after_rejection=jnp.zeros(ids.shape, bool),
    )


def _trial(pb: Problem, st: Slots) -> _Trial:
    """One DP5(4) step in every slot (the last one shortened to end at ts[-1])."""
    t_end = pb.ts[-1]
    last = st.h >= t_end - st.t
    h = jnp.where(last, t_end - st.t, st.h)
    y_new, f_new, err = dopri5_step(
        lambda z: _rates(pb, z, st.beta, st.params), st.y, st.f, _expand(h, st.y)
    )
    norm = error_norm(err, st.y, y_new, pb.rtol, pb.atol)
    return _Trial(
        h=h,
        y_new=y_new,
        f_new=f_new,
        accept=(norm <= 1) & st.active,
        factor=step_factor(norm, after_rejection=st.after_rejection),
        t_new=jnp.where(last, t_end, st.t + h),
    )


def _save_block(pb: Problem, lane: _Dense, valid, state):
    """Counts at the next ``_SAVE_BLOCK`` save times inside the step, for gathered slots."""
    out, ptr = state
    T = pb.ts.shape[0]
    index = ptr[:, None] + jnp.arange(_SAVE_BLOCK, dtype=ptr.dtype)[None]
    clipped = jnp.minimum(index, T - 1)
    t_save = pb.ts[clipped]
    todo = valid[:, None] & (index < T) & (t_save <= lane.t_new[:, None])
    theta = (t_save - lane.t[:, None]) / jnp.where(lane.h > 0, lane.h, 1)[:, None]
    theta = theta[..., None]
    value = _count(pb, hermite_value(lane.y[:, None], [c[:, None] for c in lane.coeffs], theta))
    out = out.at[lane.b[:, None], clipped].add(jnp.where(todo, value, 0))
    return out, ptr + jnp.sum(todo, axis=1, dtype=ptr.dtype)


def _pending(pb: Problem, lane: _Dense, valid, state):
    ptr = state[1]
    T = pb.ts.shape[0]
    return jnp.any(valid & (ptr < T) & (pb.ts[jnp.minimum(ptr, T - 1)] <= lane.t_new))


def _dense_round(pb: Problem, dense: _Dense, group: int, carry):
    """Save times of up to ``group`` of the slots still marked in ``todo``, on the interpolant."""
    out, todo = carry
    W = todo.shape[0]
    lanes = jnp.nonzero(todo, size=group, fill_value=W)[0]
    valid = lanes < W
    lane = jax.tree.map(lambda a: a[jnp.minimum(lanes, W - 1)], dense)
    out, _ = jax.lax.while_loop(
        functools.partial(_pending, pb, lane, valid),
        functools.partial(_save_block, pb, lane, valid),
        (out, lane.ptr),
    )
    return out, todo.at[lanes].set(False, mode="drop")


def _save(pb: Problem, st: Slots, trial: _Trial, ptr_new, out, tail, group: int):
    """Counts at the save times in (t, t_new] of every accepted step: held (difference array
    ``tail``) where no pair changes status, interpolated where some pair does."""
    count_new = _count(pb, trial.y_new)
    changed = jnp.any(pb.form.clustered(st.y) != pb.form.clustered(trial.y_new), axis=-1)
    saving = trial.accept & (ptr_new > st.ptr)
    moving, steady = saving & changed, saving & ~changed
    tail = tail.at[st.b, st.ptr].add(jnp.where(steady, count_new, 0))
    tail = tail.at[st.b, ptr_new].add(jnp.where(steady, -count_new, 0))
    hx = _expand(trial.h, st.y)
    coeffs = hermite_coefficients(st.y, st.f, trial.y_new, trial.f_new, hx)
    dense = _Dense(st.y, coeffs, st.t, trial.h, trial.t_new, st.b, st.ptr)
    out, _ = jax.lax.while_loop(
        lambda c: jnp.any(c[1]),
        functools.partial(_dense_round, pb, dense, group),
        (out, moving),
    )
    return out, tail, count_new


def _advance(pb: Problem, st: Slots, trial: _Trial, ptr_new, count_new, tail, stats):
    """The slots after the step: finished systems (reached ts[-1], fully clustered, or out of
    steps) leave their slot and their step counts go to ``stats``."""
    active, accept = st.active, trial.accept
    accepted = st.accepted + accept.astype(jnp.int32)
    rejected = st.rejected + (active & ~accept).astype(jnp.int32)
    reached = accept & (trial.t_new >= pb.ts[-1])
    if pb.full is None:
        clustered = jnp.zeros_like(reached)
    else:
        clustered = accept & ~reached & (count_new >= pb.full)
        tail = tail.at[st.b, ptr_new].add(jnp.where(clustered, pb.full, 0))
    stuck = active & ~reached & ~clustered & (accepted + rejected >= pb.max_steps)
    done = reached | clustered | stuck
    stats = stats.at[st.b, st.r].add(
        jnp.where(done[:, None], jnp.stack([accepted, rejected], axis=-1), 0)
    )
    st = st._replace(
        active=active & ~done,
        y=jnp.where(_expand(accept, st.y), trial.y_new, st.y),
        f=jnp.where(_expand(accept, st.f), trial.f_new, st.f),
        t=jnp.where(accept, trial.t_new, st.t),
        h=(trial.h * trial.factor).astype(st.h.dtype),
        ptr=ptr_new,
        accepted=accepted,
        rejected=rejected,
        after_rejection=jnp.where(active, ~accept, st.after_rejection),
    )
    return st, tail, stats, jnp.sum(stuck, dtype=jnp.int32)


def _fill(pb: Problem, refill_size: int, args):
    st, out, loaded = args
    ids = loaded + jnp.arange(refill_size, dtype=loaded.dtype)
    out, new = _load(pb, ids, out)
    st, placed = refill(st, new, ids < pb.n_b * pb.n_r)
    return st, out, loaded + placed


def _body(pb: Problem, group: int, refill_size: int, carry):
    st, out, tail, loaded, failed, stats, iterations = carry
    trial = _trial(pb, st)
    ptr_new = jnp.searchsorted(pb.ts, trial.t_new, side="right").astype(st.ptr.dtype)
    ptr_new = jnp.where(trial.accept, ptr_new, st.ptr)
    out, tail, count_new = _save(pb, st, trial, ptr_new, out, tail, group)
    st, tail, stats, stuck = _advance(pb, st, trial, ptr_new, count_new, tail, stats)
    remaining = pb.n_b * pb.n_r - loaded
    n_idle = jnp.sum(~st.active, dtype=jnp.int32)
    go = (remaining > 0) & (n_idle >= jnp.minimum(refill_size, remaining))
    st, out, loaded = jax.lax.cond(
        go, functools.partial(_fill, pb, refill_size), lambda args: args, (st, out, loaded)
    )
    return st, out, tail, loaded, failed + stuck, stats, iterations + 1


def integrate(pb: Problem, *, slots: int, refill_size: int):
    """Integrate the systems of ``pb`` on ``slots`` lanes (see the module docstring).

    Returns the counts at ``pb.ts`` summed over realisations (len(betas), T), the number of
    systems that hit ``max_steps`` and the :class:`Statistics` of the call.
    """
    T = pb.ts.shape[0]
    total = pb.n_b * pb.n_r
    out = jnp.zeros((pb.betas.shape[0], T + 1), jnp.int32)
    # Systems that cluster fully add `full` from their stopping index on: a cumulative sum.
    tail = jnp.zeros((pb.betas.shape[0], T + 1), jnp.int32)
    stats = jnp.zeros((pb.betas.shape[0], pb.y0.shape[0], 2), jnp.int32)
    out, st = _load(pb, jnp.arange(slots, dtype=jnp.int32), out)
    loaded = jnp.minimum(slots, total).astype(jnp.int32)
    carry = (st, out, tail, loaded, jnp.int32(0), stats, jnp.int32(0))
    _, out, tail, _, failed, stats, iterations = jax.lax.while_loop(
        lambda c: jnp.any(c[0].active) | (c[3] < total),
        functools.partial(_body, pb, max(1, slots // 4), refill_size),
        carry,
    )
    statistics = Statistics(stats[..., 0], stats[..., 1], iterations)
    return (out + jnp.cumsum(tail, axis=1))[:, :T], failed, statistics
