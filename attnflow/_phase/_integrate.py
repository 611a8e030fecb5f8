"""The batched adaptive integrator of the phase engine: DP5(4) steps on a slot queue, with the
clustered-pair counts taken at the save times from the dense output."""

import jax
import jax.numpy as jnp

from ._dopri5 import dopri5_step, hermite_coefficients, hermite_value
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


def integrate(
    form: AbstractStateForm,
    y0,
    params,
    betas,
    ts,
    n_r,
    n_b,
    rtol,
    atol,
    max_steps,
    *,
    slots,
    refill_size,
    full,
):
    """Adaptive DP5(4) for the n_b × n_r systems (β = betas[s // n_r], y0[s % n_r]) of one call.

    ``slots`` systems are integrated side by side (:class:`Slots`), each with its own step
    size and error test, and a slot whose system is finished is refilled from the queue
    (``refill_size`` slots at a time), so systems with few steps do not wait for the slowest
    one. ``y0`` holds flat initial states (n_r, n·m) of ``form``; ``params`` holds
    per-realisation arrays gathered into the slots (the systems' own ``params`` of
    ``form.rate``). Returns the counts at ``ts`` summed over realisations (len(betas), T) and
    the number of systems that hit ``max_steps``.

    Error control, per system: the RMS over its state of err / (atol + rtol max(|y|, |y_new|))
    must be ≤ 1; the step grows by 0.9 err_norm^(−1/5), clipped to [0.2, 10] (at most 1 after
    a rejection).

    Early stop: a system whose count reaches ``full`` stops and counts ``full`` at every
    later save time. This is exact for V = I and any attention weights A ≥ 0:
    m = min_{i≠j} G_ij cannot decrease while m ≥ 0, since at a minimising pair each term of
    Ġ_ij = Σ_k A_ik (G_kj − G_ik G_ij) + Σ_k A_jk (G_ki − G_jk G_ij) is ≥ m (1 − G_ik) ≥ 0, so a
    fully clustered system (m ≥ 1 − δ) stays so. ``full=None`` disables this.

    Saves: a slot in which no pair changes status (``form.clustered``) between the ends of a
    step keeps its count at every save time inside the step (added through a difference
    array); only the slots where some pair changes status are gathered, ``slots // 4`` at a
    time, and counted on the cubic Hermite interpolant at each save time.
    """
    dtype = y0.dtype
    T = ts.shape[0]
    t_end = ts[-1]
    total = n_b * n_r
    n = form.shape[0]
    close = form.clustered

    def rates(y, beta, p):
        return jax.vmap(form.rate)(y.reshape(y.shape[:1] + form.shape), beta, p).reshape(y.shape)

    def count(y):
        return count_pairs(close(y), n)

    at_zero = jnp.sum(ts <= 0, dtype=jnp.int32)
    grid = jnp.arange(T + 1)
    W = slots

    def rms(x):
        return jnp.sqrt(((x * x) @ jnp.ones(x.shape[-1], x.dtype)) / x.shape[-1])

    def load(ids, out):
        """Initial slot contents for systems ``ids`` (ids ≥ total give inactive slots)."""
        ok = ids < total
        ids = jnp.where(ok, ids, 0)
        b, r = ids // n_r, ids % n_r
        y = y0[r]
        beta = betas[b]
        p = jax.tree.map(lambda a: a[r], params)
        f = rates(y, beta, p)
        scale = atol + rtol * jnp.abs(y)
        h = 0.1 * rms(y / scale) / jnp.maximum(rms(f / scale), 1e-10)
        c0 = count(y)
        out = out.at[b].add(jnp.where(ok[:, None] & (grid < at_zero)[None], c0[:, None], 0))
        return out, Slots(
            active=ok & (at_zero < T),
            b=b,
            beta=beta,
            params=p,
            y=y,
            f=f,
            h=jnp.clip(h, 1e-6, 1.0).astype(dtype),
            t=jnp.zeros(ids.shape, dtype),
            ptr=jnp.full(ids.shape, at_zero),
            steps=jnp.zeros(ids.shape, jnp.int32),
        )

    out = jnp.zeros((betas.shape[0], T + 1), jnp.int32)
    # Systems that cluster fully add `full` from their stopping index on: a cumulative sum.
    tail = jnp.zeros((betas.shape[0], T + 1), jnp.int32)
    out, st = load(jnp.arange(W), out)
    loaded = jnp.minimum(W, total).astype(jnp.int32)
    offsets = jnp.arange(_SAVE_BLOCK)
    group = max(1, W // 4)

    def cond(carry):
        st, _, _, loaded, _ = carry
        return jnp.any(st.active) | (loaded < total)

    def body(carry):
        st, out, tail, loaded, failed = carry
        active, t, y, f = st.active, st.t, st.y, st.f
        last = st.h >= t_end - t
        h = jnp.where(last, t_end - t, st.h)
        hx = _expand(h, y)
        y_new, f_new, err = dopri5_step(lambda z: rates(z, st.beta, st.params), y, f, hx)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        err_norm = rms(err / scale)
        # A trial step far too long can overflow; treat it as a (strongly) rejected step.
        err_norm = jnp.where(jnp.isfinite(err_norm), err_norm, jnp.inf)
        accept = (err_norm <= 1) & active
        growth = jnp.where(err_norm == 0, 10.0, 0.9 * err_norm ** (-0.2))
        growth = jnp.clip(growth, 0.2, jnp.where(err_norm <= 1, 10.0, 1.0))
        t_new = jnp.where(last, t_end, t + h)
        # Dense output from (y, f, y_new, f_new), all at hand.
        coeffs = hermite_coefficients(y, f, y_new, f_new, hx)

        status, status_new = close(y), close(y_new)
        count_new = count_pairs(status_new, n)
        ptr = st.ptr
        ptr_new = jnp.where(accept, jnp.searchsorted(ts, t_new, side="right"), ptr)
        ptr_new = ptr_new.astype(ptr.dtype)
        moving = accept & jnp.any(status != status_new, axis=-1) & (ptr_new > ptr)
        steady = accept & ~moving & (ptr_new > ptr)
        # Steady slots: count_new at the save indices ptr … ptr_new − 1 (a difference array).
        tail = tail.at[st.b, ptr].add(jnp.where(steady, count_new, 0))
        tail = tail.at[st.b, ptr_new].add(jnp.where(steady, -count_new, 0))

        def dense_round(carry):
            out, todo_slots = carry
            lanes = jnp.nonzero(todo_slots, size=group, fill_value=W)[0]
            valid = lanes < W
            g = jnp.minimum(lanes, W - 1)
            y_g, c_g = y[g], [c[g] for c in coeffs]
            t_g, h_g, t_new_g, b_g = t[g], h[g], t_new[g], st.b[g]

            def pending(ptr):
                return valid & (ptr < T) & (ts[jnp.minimum(ptr, T - 1)] <= t_new_g)

            def save(state):
                out, ptr = state
                index = ptr[:, None] + offsets[None]
                clipped = jnp.minimum(index, T - 1)
                t_save = ts[clipped]
                todo = valid[:, None] & (index < T) & (t_save <= t_new_g[:, None])
                theta = (t_save - t_g[:, None]) / jnp.where(h_g > 0, h_g, 1)[:, None]
                theta = theta[..., None]
                value = count(hermite_value(y_g[:, None], [c[:, None] for c in c_g], theta))
                out = out.at[b_g[:, None], clipped].add(jnp.where(todo, value, 0))
                return out, ptr + jnp.sum(todo, axis=1, dtype=ptr.dtype)

            out, _ = jax.lax.while_loop(lambda s: jnp.any(pending(s[1])), save, (out, ptr[g]))
            return out, todo_slots.at[lanes].set(False, mode="drop")

        out, _ = jax.lax.while_loop(lambda c: jnp.any(c[1]), dense_round, (out, moving))
        ptr = ptr_new
        steps = st.steps + active.astype(jnp.int32)
        reached = accept & (t_new >= t_end)
        clustered = accept & ~reached
        if full is None:
            clustered = clustered & False
        else:
            clustered = clustered & (count_new >= full)
            tail = tail.at[st.b, ptr].add(jnp.where(clustered, full, 0))
        stuck = active & ~reached & ~clustered & (steps >= max_steps)
        st = st._replace(
            active=active & ~(reached | clustered | stuck),
            y=jnp.where(_expand(accept, y), y_new, y),
            f=jnp.where(_expand(accept, f), f_new, f),
            t=jnp.where(accept, t_new, t),
            h=(h * growth).astype(dtype),
            ptr=ptr,
            steps=steps,
        )
        failed = failed + jnp.sum(stuck, dtype=jnp.int32)

        def fill(args):
            st, out, loaded = args
            ids = loaded + jnp.arange(refill_size)
            out, new = load(ids, out)
            st, placed = refill(st, new, ids < total)
            return st, out, loaded + placed

        n_idle = jnp.sum(~st.active, dtype=jnp.int32)
        remaining = total - loaded
        go = (remaining > 0) & (n_idle >= jnp.minimum(refill_size, remaining))
        st, out, loaded = jax.lax.cond(go, fill, lambda args: args, (st, out, loaded))
        return st, out, tail, loaded, failed

    carry = (st, out, tail, loaded, jnp.int32(0))
    _, out, tail, _, failed = jax.lax.while_loop(cond, body, carry)
    return (out + jnp.cumsum(tail, axis=1))[:, :T], failed
