"""Phase diagrams: P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) on a (β, t) grid (paper Fig. 3 and Fig. 5).

The engine integrates many independent systems at once with a batched Dormand–Prince 5(4)
scheme (the tableau and the order-4 dense output of scipy's ``RK45``), each system with its own
adaptive step size and error control, so a system's trajectory does not depend on which other
systems share its batch (results are invariant to the chunk size). Statistics are computed only
at the save times, from the dense output. Three state representations, chosen automatically:

- V = I, Q = K = I: the Gram matrix G = X Xᵀ (n × n), whose flow is closed:
  Ġ = A G + (A G)ᵀ − (s_i + s_j) G with s_i = (A G)_ii and A = softmax(βG) (or e^{βG}/n).
  For uniform tokens G is sampled directly from the Bartlett factor of an n × d Gaussian
  matrix, so the cost does not depend on d.
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

from ._ensembles import AttentionEnsemble

# Dormand–Prince 5(4) (scipy.integrate.RK45): stage matrix, weights, error weights and the
# dense-output matrix P (y(t + θh) = y + h Σ_s K_s Σ_j P[s, j] θ^{j+1}). The fields here are
# autonomous, so the nodes c_s are not needed.
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
_P = (
    (1.0, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432),
    (0.0, 0.0, 0.0, 0.0),
    (0.0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799),
    (0.0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072),
    (0.0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632),
    (0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844),
    (0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423),
)


def _unit_rows(Y):
    return Y / jnp.linalg.norm(Y, axis=-1, keepdims=True)


def _gram_field(G, beta, normalization):
    """Ġ for Q = K = V = I at the unit-diagonal Ĝ (so |x_i| = 1 is restored at every stage)."""
    r = jax.lax.rsqrt(jnp.diagonal(G))
    G = G * (r[:, None] * r[None, :])
    # ⟨x_i, x_j⟩ ≤ 1, so exp(β(G − 1)) ∈ (0, 1]: no overflow for any β, and every row sum ≥ 1.
    E = jnp.exp(beta * (G - 1))
    if normalization == "softmax":
        A = E / jnp.sum(E, axis=-1, keepdims=True)
    else:
        A = E * (jnp.exp(beta) / G.shape[0])
    AG = A @ G
    s = jnp.sum(A * G, axis=-1)
    return AG + AG.T - (s[:, None] + s[None, :]) * G


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


def _count(state, form, delta):
    """Number of ordered pairs i ≠ j with ⟨x_i, x_j⟩ ≥ 1 − δ (one system)."""
    if form == "gram":
        C = state  # the Gram flow keeps diag(G) = 1 to rounding (Ġ_ii = 0 exactly)
    else:
        Y = _unit_rows(state)
        C = Y @ Y.T
    n = C.shape[0]
    return jnp.sum((C >= 1 - delta) & ~jnp.eye(n, dtype=bool), dtype=jnp.int32)


def _expand(mask, y):
    return mask.reshape(mask.shape + (1,) * (y.ndim - mask.ndim))


def _integrate(field, count, y0, ts, rtol, atol, max_steps, full_count):
    """Batched adaptive DP5(4) on [0, ts[-1]]: one step size and error test per system.

    ``y0``: (*batch, n, m); ``field(y)`` and ``count(y)`` act on the whole batch. Returns the
    counts at ``ts`` (*batch, T), a per-system success flag and the number of loop iterations.
    Systems whose count reaches ``full_count`` stop (valid for V = I, where the cone spanned by
    the tokens only shrinks so a fully clustered system stays so); ``full_count=None`` disables
    this.
    """
    batch = y0.shape[:-2]
    dtype = y0.dtype
    T = ts.shape[0]
    t_end = ts[-1]
    f0 = field(y0)
    c0 = count(y0)
    at_zero = jnp.sum(ts <= 0)
    grid = jnp.arange(T).reshape((1,) * len(batch) + (T,))
    out = jnp.where(grid < at_zero, c0[..., None], 0).astype(jnp.int32)
    ptr = jnp.full(batch, at_zero, jnp.int32)

    def rms(x):
        return jnp.sqrt(jnp.mean(x * x, axis=(-2, -1)))

    scale0 = atol + rtol * jnp.abs(y0)
    h0 = 0.01 * rms(y0 / scale0) / jnp.maximum(rms(f0 / scale0), 1e-10)
    h0 = jnp.clip(h0, 1e-6, 0.1).astype(dtype)
    done = jnp.zeros(batch, bool) if full_count is None else c0 >= full_count
    done = done | (t_end <= 0)
    t0 = jnp.zeros(batch, dtype)

    def cond(carry):
        _, _, _, _, _, _, done, steps = carry
        return (steps < max_steps) & ~jnp.all(done)

    def body(carry):
        t, y, f, h, out, ptr, done, steps = carry
        last = h >= t_end - t
        h_eff = jnp.where(last, t_end - t, h)
        hx = _expand(h_eff, y)
        ks = [f]
        for a_row in _A[1:]:
            ks.append(field(y + hx * sum(a * k for a, k in zip(a_row, ks, strict=True) if a != 0)))
        y_new = y + hx * sum(b * k for b, k in zip(_B, ks, strict=True) if b != 0)
        f_new = field(y_new)
        ks.append(f_new)
        err = hx * sum(e * k for e, k in zip(_E, ks, strict=True) if e != 0)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        err_norm = rms(err / scale)
        # A trial step far too long can overflow; treat it as a (strongly) rejected step.
        err_norm = jnp.where(jnp.isfinite(err_norm), err_norm, jnp.inf)
        accept = (err_norm <= 1) & ~done
        growth = jnp.where(err_norm == 0, 10.0, 0.9 * err_norm ** (-0.2))
        growth = jnp.clip(growth, 0.2, jnp.where(err_norm <= 1, 10.0, 1.0))
        h_next = jnp.where(done, h, h_eff * growth)
        t_new = jnp.where(last, t_end, t + h_eff)
        # Dense output y(t + θh) = y + Σ_j θ^{j+1} c_j, coefficients formed once per step.
        coeffs = [
            hx * sum(row[j] * k for row, k in zip(_P, ks, strict=True) if row[j] != 0)
            for j in range(4)
        ]

        def pending(ptr):
            return accept & (ptr < T) & (ts[jnp.minimum(ptr, T - 1)] <= t_new)

        def save(state):
            out, ptr = state
            todo = pending(ptr)
            index = jnp.minimum(ptr, T - 1)
            theta = _expand((ts[index] - t) / jnp.where(h_eff > 0, h_eff, 1), y)
            poly = coeffs[3]
            for c in coeffs[2::-1]:
                poly = c + theta * poly
            value = count(y + theta * poly)
            current = jnp.take_along_axis(out, index[..., None], axis=-1)[..., 0]
            new = jnp.where(todo, value, current)
            out = jnp.put_along_axis(out, index[..., None], new[..., None], axis=-1, inplace=False)
            return out, ptr + todo.astype(jnp.int32)

        out, ptr = jax.lax.while_loop(lambda s: jnp.any(pending(s[1])), save, (out, ptr))
        y = jnp.where(_expand(accept, y), y_new, y)
        f = jnp.where(_expand(accept, f), f_new, f)
        t = jnp.where(accept, t_new, t)
        finished = accept & (t_new >= t_end)
        if full_count is not None:
            finished = finished | (accept & (count(y_new) >= full_count))
        return t, y, f, h_next, out, ptr, done | finished, steps + 1

    carry = (t0, y0, f0, h0, out, ptr, done, jnp.asarray(0, jnp.int32))
    _, _, _, _, out, ptr, done, steps = jax.lax.while_loop(cond, body, carry)
    if full_count is not None:
        out = jnp.where(grid >= ptr[..., None], jnp.int32(full_count), out)
    return out, done, steps


def _system_fields(form, normalization):
    if form == "gram":

        def one(y, beta, B, V):
            return _gram_field(y, beta, normalization)
    else:

        def one(y, beta, B, V):
            return _coords_field(y, beta, B, V, normalization)

    return one


def _solve_chunk(
    y0, betas, B, V, ts, delta, rtol, atol, max_steps, *, form, normalization, early_stop
):
    """Counts (len(betas), R, T) for initial states y0 (R, n, m) and every β; B, V per system
    (R, m, m), shared (m, m) or None."""
    one = _system_fields(form, normalization)
    b_axis = None if B is None or B.ndim == 2 else 0
    v_axis = None if V is None or V.ndim == 2 else 0
    over_r = jax.vmap(one, in_axes=(0, None, b_axis, v_axis))
    over_beta = jax.vmap(over_r, in_axes=(0, 0, None, None))

    def field(y):
        return over_beta(y, betas, B, V)

    def count(y):
        return jax.vmap(jax.vmap(lambda s: _count(s, form, delta)))(y)

    n = y0.shape[-2]
    state = jnp.broadcast_to(y0, (betas.shape[0],) + y0.shape)
    full = n * (n - 1) if early_stop else None
    return _integrate(field, count, state, ts, rtol, atol, max_steps, full)


_solve_chunk_jit = jax.jit(_solve_chunk, static_argnames=("form", "normalization", "early_stop"))


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
    rtol,
    atol,
    max_steps,
    progress,
    n,
    early_stop,
):
    """Drive the jitted chunk solver over realisation chunks × β blocks; exact integer sums.

    Calls are dispatched asynchronously round-robin over ``jax.local_devices()`` (with several
    CPU devices, e.g. ``jax_num_cpu_devices``, chunks run in parallel on separate cores).
    """
    from tqdm.auto import tqdm

    R = y0.shape[0]
    dtype = y0.dtype
    chunk = min(chunk_size, R)
    block = min(beta_block, len(betas))
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
        cols, keep, valid, out, ok = in_flight.popleft()
        out, ok = np.asarray(out), np.asarray(ok)
        failed += int(np.sum(~ok[keep][:, valid]))
        counts[cols[keep]] += out[keep][:, valid].sum(axis=1)
        bar.update(1)

    bar = tqdm(total=n_chunks * n_blocks, disable=not progress, desc="phase diagram", unit="chunk")
    task = 0
    for c in range(n_chunks):
        # The last chunk is padded by repeating a realisation so every call has the same
        # shape (one compilation); padded rows are dropped when collecting.
        rows = np.minimum(np.arange(c * chunk, (c + 1) * chunk), R - 1)
        valid = np.arange(c * chunk, (c + 1) * chunk) < R
        for b in range(n_blocks):
            cols = np.minimum(np.arange(b * block, (b + 1) * block), len(betas) - 1)
            keep = np.arange(b * block, (b + 1) * block) < len(betas)
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
            out, ok, _ = _solve_chunk_jit(
                *inputs,
                *shared[dev],
                max_steps,
                form=form,
                normalization=normalization,
                early_stop=early_stop,
            )
            in_flight.append((cols, keep, valid, out, ok))
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
    chunk_size: int = 16,
    beta_block: int = 3,
    rtol: float = 1e-5,
    atol: float = 1e-7,
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
            min(n, d); Gram form when Q = K = I). False integrates the tokens in R^d.
        chunk_size, beta_block: systems per compiled call are chunk_size × beta_block; results
            do not depend on them.
        rtol, atol, max_steps: per-system error control of the DP5(4) integrator.

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
        rtol=rtol,
        atol=atol,
        max_steps=_positive_int(max_steps, "max_steps"),
        progress=progress,
        n=n,
    )
    if V is None and B is None and 2 * d <= n:
        # Few dimensions: d coordinates are cheaper than the n × n Gram matrix.
        return _run(x0, None, None, betas, ts, form="coords", early_stop=True, **common)
    if V is None and reduce:
        if B is None:
            gram = x0 @ jnp.swapaxes(x0, -1, -2)
            return _run(gram, None, None, betas, ts, form="gram", early_stop=True, **common)
        if B.ndim == 2:
            B = jnp.broadcast_to(B, (R, d, d))
        y, B_r = jax.vmap(_reduce_to_span)(x0, B)
        return _run(y, B_r, None, betas, ts, form="coords", early_stop=True, **common)
    return _run(x0, B, V, betas, ts, form="coords", early_stop=V is None, **common)


def _check_delta(delta):
    value = float(delta)
    if not 0.0 < value < 1.0:
        raise ValueError(f"delta: expected a threshold 0 < delta < 1, got {value}")
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
    chunk_size: int = 16,
    beta_block: int = 3,
    rtol: float = 1e-5,
    atol: float = 1e-7,
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
    given ``key`` and do not depend on ``chunk_size``/``beta_block``.

    **Span reduction.** With V = I the flow stays in span{x_j(0)}: Q = K = I runs in Gram form
    (n × n) with the Gram matrix sampled from the Bartlett factor (:func:`bartlett_tokens`), so
    d = 1024 costs what d = n costs; other Q, K run in min(n, d) coordinates. General V runs
    in R^d.

    **Solver.** Batched Dormand–Prince 5(4) with an adaptive step and error control per system
    (``rtol``, ``atol``; RMS norm over the system's state), order-4 dense output at ``ts``,
    compiled once (chunks are padded to one shape). Unlike the authors' scheme (explicit Euler,
    step 0.1, which clusters 5–10% late), the error is controlled; with V = I a system that is
    fully clustered stops early (it stays clustered: the cone spanned by the tokens shrinks).

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
        chunk_size: realisations per compiled call (memory ∝ chunk_size × beta_block × n × m).
        beta_block: β values per compiled call; β of similar stiffness batch best.
        rtol, atol, max_steps: integrator controls (max_steps counts steps per call).
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
