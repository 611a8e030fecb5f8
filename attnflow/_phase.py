"""Phase diagrams: P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) on a (β, t) grid (paper Fig. 3 and Fig. 5).

The engine integrates many independent systems with a batched Dormand–Prince 5(4) scheme (the
tableau of scipy's ``RK45``; cubic Hermite output between steps), each system with its own adaptive
step size and error control, so a system's trajectory does not depend on which other systems
share its batch: in float64 results are bitwise invariant to ``chunk_size``, ``beta_block``
and ``slots``; in float32 XLA may round a batched product differently for another batch shape,
which moved P by at most 9e-4 (a d = 32 sample of 64 realisations × 9 β, below the
integration error of 2e-3). The
systems of one compiled call form a queue: ``slots`` of them are integrated side by side and a
slot whose system has finished (reached the last save time, or clustered completely) is
refilled from the queue, so cheap systems (small β, early clustering) never wait for expensive
ones. Statistics are computed only at the save times, from the dense output, and only in the
slots where some pair changes status during the step. Three state representations, chosen
automatically:

- V = I, Q = K = I: the log-distances L_ij = log D_ij of the distance matrix
  D = 1 − G = (|x_i − x_j|²/2)_ij (n × n), whose flow is closed. From
  Ġ = A G + (A G)ᵀ − (s_i + s_j) G, s_i = (A G)_ii, A = softmax(βG) (or e^{βG}/n), and G = 1 − D
  (with a_i = Σ_k A_ik, r_i = (AD)_ii, so (AG)_ij = a_i − (AD)_ij, s_i = a_i − r_i):

      Ḋ_ij = (AD)_ij + (AD)_ji − r_i − r_j − (a_i + a_j − r_i − r_j) D_ij,  A ∝ exp(−βD),

  and L̇_ij = Ḋ_ij / D_ij. Inside a cluster D_ij decays like e^{−2t}: a straight line in L,
  which the Runge–Kutta steps follow exactly, where in D it held the step size to the
  stability limit (36% fewer steps on a Fig. 3 panel). The threshold test
  ⟨x_i, x_j⟩ ≥ 1 − δ becomes L_ij ≤ log δ, without the cancellation of 1 − G_ij, and the
  error control is relative in D_ij. The diagonal holds a constant (exp → 0 exactly), so
  diag(D) = 0 (|x_i| = 1) holds exactly in floating point. For uniform tokens D is sampled
  from the Bartlett factor of an n × d Gaussian matrix, so the cost does not depend on d. Used
  for every d ≥ 3 (D itself when δ is too close to the rounding level for logarithms, below
  about 2e-4 in float32); on the circle (d = 2), where the n × n form drifts off the rank-2
  Gram matrices, the plain coordinates are used instead.
- V = I, any Q, K: coordinates in an orthonormal basis of span{x_j(0)} (dimension min(n, d)),
  with the bilinear form compressed to Uᵀ(QᵀK)U; exact, because ẋ_i ∈ span{x_j}.
- general V: coordinates in R^d.
"""

import collections
import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from ._check import check_positive_scalar
from ._ensembles import AttentionEnsemble

# Dormand–Prince 5(4) (scipy.integrate.RK45): stage matrix, weights and error weights. The
# fields here are autonomous, so the nodes c_s are not needed.
_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
)
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_E = (-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40)


def _unit_rows(Y):
    return Y / jnp.linalg.norm(Y, axis=-1, keepdims=True)


def _distance_field(D, beta, normalization):
    """Ḋ for D = 1 − G = (|x_i − x_j|²/2)_ij, Q = K = V = I (derivation in the module docstring).

    With A = softmax(−βD) (or e^{β − βD}/n), a_i = Σ_k A_ik and r_i = (A D)_ii:
    Ḋ_ij = (AD)_ij + (AD)_ji − r_i − r_j − (a_i + a_j − r_i − r_j) D_ij. Since r = diag(AD)
    exactly, Ḋ_ii = 0 in floating point: diag(D) = 0 (|x_i| = 1) is kept exactly.
    """
    # D ≥ 0 so exp(−βD) ∈ (0, 1] with E_ii = 1: no overflow and every row sum ≥ 1.
    E = jnp.exp(-beta * D)
    if normalization == "softmax":
        AD = (E @ D) / jnp.sum(E, axis=-1)[:, None]
        a = 1
    else:
        A = E * (jnp.exp(beta) / D.shape[0])
        AD = A @ D
        a = jnp.sum(A, axis=-1)
    r = jnp.diagonal(AD)
    u = a - r
    return AD + AD.T - (r[:, None] + r[None, :]) - (u[:, None] + u[None, :]) * D


def _log_distance_field(L, beta, normalization, floor):
    """L̇ for L_ij = log D_ij: L̇_ij = Ḋ_ij / D_ij (Ḋ from :func:`_distance_field`).

    The diagonal holds ``_LOG_ZERO``: exp gives D_ii = 0 exactly, and Ḋ_ii = 0 exactly, so it
    stays. Inside a cluster D_ij decays like e^{−2t}; in log form that decay is a straight line,
    which an explicit Runge–Kutta step follows exactly, so the step size is no longer held back
    by the contraction of clustered pairs. Ḋ_ij = O(D_ij) is computed as a difference of O(1)
    terms, with a rounding error ≈ eps; dividing by max(D_ij, floor) (eps ≪ floor ≤ δ/16, see
    :func:`_log_floor`) keeps the rate of pairs far inside the threshold bounded: below the
    floor a pair moves more slowly than the true flow, so it can only stay clustered longer,
    and only once it is already 16× (float32, δ = 1e-3: 83×) closer than δ.
    """
    D = jnp.exp(L)
    return _distance_field(D, beta, normalization) / jnp.maximum(D, floor)


def _coords_field(Y, beta, B, V, normalization):
    """ẏ_i = P^⊥_{ŷ_i}(Σ_j a_ij V ŷ_j), a_ij ∝ exp(β ŷ_iᵀ B ŷ_j), at the unit rows ŷ_i."""
    Y = _unit_rows(Y)
    logits = beta * ((Y if B is None else Y @ B) @ Y.T)
    row_max = jnp.max(logits, axis=-1, keepdims=True)
    E = jnp.exp(logits - row_max)
    if normalization == "softmax":
        A = E / jnp.sum(E, axis=-1, keepdims=True)
    else:
        A = E * (jnp.exp(row_max) / Y.shape[0])
    out = A @ Y
    if V is not None:
        out = out @ V.T
    return out - jnp.sum(out * Y, axis=-1, keepdims=True) * Y


def _close(state, shape, form, delta):
    """Which ordered pairs have ⟨x_i, x_j⟩ ≥ 1 − δ: flat states (..., n·m) → (..., n²) booleans.

    The diagonal counts as clustered (i = j); subtract n for the number of pairs i ≠ j.
    """
    n = shape[0]
    if form == "dist":
        # D_ij = 1 − ⟨x_i, x_j⟩ is stored directly: no cancellation near the threshold.
        return state <= delta
    if form == "logdist":
        # L_ii = _LOG_ZERO ≤ log δ: the diagonal is marked.
        return state <= jnp.log(delta)
    Y = _unit_rows(state.reshape(state.shape[:-1] + shape))
    gram = Y @ jnp.swapaxes(Y, -1, -2)
    close = (gram >= 1 - delta) | jnp.broadcast_to(jnp.eye(n, dtype=bool), gram.shape)
    return close.reshape(state.shape[:-1] + (n * n,))


def _count(close, n):
    """Number of pairs i ≠ j marked in ``close`` (..., n²): a product with ones, which XLA's CPU
    backend runs faster than a boolean reduction (exact in float32 while n² < 2^24)."""
    ones = jnp.ones(close.shape[-1], jnp.float32)
    return (close.astype(jnp.float32) @ ones).astype(jnp.int32) - n


def _expand(mask, y):
    return mask.reshape(mask.shape + (1,) * (y.ndim - mask.ndim))


# Save times handled at once per accepted step (more are handled by further passes).
_SAVE_BLOCK = 4


def _integrate(
    field, close, y0, params, betas, ts, n_r, n_b, rtol, atol, max_steps, *, slots, refill, full
):
    """Adaptive DP5(4) for the n_b × n_r systems (β = betas[s // n_r], y0[s % n_r]) of one call.

    ``slots`` systems are integrated side by side, each with its own step size and error test,
    and a slot whose system is finished is refilled from the queue (``refill`` slots at a
    time), so systems with few steps do not wait for the slowest one. ``field(y, beta, p)`` and
    ``close(y)`` (per-pair clustered flags, see :func:`_close`) act on a batch of flat states
    (slots, n·m); ``params`` holds per-realisation arrays gathered into the slots. Returns the
    counts at ``ts`` summed over realisations (len(betas), T) and the number of systems that hit
    ``max_steps``. A system whose count reaches ``full`` stops and counts ``full`` at every
    later save time. This is exact for V = I and any attention weights A ≥ 0: m = min_{i≠j} G_ij
    cannot decrease while m ≥ 0, since at a minimising pair each term of
    Ġ_ij = Σ_k A_ik (G_kj − G_ik G_ij) + Σ_k A_jk (G_ki − G_jk G_ij) is ≥ m (1 − G_ik) ≥ 0, so a
    fully clustered system (m ≥ 1 − δ) stays so. ``full=None`` disables this.

    Saves: a slot in which no pair changes status (``close``) between the ends of a step keeps
    its count at every save time inside the step (added through a difference array); only the
    slots where some pair changes status are gathered, ``slots // 4`` at a time, and counted on
    the cubic Hermite interpolant at each save time.
    """
    dtype = y0.dtype
    T = ts.shape[0]
    t_end = ts[-1]
    total = n_b * n_r
    n = math.isqrt(close(y0[:1]).shape[-1])

    def count(y):
        return _count(close(y), n)

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
        f = field(y, beta, p)
        scale = atol + rtol * jnp.abs(y)
        h = 0.1 * rms(y / scale) / jnp.maximum(rms(f / scale), 1e-10)
        c0 = count(y)
        out = out.at[b].add(jnp.where(ok[:, None] & (grid < at_zero)[None], c0[:, None], 0))
        return out, dict(
            active=ok & (at_zero < T),
            b=b,
            beta=beta,
            p=p,
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
        return jnp.any(st["active"]) | (loaded < total)

    def body(carry):
        st, out, tail, loaded, failed = carry
        active, t, y, f, beta, p = st["active"], st["t"], st["y"], st["f"], st["beta"], st["p"]
        last = st["h"] >= t_end - t
        h = jnp.where(last, t_end - t, st["h"])
        hx = _expand(h, y)
        ks = [f]
        for a_row in _A[1:]:
            stage = y + hx * sum(a * k for a, k in zip(a_row, ks, strict=True) if a != 0)
            ks.append(field(stage, beta, p))
        y_new = y + hx * sum(b * k for b, k in zip(_B, ks, strict=True) if b != 0)
        f_new = field(y_new, beta, p)
        ks.append(f_new)
        err = hx * sum(e * k for e, k in zip(_E, ks, strict=True) if e != 0)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        err_norm = rms(err / scale)
        # A trial step far too long can overflow; treat it as a (strongly) rejected step.
        err_norm = jnp.where(jnp.isfinite(err_norm), err_norm, jnp.inf)
        accept = (err_norm <= 1) & active
        growth = jnp.where(err_norm == 0, 10.0, 0.9 * err_norm ** (-0.2))
        growth = jnp.clip(growth, 0.2, jnp.where(err_norm <= 1, 10.0, 1.0))
        t_new = jnp.where(last, t_end, t + h)
        # Cubic Hermite output from (y, f, y_new, f_new), all at hand:
        # y(t + θh) = y + θ(c_0 + θ(c_1 + θ c_2)).
        delta_y = y_new - y
        coeffs = [hx * f, 3 * delta_y - hx * (2 * f + f_new), hx * (f + f_new) - 2 * delta_y]

        status, status_new = close(y), close(y_new)
        count_new = _count(status_new, n)
        ptr = st["ptr"]
        ptr_new = jnp.where(accept, jnp.searchsorted(ts, t_new, side="right"), ptr)
        ptr_new = ptr_new.astype(ptr.dtype)
        moving = accept & jnp.any(status != status_new, axis=-1) & (ptr_new > ptr)
        steady = accept & ~moving & (ptr_new > ptr)
        # Steady slots: count_new at the save indices ptr … ptr_new − 1 (a difference array).
        tail = tail.at[st["b"], ptr].add(jnp.where(steady, count_new, 0))
        tail = tail.at[st["b"], ptr_new].add(jnp.where(steady, -count_new, 0))

        def dense_round(carry):
            out, todo_slots = carry
            lanes = jnp.nonzero(todo_slots, size=group, fill_value=W)[0]
            valid = lanes < W
            g = jnp.minimum(lanes, W - 1)
            y_g, c_g = y[g], [c[g] for c in coeffs]
            t_g, h_g, t_new_g, b_g = t[g], h[g], t_new[g], st["b"][g]

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
                poly = c_g[-1][:, None]
                for c in c_g[-2::-1]:
                    poly = c[:, None] + theta * poly
                value = count(y_g[:, None] + theta * poly)
                out = out.at[b_g[:, None], clipped].add(jnp.where(todo, value, 0))
                return out, ptr + jnp.sum(todo, axis=1, dtype=ptr.dtype)

            out, _ = jax.lax.while_loop(lambda s: jnp.any(pending(s[1])), save, (out, ptr[g]))
            return out, todo_slots.at[lanes].set(False, mode="drop")

        out, _ = jax.lax.while_loop(lambda c: jnp.any(c[1]), dense_round, (out, moving))
        ptr = ptr_new
        steps = st["steps"] + active.astype(jnp.int32)
        reached = accept & (t_new >= t_end)
        clustered = accept & ~reached
        if full is None:
            clustered = clustered & False
        else:
            clustered = clustered & (count_new >= full)
            tail = tail.at[st["b"], ptr].add(jnp.where(clustered, full, 0))
        stuck = active & ~reached & ~clustered & (steps >= max_steps)
        st = dict(
            st,
            active=active & ~(reached | clustered | stuck),
            y=jnp.where(_expand(accept, y), y_new, y),
            f=jnp.where(_expand(accept, f), f_new, f),
            t=jnp.where(accept, t_new, t),
            h=(h * growth).astype(dtype),
            ptr=ptr,
            steps=steps,
        )
        failed = failed + jnp.sum(stuck, dtype=jnp.int32)

        idle = ~st["active"]
        n_idle = jnp.sum(idle, dtype=jnp.int32)

        def fill(args):
            st, out, loaded = args
            j = jnp.arange(refill)
            slot = jnp.nonzero(idle, size=refill, fill_value=W)[0]
            out, new = load(loaded + j, out)
            take = (j < n_idle) & (loaded + j < total)
            # Slots not taken (index W) are dropped by the scatter.
            slot = jnp.where(take, slot, W)
            st = jax.tree.map(lambda a, v: a.at[slot].set(v, mode="drop"), st, new)
            return st, out, loaded + jnp.sum(take, dtype=jnp.int32)

        remaining = total - loaded
        go = (remaining > 0) & (n_idle >= jnp.minimum(refill, remaining))
        st, out, loaded = jax.lax.cond(go, fill, lambda args: args, (st, out, loaded))
        return st, out, tail, loaded, failed

    carry = (st, out, tail, loaded, jnp.int32(0))
    _, out, tail, _, failed = jax.lax.while_loop(cond, body, carry)
    return (out + jnp.cumsum(tail, axis=1))[:, :T], failed


def _solve_call(
    y0,
    betas,
    B,
    V,
    ts,
    n_r,
    n_b,
    delta,
    rtol,
    atol,
    max_steps,
    floor,
    *,
    form,
    normalization,
    early_stop,
    slots,
    refill,
):
    """Counts (len(betas), T) summed over realisations for initial states y0 (R, n, m); B, V
    per realisation (R, m, m), shared (m, m) or None. ``floor``: see _log_distance_field."""
    params = {}
    if B is not None and B.ndim == 3:
        params["B"] = B
    if V is not None and V.ndim == 3:
        params["V"] = V

    if form == "dist":

        def one(y, beta, p):
            return _distance_field(y, beta, normalization)
    elif form == "logdist":

        def one(y, beta, p):
            return _log_distance_field(y, beta, normalization, floor)
    else:

        def one(y, beta, p):
            return _coords_field(y, beta, p.get("B", B), p.get("V", V), normalization)

    # The integrator works on flat states (slots, n·m): XLA's CPU loops over a small minor
    # dimension (m = 32, or 2 on the circle) run ≈ 4× slower than over n·m.
    shape = y0.shape[1:]

    def field(y, beta, p):
        return jax.vmap(one)(y.reshape(y.shape[:1] + shape), beta, p).reshape(y.shape)

    def close(y):
        return _close(y, shape, form, delta)

    n = y0.shape[-2]
    full = n * (n - 1) if early_stop else None
    return _integrate(
        field,
        close,
        y0.reshape(y0.shape[0], -1),
        params,
        betas,
        ts,
        n_r,
        n_b,
        rtol,
        atol,
        max_steps,
        slots=slots,
        refill=refill,
        full=full,
    )


_solve_call_jit = jax.jit(
    _solve_call, static_argnames=("form", "normalization", "early_stop", "slots", "refill")
)


def bartlett_tokens(
    key: PRNGKeyArray, n: int, d: int, batch_shape: tuple[int, ...] = (), dtype=None
) -> Float[Array, "*batch n r"]:
    r"""Coordinates of n i.i.d. uniform tokens on S^{d−1} in an orthonormal basis of their span:
    shape ``batch_shape + (n, r)``, r = min(n, d), without drawing d-dimensional vectors.

    If X is an n × d standard Gaussian matrix and Xᵀ = U R its QR decomposition, the rows of
    X are Rᵀ in the basis U, and Rᵀ is lower-trapezoidal with independent entries: (Rᵀ)_ii ~ χ
    with d − i degrees of freedom (i = 0 … r−1), N(0, 1) below the diagonal (Bartlett
    decomposition). Normalising its rows gives tokens with exactly the inner products
    (the Gram matrix) of :func:`attnflow.random_tokens`, at O(n r) cost instead of O(n d).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> y = af.bartlett_tokens(jr.key(0), 5, 1024)
        >>> y.shape, bool(abs((y * y).sum(-1) - 1).max() < 1e-12)
        ((5, 5), True)
    """
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    if n < 1:
        raise ValueError(f"n: expected at least one token, got n = {n}")
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    # d enters only through the χ degrees of freedom: one compilation serves every d ≥ n.
    return _bartlett(key, jnp.asarray(d, dtype), n, min(n, d), tuple(batch_shape), dtype)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _bartlett(key, d, n, r, batch_shape, dtype):
    ones = (1,) * len(batch_shape)
    k_normal, k_chi = jr.split(key)
    lower = jnp.tril(jnp.ones((n, r), bool), k=-1).reshape(ones + (n, r))
    L = jnp.where(lower, jr.normal(k_normal, batch_shape + (n, r), dtype), 0)
    dof = (d - jnp.arange(r, dtype=dtype)).reshape(ones + (r,))
    chi = jnp.sqrt(2 * jr.gamma(k_chi, dof / 2, batch_shape + (r,), dtype))
    L = L + jnp.eye(n, r, dtype=dtype).reshape(ones + (n, r)) * chi[..., None, :]
    return L / jnp.linalg.norm(L, axis=-1, keepdims=True)


def _reduce_to_span(x, B):
    """Coordinates of x (n, d) in an orthonormal basis U of span{x_j} and Uᵀ B U."""
    U, R = jnp.linalg.qr(x.T)  # x.T = U R with U: (d, min(n, d)) orthonormal columns
    return R.T, (None if B is None else U.T @ B @ U)


# log D_ii: exp(_LOG_ZERO) = 0 exactly in float32 and float64, so D_ii = 0 and L̇_ii = 0.
_LOG_ZERO = -1000.0


def _log_floor(delta, dtype):
    """Smallest distance whose rate the log form resolves: far below δ, far above rounding."""
    return max(1e-3 * delta, 100 * float(jnp.finfo(dtype).eps))


def _check_grid(betas, ts):
    betas = np.asarray(betas, dtype=np.float64)
    ts = np.asarray(ts, dtype=np.float64)
    if betas.ndim != 1 or betas.size == 0:
        raise ValueError(
            f"betas: expected a non-empty 1-d array of β values, got shape {betas.shape}"
        )
    if not np.all(np.isfinite(betas)) or np.any(betas < 0):
        raise ValueError(f"betas: expected finite values >= 0, got {betas}")
    if ts.ndim != 1 or ts.size == 0:
        raise ValueError(f"ts: expected a non-empty 1-d array of save times, got shape {ts.shape}")
    if not np.all(np.isfinite(ts)) or np.any(ts < 0) or np.any(np.diff(ts) < 0):
        raise ValueError(f"ts: expected finite, non-negative, non-decreasing times, got {ts}")
    return betas, ts


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def _run(
    y0,
    B,
    V,
    betas,
    ts,
    *,
    form,
    delta,
    normalization,
    chunk_size,
    beta_block,
    slots,
    rtol,
    atol,
    max_steps,
    progress,
    n,
    early_stop,
):
    """Drive the jitted solver over realisation chunks × β blocks; exact integer sums.

    Calls are dispatched asynchronously round-robin over ``jax.local_devices()`` (with several
    CPU devices, e.g. ``jax_num_cpu_devices``, calls run in parallel on separate cores).
    """
    from tqdm.auto import tqdm

    R = y0.shape[0]
    dtype = y0.dtype
    chunk = min(chunk_size, R)
    block = min(beta_block, len(betas))
    # Few systems per call: fewer slots (the queue refills 1/8 of them at a time).
    width = min(slots, chunk * block)
    refill = max(1, width // 8)
    n_chunks, n_blocks = math.ceil(R / chunk), math.ceil(len(betas) / block)
    devices = jax.local_devices()
    if jnp.finfo(dtype).bits < 64:
        rtol, atol = max(rtol, 1e-5), max(atol, 1e-6)  # the tightest float32 can honour
    shared = {
        dev: jax.device_put(
            (
                jnp.asarray(ts, dtype),
                jnp.asarray(delta, dtype),
                jnp.asarray(rtol, dtype),
                jnp.asarray(atol, dtype),
                jnp.asarray(max_steps, jnp.int32),
                jnp.asarray(_log_floor(delta, dtype), dtype),
            ),
            dev,
        )
        for dev in devices
    }
    counts = np.zeros((len(betas), len(ts)), np.int64)
    failed = 0
    in_flight = collections.deque()

    def collect():
        nonlocal failed
        cols, n_b, out, stuck = in_flight.popleft()
        failed += int(stuck)
        counts[cols[:n_b]] += np.asarray(out)[:n_b]
        bar.update(1)

    bar = tqdm(total=n_chunks * n_blocks, disable=not progress, desc="phase diagram", unit="call")
    task = 0
    for c in range(n_chunks):
        # Calls have one shape (one compilation): the last chunk and block are padded by
        # repetition, and only the first n_r realisations × n_b values of β are integrated.
        rows = np.minimum(np.arange(c * chunk, (c + 1) * chunk), R - 1)
        n_r = min(chunk, R - c * chunk)
        for b in range(n_blocks):
            cols = np.minimum(np.arange(b * block, (b + 1) * block), len(betas) - 1)
            n_b = min(block, len(betas) - b * block)
            dev = devices[task % len(devices)]
            task += 1
            inputs = jax.device_put(
                (
                    y0[rows],
                    jnp.asarray(betas[cols], dtype),
                    None if B is None else (B[rows] if B.ndim == 3 else B),
                    None if V is None else (V[rows] if V.ndim == 3 else V),
                ),
                dev,
            )
            ts_d, delta_d, rtol_d, atol_d, steps_d, floor_d = shared[dev]
            out, stuck = _solve_call_jit(
                *inputs,
                ts_d,
                n_r,
                n_b,
                delta_d,
                rtol_d,
                atol_d,
                steps_d,
                floor_d,
                form=form,
                normalization=normalization,
                early_stop=early_stop,
                slots=width,
                refill=refill,
            )
            in_flight.append((cols, n_b, out, stuck))
            if len(in_flight) >= 2 * len(devices):
                collect()
    while in_flight:
        collect()
    bar.close()
    if failed:
        raise RuntimeError(
            f"phase diagram: {failed} of {R * len(betas)} solves did not reach t = {ts[-1]} "
            f"within max_steps = {max_steps}; raise max_steps or loosen rtol/atol"
        )
    return jnp.asarray(counts / (R * n * (n - 1)))


def phase_diagram_from_tokens(
    x0: Float[ArrayLike, "realizations n d"],
    *,
    betas,
    ts,
    delta: float = 1e-3,
    normalization: Literal["softmax", "n"] = "softmax",
    Q=None,
    K=None,
    V=None,
    reduce: bool = True,
    chunk_size: int = 256,
    beta_block: int = 8,
    slots: int = 128,
    rtol: float = 1e-3,
    atol: float = 1e-6,
    max_steps: int = 2000,
    progress: bool = False,
) -> Float[Array, "betas ts"]:
    r"""The clustered fraction averaged over given initial tokens, for every β and save time:

        P[b, k] = mean_r  #{(i, j): i ≠ j, ⟨x_i(t_k), x_j(t_k)⟩ ≥ 1 − δ} / (n(n − 1)),

    where x^r(t) solves (SA) (or USA) with β = betas[b] from x0[r] — the estimate of
    P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) of paper Fig. 3. See :func:`phase_diagram` for the solver.

    Args:
        x0: (R, n, d) initial tokens on the sphere, one system per realisation.
        betas, ts: 1-d grids (β ≥ 0; 0 ≤ t non-decreasing). The flow starts at t = 0.
        Q, K, V: (d, d) matrices shared by all realisations, or (R, d, d) one per realisation;
            None is the identity. Only B = QᵀK enters.
        reduce: with V = I, simulate in an orthonormal basis of span{x_j(0)} (dimension
            min(n, d); log-distances log(1 − ⟨x_i, x_j⟩) when Q = K = I and d ≥ 3). False
            integrates the tokens in R^d.
        chunk_size, beta_block: systems per compiled call are chunk_size × beta_block; results
            do not depend on them (float64; to rounding in float32, see the module docstring).
        slots: systems integrated side by side within a call (see :func:`phase_diagram`).
        rtol, atol, max_steps: per-system error control of the DP5(4) integrator; max_steps
            counts the (accepted and rejected) steps of one system.

    Returns:
        (len(betas), len(ts)) array of probabilities.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 6, 3, batch_shape=(4,))
        >>> P = af.phase_diagram_from_tokens(x0, betas=[1.0], ts=[0.0, 30.0])
        >>> P.shape, round(float(P[0, 0]), 4), float(P[0, 1])
        ((1, 2), 0.0167, 1.0)
    """
    if normalization not in ("softmax", "n"):
        raise ValueError(
            f"normalization: expected 'softmax' (SA) or 'n' (USA), got {normalization!r}"
        )
    x0 = jnp.asarray(x0)
    if x0.ndim != 3 or x0.shape[-1] < 2 or x0.shape[-2] < 2:
        raise ValueError(
            f"x0: expected initial tokens of shape (realizations, n >= 2, d >= 2), "
            f"got shape {x0.shape}"
        )
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"x0: expected a floating-point array, got dtype {x0.dtype}")
    norms = np.linalg.norm(np.asarray(x0, np.float64), axis=-1)
    tol = float(np.sqrt(np.finfo(x0.dtype).eps))
    if not np.all(np.abs(norms - 1) <= tol):
        raise ValueError(
            f"x0: tokens must lie on the unit sphere (|x_i| = 1 to {tol:.1e}); "
            "project them first with attnflow.normalize"
        )
    R, n, d = x0.shape
    betas, ts = _check_grid(betas, ts)
    delta = _check_delta(delta)
    rtol = float(check_positive_scalar(rtol, "rtol", what="tolerance"))
    atol = float(check_positive_scalar(atol, "atol", what="tolerance"))
    dtype = x0.dtype
    mats = {}
    for name, m in (("Q", Q), ("K", K), ("V", V)):
        if m is None:
            continue
        m = jnp.asarray(m, dtype)
        if m.shape not in ((d, d), (R, d, d)):
            raise ValueError(
                f"{name}: expected shape ({d}, {d}) (shared) or ({R}, {d}, {d}) "
                f"(one per realisation), got {m.shape}"
            )
        mats[name] = m
    if ("Q" in mats) != ("K" in mats):
        raise ValueError("Q, K: give both or neither (only B = QᵀK enters the dynamics)")
    B = None
    if "Q" in mats:
        B = jnp.swapaxes(mats["Q"], -1, -2) @ mats["K"]
    V = mats.get("V")
    common = dict(
        delta=delta,
        normalization=normalization,
        chunk_size=_positive_int(chunk_size, "chunk_size"),
        beta_block=_positive_int(beta_block, "beta_block"),
        slots=_positive_int(slots, "slots"),
        rtol=rtol,
        atol=atol,
        max_steps=_positive_int(max_steps, "max_steps"),
        progress=progress,
        n=n,
    )
    if V is None and B is None and d == 2:
        # On the circle the n × n forms drift off the rank-2 Gram matrices (n = 32, float32,
        # rtol 1e-3: max |ΔP| 0.084 for distances, 0.075 for log-distances, against 0.008 in
        # coordinates). For d ≥ 3 the log-distance form is faster than span coordinates
        # (d = 8: 1.34 s against 1.53 s CPU on a 9-β sample) at max |ΔP| 0.007.
        return _run(x0, None, None, betas, ts, form="coords", early_stop=True, **common)
    if V is None and reduce:
        if B is None:
            # D = 1 − G = |x_i − x_j|²/2 with an exact zero diagonal (clipped at rounding).
            off = ~jnp.eye(n, dtype=bool)
            D = jnp.where(off, jnp.maximum(1 - x0 @ jnp.swapaxes(x0, -1, -2), 0), 0)
            if _log_floor(delta, dtype) <= delta / 16:
                # log D (coincident tokens, D_ij = 0, start at the smallest normal number)
                tiny = jnp.finfo(dtype).tiny
                L = jnp.where(off, jnp.log(jnp.maximum(D, tiny)), _LOG_ZERO)
                return _run(L, None, None, betas, ts, form="logdist", early_stop=True, **common)
            return _run(D, None, None, betas, ts, form="dist", early_stop=True, **common)
        if B.ndim == 2:
            B = jnp.broadcast_to(B, (R, d, d))
        y, B_r = jax.vmap(_reduce_to_span)(x0, B)
        return _run(y, B_r, None, betas, ts, form="coords", early_stop=True, **common)
    return _run(x0, B, V, betas, ts, form="coords", early_stop=V is None, **common)


def _check_delta(delta):
    """0 < δ < 2, as for :func:`attnflow.count_clusters` (δ ≥ 2 would count every pair)."""
    value = float(delta)
    if not 0.0 < value < 2.0:
        raise ValueError(f"delta: expected a threshold 0 < delta < 2, got {value}")
    return value


def phase_diagram(
    key: PRNGKeyArray,
    *,
    n: int,
    d: int,
    betas,
    ts,
    realizations: int,
    delta: float = 1e-3,
    normalization: Literal["softmax", "n"] = "softmax",
    ensemble: AttentionEnsemble | None = None,
    shared_weights: bool = False,
    chunk_size: int = 256,
    beta_block: int = 8,
    slots: int = 128,
    rtol: float = 1e-3,
    atol: float = 1e-6,
    max_steps: int = 2000,
    dtype=None,
    progress: bool = True,
) -> Float[Array, "betas ts"]:
    r"""Estimate P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) on a (β, t) grid for uniform initial tokens:
        paper Fig. 3 (SA, Q = K = V = I) and Fig. 5 (random Q, K, V ensembles).

        The statistic is the clustered fraction over ordered pairs i ≠ j averaged over
        ``realizations`` independent systems (each pair is exchangeable with (1, 2), so this is an
        unbiased, lower-variance estimate of the pair probability).

        **Sampling.** Realisation r draws its tokens (and, per system, its (B, V) from
        ``ensemble``) from ``jax.random.split(key)``-derived keys, and the *same* draws are used for
        every β (common random numbers: differences across β are not sampling noise). With
        ``shared_weights=True`` one (B, V) is drawn for all realisations. Results are deterministic
        given ``key`` and do not depend on ``chunk_size``/``beta_block`` (bitwise in float64; in
        float32 to rounding, see the module docstring of ``attnflow._phase``).

        **Span reduction.** With V = I the flow stays in span{x_j(0)}: Q = K = I (d ≥ 3) runs in
        log-distance form (n × n) with the Gram matrix sampled from the Bartlett factor
        (:func:`bartlett_tokens`), so d = 1024 costs what d = n costs; other Q, K run in
        min(n, d) coordinates. General V runs in R^d.

        **Solver.** Batched Dormand–Prince 5(4) with an adaptive step and error control per system
        (``rtol``, ``atol``; RMS norm over the system's state), cubic Hermite output at ``ts`` (from
    the values and slopes at the ends of each step: no extra field evaluations),
        compiled once (calls are padded to one shape). Each call integrates chunk_size × beta_block
        systems as a queue over ``slots`` lanes (a finished system's lane takes the next one), and
        calls are spread over ``jax.local_devices()`` (set ``jax_num_cpu_devices`` to the number of
        cores before JAX starts to use them all on a CPU). Unlike the authors' scheme (explicit
        Euler, step 0.1, which clusters 5–10% late), the error is controlled; with V = I a system
        that is fully clustered stops early (it stays clustered: the cone spanned by the tokens
        shrinks).

        **Defaults** (measured on one Fig. 3 panel, n = d = 32, 1024 realisations; see
        ``benchmarks/RESULTS.md``, "Phase diagrams"): float32 with rtol = 1e-3, atol = 1e-6
        (applied to the integrated state: log-distances for Q = K = V = I and d ≥ 3) gives
        max |ΔP| of a few 1e-3 (one merge of two clusters in one realisation moves P by about
        that much; mean |ΔP| 3e-5) against a rtol = 1e-10 reference, against 0.40 (mean 0.017) for
        the authors' Euler scheme. float32 (``dtype``) gives the same P as float64 at equal
        tolerance at about half the float64 cost; float32 tolerances are clamped to
        rtol ≥ 1e-5, atol ≥ 1e-6.

        Args:
            key: PRNG key.
            n, d: tokens and dimension.
            betas: 1-d array of β ≥ 0. ts: 1-d non-decreasing save times ≥ 0 (the flow starts at 0).
            realizations: number of independent systems.
            delta: clustering threshold δ.
            normalization: ``"softmax"`` (SA) or ``"n"`` (USA).
            ensemble: an :class:`AttentionEnsemble` (e.g. ``FIG5_ENSEMBLES["a"]``); None is
                Q = K = V = I.
            shared_weights: one (B, V) draw for all systems instead of one per system.
            chunk_size: realisations per compiled call (memory ∝ chunk_size × n × m).
            beta_block: β values per compiled call.
            slots: systems integrated side by side in a call (memory ∝ slots × n × m; refilled
                slots/8 at a time); 128 (with chunk_size 256) measured fastest on a 2-core CPU.
            rtol, atol, max_steps: integrator controls (max_steps counts the steps of one system).
            dtype: float dtype (default: JAX's default float).
            progress: show a tqdm bar over chunks.

        Returns:
            (len(betas), len(ts)) array.

        Example:
            >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
            >>> P = af.phase_diagram(jr.key(0), n=4, d=64, betas=[0.5, 8.0], ts=[0.0, 3.0, 30.0],
            ...                      realizations=8, progress=False)
            >>> P.shape, float(P[0, 0]), float(P[0, -1])
            ((2, 3), 0.0, 1.0)
    """
    n = _positive_int(n, "n")
    if n < 2:
        raise ValueError(f"n: expected at least two tokens, got n = {n}")
    d = _positive_int(d, "d")
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    R = _positive_int(realizations, "realizations")
    if ensemble is not None and not isinstance(ensemble, AttentionEnsemble):
        raise ValueError(
            f"ensemble: expected an AttentionEnsemble or None, got {type(ensemble).__name__}"
        )
    betas, ts = _check_grid(betas, ts)
    # Before sampling: the same checks phase_diagram_from_tokens makes, but without the wait.
    _check_delta(delta)
    check_positive_scalar(rtol, "rtol", what="tolerance")
    check_positive_scalar(atol, "atol", what="tolerance")
    _positive_int(max_steps, "max_steps")
    dtype = jnp.zeros((), dtype).dtype if dtype is not None else jnp.result_type(float)
    k_tokens, k_weights = jr.split(key)
    plain = ensemble is None or (ensemble.bilinear == "identity" and ensemble.value_is_identity)
    common = dict(
        betas=betas,
        ts=ts,
        delta=delta,
        normalization=normalization,
        chunk_size=chunk_size,
        beta_block=beta_block,
        slots=slots,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        progress=progress,
    )
    if plain:
        y = bartlett_tokens(k_tokens, n, d, (R,), dtype)
        return phase_diagram_from_tokens(y, **common)
    g = jr.normal(k_tokens, (R, n, d), dtype)
    x0 = g / jnp.linalg.norm(g, axis=-1, keepdims=True)
    if shared_weights:
        B, V = ensemble.sample(k_weights, d, dtype)
    else:
        B, V = jax.vmap(lambda k: ensemble.sample(k, d, dtype))(jr.split(k_weights, R))
    # B = QᵀK enters as Q = I, K = B; V = I is passed as None to keep the span reduction.
    return phase_diagram_from_tokens(
        x0,
        Q=jnp.broadcast_to(jnp.eye(d, dtype=dtype), B.shape),
        K=B,
        V=None if ensemble.value_is_identity else V,
        **common,
    )


__all__ = ["phase_diagram", "phase_diagram_from_tokens", "bartlett_tokens"]
