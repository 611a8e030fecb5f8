"""The phase-diagram driver: picks the state form, pads the realisations × β grid into calls of
one compiled shape, and sums the exact integer counts over calls and devices."""

import collections
import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from .._check import check_key, check_positive_scalar
from .._ensembles import AttentionEnsemble
from .._sphere import unit_rows
from ._bartlett import bartlett_tokens
from ._coordinates import Coordinates, reduce_to_span
from ._distance import Distance
from ._integrate import integrate
from ._log_distance import LOG_ZERO, LogDistance, log_floor


@functools.partial(jax.jit, static_argnames=("early_stop", "slots", "refill"))
def _solve_call(
    form, y0, params, betas, ts, n_r, n_b, rtol, atol, max_steps, *, early_stop, slots, refill
):
    """Counts (len(betas), T) summed over realisations for initial states y0 (R, n, m) of
    ``form``; ``params``: per-realisation arrays (R, …) of ``form.rate``."""
    # The integrator works on flat states (slots, n·m): XLA's CPU loops over a small minor
    # dimension (m = 32, or 2 on the circle) run ≈ 4× slower than over n·m.
    n = form.shape[0]
    return integrate(
        form,
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
        refill_size=refill,
        full=n * (n - 1) if early_stop else None,
    )


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
    form,
    params,
    betas,
    ts,
    *,
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

    ``y0``: (R, n, m) initial states of ``form``; ``params``: per-realisation arrays (R, …),
    the systems' own parameters of ``form.rate``.

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
                form,
                jnp.asarray(ts, dtype),
                jnp.asarray(rtol, dtype),
                jnp.asarray(atol, dtype),
                jnp.asarray(max_steps, jnp.int32),
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
            y_c, betas_c, params_c = jax.device_put(
                (
                    y0[rows],
                    jnp.asarray(betas[cols], dtype),
                    {name: a[rows] for name, a in params.items()},
                ),
                dev,
            )
            form_d, ts_d, rtol_d, atol_d, steps_d = shared[dev]
            out, stuck = _solve_call(
                form_d,
                y_c,
                params_c,
                betas_c,
                ts_d,
                n_r,
                n_b,
                rtol_d,
                atol_d,
                steps_d,
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
        chunk_size=_positive_int(chunk_size, "chunk_size"),
        beta_block=_positive_int(beta_block, "beta_block"),
        slots=_positive_int(slots, "slots"),
        rtol=rtol,
        atol=atol,
        max_steps=_positive_int(max_steps, "max_steps"),
        progress=progress,
        n=n,
    )
    delta_a = jnp.asarray(delta, dtype)
    if V is None and B is None and d == 2:
        # On the circle the n × n forms drift off the rank-2 Gram matrices (n = 32, float32,
        # rtol 1e-3: max |ΔP| 0.084 for distances, 0.075 for log-distances, against 0.008 in
        # coordinates). For d ≥ 3 the log-distance form is faster than span coordinates
        # (d = 8: 1.34 s against 1.53 s CPU on a 9-β sample) at max |ΔP| 0.007.
        form = Coordinates((n, d), normalization, delta_a)
        return _run(x0, form, {}, betas, ts, early_stop=True, **common)
    if V is None and reduce:
        if B is None:
            # D = 1 − G = |x_i − x_j|²/2 with an exact zero diagonal (clipped at rounding).
            off = ~jnp.eye(n, dtype=bool)
            D = jnp.where(off, jnp.maximum(1 - x0 @ jnp.swapaxes(x0, -1, -2), 0), 0)
            floor = log_floor(delta, dtype)
            if floor <= delta / 16:
                # log D (coincident tokens, D_ij = 0, start at the smallest normal number)
                tiny = jnp.finfo(dtype).tiny
                L = jnp.where(off, jnp.log(jnp.maximum(D, tiny)), LOG_ZERO)
                form = LogDistance((n, n), normalization, delta_a, jnp.asarray(floor, dtype))
                return _run(L, form, {}, betas, ts, early_stop=True, **common)
            form = Distance((n, n), normalization, delta_a)
            return _run(D, form, {}, betas, ts, early_stop=True, **common)
        if B.ndim == 2:
            B = jnp.broadcast_to(B, (R, d, d))
        y, B_r = jax.vmap(reduce_to_span)(x0, B)
        form = Coordinates(y.shape[1:], normalization, delta_a)
        return _run(y, form, {"B": B_r}, betas, ts, early_stop=True, **common)
    # (d, d) matrices are shared by all systems; (R, d, d) ones are each system's own.
    mats = {name: m for name, m in (("B", B), ("V", V)) if m is not None}
    shared = {name: m for name, m in mats.items() if m.ndim == 2}
    own = {name: m for name, m in mats.items() if m.ndim == 3}
    form = Coordinates((n, d), normalization, delta_a, **shared)
    return _run(x0, form, own, betas, ts, early_stop=V is None, **common)


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

        **Defaults**: rtol = 1e-3, atol = 1e-6, applied to the integrated state (log-distances
        for Q = K = V = I and d ≥ 3). At these tolerances P is accurate to a few 1e-3, about what
        one merge of two clusters in one realisation moves it by; ``dtype=float32`` gives the
        same P as float64 at equal tolerance, at lower cost. float32 tolerances are clamped to
        rtol ≥ 1e-5, atol ≥ 1e-6. The measurements behind these choices are on the benchmark
        page (docs/benchmarks.md#bench-phase).

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
    key = None if key is None else check_key(key)  # an int seed or legacy key
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
    x0 = unit_rows(g)
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


__all__ = ["phase_diagram", "phase_diagram_from_tokens"]
