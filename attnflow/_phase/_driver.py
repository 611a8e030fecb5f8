"""The phase-diagram driver: picks the state form, pads the realisations × β grid into calls of
one compiled shape, and sums the exact integer counts over calls and devices."""

import inspect
import math
import warnings
from typing import Literal

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from .._check import (
    MAX_ARRAY_ELEMENTS,
    as_array,
    check_bool,
    check_budget,
    check_delta,
    check_dtype_option,
    check_key,
    check_matrix,
    check_positive_scalar,
    check_sa_normalization,
    check_static,
)
from .._ensembles import AttentionEnsemble
from .._sphere import unit_rows
from ._bartlett import bartlett_tokens
from ._coordinates import Coordinates, reduce_to_span
from ._distance import Distance
from ._general import FieldFamily, general_phase_diagram
from ._log_distance import LOG_ZERO, LogDistance, log_floor
from ._run import Engine, PhaseDiagramResult, run
from ._settings import DeviceLayout, engine_settings
from ._statistics import AbstractStatistic, ClusteredFraction

# A family's pieces are solved in sequence inside one compiled program, and its heads are a
# static tuple: both are unrolled when the program is traced.
MAX_PIECES = 1024
MAX_HEADS = 1024

# The first trial step of every system. The flows start from O(1) rates on an O(1) time scale
# (t ≈ 2–30 on the Fig. 3 grids), so a fixed first step of this size is accepted or cut once,
# where the scaled rule 0.1 RMS(y/s)/RMS(F(y)/s) of _integrate (used with None) starts far
# smaller and spends steps growing it. Counts before and after: benchmarks/RESULTS.md.
FIRST_STEP = 0.3

# The ``statistics`` value of the rich entry points (phase_diagram_result and
# phase_diagram_from_tokens_result): always a PhaseDiagramResult, no deprecation warning.
_RESULT = object()


def _check_grid(betas, ts):
    betas = np.asarray(betas, dtype=np.float64)
    ts = np.asarray(ts, dtype=np.float64)
    if betas.ndim != 1 or betas.size == 0:
        raise ValueError(
            f"betas: expected a non-empty 1-d array of β values, got shape {betas.shape}"
        )
    if not np.all(np.isfinite(betas)):
        raise ValueError(f"betas: expected finite values (of either sign), got {betas}")
    if ts.ndim != 1 or ts.size == 0:
        raise ValueError(f"ts: expected a non-empty 1-d array of save times, got shape {ts.shape}")
    if not np.all(np.isfinite(ts)) or np.any(ts < 0) or np.any(np.diff(ts) < 0):
        raise ValueError(f"ts: expected finite, non-negative, non-decreasing times, got {ts}")
    return betas, ts


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


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
    statistic: AbstractStatistic | None = None,
    family: FieldFamily | None = None,
    reduce: bool = True,
    layout: DeviceLayout | None = None,
    chunk_size: int | None = None,
    beta_block: int | None = None,
    slots: int | None = None,
    backend: str | None = None,
    rtol: float = 1e-3,
    atol: float = 1e-6,
    max_steps: int = 2000,
    progress: bool = False,
    statistics: bool = False,
) -> Float[Array, "betas ts"] | PhaseDiagramResult:
    r"""The clustered fraction averaged over given initial tokens, for every β and save time:

        P[b, k] = mean_r  #{(i, j): i ≠ j, ⟨x_i(t_k), x_j(t_k)⟩ ≥ 1 − δ} / (n(n − 1)),

    where x^r(t) solves (SA) (or USA) with β = betas[b] from x0[r] — the estimate of
    P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) of paper Fig. 3 (arXiv:2312.10794). See
    :func:`phase_diagram` for the solver and the device settings.

    Args:
        x0: (R, n, d) initial tokens on the sphere, one system per realisation.
        betas, ts: 1-d grids (finite β of either sign, docs/conventions.md "Negative β";
            0 ≤ t non-decreasing). The flow starts at t = 0.
        Q, K, V: (d, d) matrices shared by all realisations, or (R, d, d) one per realisation;
            None is the identity. Only B = QᵀK enters. With a ``family`` of H heads and L
            pieces (:meth:`FieldFamily.num_pieces` of ts[-1]), also (R, L, H, d, d): piece k,
            head h of realisation r.
        statistic: what to record (an :class:`AbstractStatistic`); None is
            ``ClusteredFraction(delta)``, the clustered fraction above (``delta`` is used only
            then: a statistic carries its own threshold).
        family: the attention dynamics (:class:`FieldFamily`: heads, causal, normalisation
            scheme, redraw period); None is the paper's single-head (SA)/(USA).
        reduce: with V = I, simulate in an orthonormal basis of span{x_j(0)} (dimension
            min(n, d); log-distances log(1 − ⟨x_i, x_j⟩) when Q = K = I and d ≥ 3). False
            integrates the tokens in R^d.
        layout: the device layout, a :class:`attnflow.DeviceLayout` (see
            :func:`phase_diagram`); results do not depend on it (float64; to rounding in
            float32).
        chunk_size, beta_block, slots, backend: the same layout as four keywords (not with
            ``layout``).
        rtol, atol, max_steps: per-system error control of the DP5(4) integrator; max_steps
            counts the (accepted and rejected) steps of one system.
        progress: report progress (systems done; compilation as its own phase).
        statistics: deprecated (a DeprecationWarning): return a
            :class:`attnflow.PhaseDiagramResult` (P with each system's accepted and rejected
            steps) instead of P; use :func:`phase_diagram_from_tokens_result`.

    **Engines.** The clustered fraction (mean) of the default family runs on the reduced
    engines below (chosen automatically from V, Q, K and d); every other statistic or family
    runs on the general engine, one :func:`attnflow.solve` per system (Tsit5 with the same
    ``rtol``, ``atol``, ``max_steps``), batched with ``vmap`` over ``chunk_size`` realisations
    of one β, the statistic taken at the save times. ``beta_block``, ``slots`` and ``reduce``
    concern the reduced engines only.

    Returns:
        (len(betas), len(ts)) array: the probabilities, or the statistic's mean (median) over
        the realisations.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 6, 3, batch_shape=(4,))
        >>> P = af.phase_diagram_from_tokens(x0, betas=[1.0], ts=[0.0, 30.0])
        >>> P.shape, round(float(P[0, 0]), 4), float(P[0, 1])
        ((1, 2), 0.0167, 1.0)
    """
    x0 = _check_x0(x0)
    reduce = check_bool(reduce, "reduce")
    layout = _layout(layout, backend, chunk_size, beta_block, slots)
    engine_args = (*layout, rtol, atol, max_steps)
    betas, ts, statistic, family, statistics, engine = _check_options(
        betas, ts, delta, normalization, statistic, family, statistics, progress, engine_args
    )
    if Q is None and K is None and V is None:
        _warn_identical_heads(family)
    return _from_tokens(
        x0, Q, K, V, betas, ts, normalization, reduce, statistic, family, statistics, engine
    )


def _warn_identical_heads(family):
    """H > 1 heads with identity weights are H copies of one head: say so."""
    if family.heads > 1:
        import warnings

        warnings.warn(
            f"family: FieldFamily(heads={family.heads}) with identity Q, K, V (no ensemble) is "
            f"{family.heads} identical heads, i.e. single-head attention at {family.heads}× "
            f"speed (P(heads={family.heads}, t) = P(heads=1, {family.heads}t)); pass an "
            "ensemble (or Q, K, V) to give each head its own weights",
            UserWarning,
            stacklevel=3,
        )


def _check_options(
    betas, ts, delta, normalization, statistic, family, statistics, progress, engine_args
):
    """The options both entry points take, checked before any sampling or integration:
    (betas, ts, statistic, family, statistics, engine); ``delta`` serves only the default
    statistic."""
    check_sa_normalization(normalization)
    betas, ts = _check_grid(betas, ts)
    delta = float(check_delta(check_static(delta, "delta", "the engine's statistics read it")))
    if statistics is not _RESULT:
        statistics = check_bool(statistics, "statistics")
        if statistics:
            warnings.warn(
                "statistics=True is deprecated: phase_diagram_result (phase_diagram_from_tokens_"
                "result) takes the same arguments and always returns the PhaseDiagramResult; the "
                "flag will be removed",
                DeprecationWarning,
                stacklevel=3,
            )
    progress = check_bool(progress, "progress")
    statistic, family = _check_statistic_family(statistic, family, delta)
    if statistics is _RESULT and not _reduced_engine(statistic, family):
        _general_has_no_result()
    _check_family_budget(family, ts)
    engine = _engine(*engine_args, progress=progress)
    return betas, ts, statistic, family, statistics, engine


def _from_tokens(
    x0, Q, K, V, betas, ts, normalization, reduce, statistic, family, statistics, engine
):
    """:func:`phase_diagram_from_tokens` on checked arguments."""
    R, n, d = x0.shape
    full = (R, family.num_pieces(float(ts[-1])), family.heads, d, d)
    mats = _weight_matrices(x0, Q, K, V, full)
    if "Q" not in mats:
        _check_usa_overflow(betas, normalization, x0.dtype)
    fast = _reduced_engine(statistic, family) and all(m.ndim <= 3 for m in mats.values())
    if not fast:
        if statistics is _RESULT:
            _general_has_no_result()
        return general_phase_diagram(
            x0,
            {name: _per_system(mats.get(name), full) for name in ("Q", "K", "V")},
            betas=betas,
            ts=ts,
            statistic=statistic,
            family=family,
            normalization=normalization,
            chunk_size=engine.settings.chunk_size,
            rtol=engine.rtol,
            atol=engine.atol,
            max_steps=engine.max_steps,
            progress=engine.progress,
        )
    B = None
    if "Q" in mats:
        B = jnp.swapaxes(mats["Q"], -1, -2) @ mats["K"]
    # A static choice: the distance forms shift their exponentials only for a grid with β < 0.
    signed = bool(np.any(betas < 0))
    y, form, params, early_stop = _state_form(
        x0, B, mats.get("V"), statistic.delta, normalization, reduce, signed
    )
    result = run(y, form, params, betas, ts, engine=engine, n=n, early_stop=early_stop)
    return result if statistics else result.probability


def _reduced_engine(statistic, family) -> bool:
    """The mean clustered fraction of the default family runs on the reduced engines."""
    return isinstance(statistic, ClusteredFraction) and statistic.reduce == "mean" and family.plain


def _general_has_no_result():
    raise ValueError(
        "statistic, family: the PhaseDiagramResult (step counts) comes from the reduced engines "
        "(the mean clustered fraction of the default family); this statistic or family runs on "
        "the general engine: call phase_diagram or phase_diagram_from_tokens for its array"
    )


def _check_x0(x0):
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
    return x0


def _layout(layout, backend, chunk_size, beta_block, slots):
    """(backend, chunk_size, beta_block, slots) from ``layout`` or the four keywords."""
    given = (backend, chunk_size, beta_block, slots)
    if layout is None:
        return given
    if not isinstance(layout, DeviceLayout):
        raise ValueError(f"layout: expected a DeviceLayout or None, got {type(layout).__name__}")
    if any(value is not None for value in given):
        raise ValueError(
            "layout: give the device layout once, as layout=DeviceLayout(...) or as the "
            "backend, chunk_size, beta_block and slots keywords"
        )
    return layout.backend, layout.chunk_size, layout.beta_block, layout.slots


def _optional_int(value, name):
    return None if value is None else _positive_int(value, name)


def _engine(backend, chunk_size, beta_block, slots, rtol, atol, max_steps, *, progress):
    """Validated integrator and device settings."""
    settings = engine_settings(
        backend,
        chunk_size=_optional_int(chunk_size, "chunk_size"),
        beta_block=_optional_int(beta_block, "beta_block"),
        slots=_optional_int(slots, "slots"),
    )
    return Engine(
        settings=settings,
        rtol=float(check_positive_scalar(rtol, "rtol", what="tolerance")),
        atol=float(check_positive_scalar(atol, "atol", what="tolerance")),
        max_steps=_positive_int(max_steps, "max_steps"),
        first_step=FIRST_STEP,
        progress=progress,
    )


def _weight_matrices(x0, Q, K, V, full):
    """The given Q, K, V as arrays of shape (d, d), (R, d, d) or ``full`` = (R, L, H, d, d)."""
    R, _, d = x0.shape
    mats = {}
    for name, m in (("Q", Q), ("K", K), ("V", V)):
        if m is None:
            continue
        m = as_array(m, name)
        m = check_matrix(m, name, f"({d}, {d}), ({R}, {d}, {d}) or {full}", ndim=jnp.ndim(m))
        m = jnp.asarray(m, x0.dtype)
        if m.shape not in ((d, d), (R, d, d), full):
            raise ValueError(
                f"{name}: expected shape ({d}, {d}) (shared), ({R}, {d}, {d}) (one per "
                f"realisation) or {full} (per realisation, piece, head), got {m.shape}"
            )
        mats[name] = m
    if ("Q" in mats) != ("K" in mats):
        raise ValueError("Q, K: give both or neither (only B = QᵀK enters the dynamics)")
    return mats


def _state_form(x0, B, V, delta, normalization, reduce, signed):
    """(initial states, state form, per-system params, early stop) for tokens x0 (R, n, d);
    ``signed``: whether some β of the grid is negative (the distance forms' row shift)."""
    R, n, d = x0.shape
    dtype = x0.dtype
    delta_a = jnp.asarray(delta, dtype)
    if V is None and B is None and d == 2:
        # On the circle the n × n forms drift off the rank-2 Gram matrices (measured on the
        # benchmark page); coordinates stay on them.
        return x0, Coordinates((n, d), normalization, delta_a), {}, True
    if V is None and reduce and B is None:
        # D = 1 − G = |x_i − x_j|²/2 with an exact zero diagonal (clipped at rounding).
        off = ~jnp.eye(n, dtype=bool)
        D = jnp.where(off, jnp.maximum(1 - x0 @ jnp.swapaxes(x0, -1, -2), 0), 0)
        floor = log_floor(delta, dtype)
        if floor > delta / 16:
            return D, Distance((n, n), normalization, delta_a, signed), {}, True
        # log D (coincident tokens, D_ij = 0, start at the smallest normal number)
        L = jnp.where(off, jnp.log(jnp.maximum(D, jnp.finfo(dtype).tiny)), LOG_ZERO)
        form = LogDistance((n, n), normalization, delta_a, jnp.asarray(floor, dtype), signed)
        return L, form, {}, True
    if V is None and reduce:
        B = jnp.broadcast_to(B, (R, d, d))
        y, B_r = jax.vmap(reduce_to_span)(x0, B)
        return y, Coordinates(y.shape[1:], normalization, delta_a), {"B": B_r}, True
    # (d, d) matrices are shared by all systems; (R, d, d) ones are each system's own.
    mats = {name: m for name, m in (("B", B), ("V", V)) if m is not None}
    shared = {name: m for name, m in mats.items() if m.ndim == 2}
    own = {name: m for name, m in mats.items() if m.ndim == 3}
    return x0, Coordinates((n, d), normalization, delta_a, **shared), own, V is None


def _per_system(m, full):
    """(d, d), (R, d, d) or (R, L, H, d, d) weights as (R, L, H, d, d); None stays None."""
    if m is None:
        return None
    if m.ndim == 3:
        m = m[:, None, None]
    return jnp.broadcast_to(m, full)


def _check_statistic_family(statistic, family, delta):
    """The statistic (None: the clustered fraction at ``delta``) and family (None: default)."""
    if statistic is None:
        statistic = ClusteredFraction(delta)
    elif not isinstance(statistic, AbstractStatistic):
        raise ValueError(
            f"statistic: expected an AbstractStatistic (e.g. ClusterCount()) or None, "
            f"got {type(statistic).__name__}"
        )
    if family is None:
        family = FieldFamily()
    elif not isinstance(family, FieldFamily):
        raise ValueError(f"family: expected a FieldFamily or None, got {type(family).__name__}")
    return statistic, family


def _check_usa_overflow(betas, normalization, dtype):
    """With Q = K = I the unnormalised field's diagonal term is e^(β⟨x_i, x_i⟩) = e^β exactly:
    refuse, before sampling or compiling, a β at which it overflows the dtype."""
    limit = float(np.log(np.finfo(dtype).max))
    if normalization == "n" and float(np.max(betas)) > limit:
        raise ValueError(
            f"betas: expected β <= {limit:.1f} for normalization='n' in {jnp.dtype(dtype).name}, "
            f"got {float(np.max(betas))}: the unnormalised field multiplies by "
            "e^(β⟨x_i, x_i⟩) = e^β, which overflows; use float64 (β up to 709), or the softmax "
            "normalisation"
        )


def _check_family_budget(family, ts):
    """A family's pieces (⌈ts[-1] / period⌉) and heads are unrolled at trace time: refuse, before
    sampling or compiling, more than the budget."""
    check_budget(
        "family",
        family.num_pieces(float(ts[-1])),
        MAX_PIECES,
        what="pieces of constant weights (ceil(ts[-1] / period), each one solve compiled in "
        "sequence)",
        hint="lengthen FieldFamily(period=...) or shorten ts",
    )
    check_budget(
        "family",
        family.heads,
        MAX_HEADS,
        what="heads (FieldFamily(heads=...), unrolled when the program is traced)",
    )


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
    statistic: AbstractStatistic | None = None,
    family: FieldFamily | None = None,
    layout: DeviceLayout | None = None,
    chunk_size: int | None = None,
    beta_block: int | None = None,
    slots: int | None = None,
    backend: str | None = None,
    rtol: float = 1e-3,
    atol: float = 1e-6,
    max_steps: int = 2000,
    dtype=None,
    progress: bool = True,
    statistics: bool = False,
) -> Float[Array, "betas ts"] | PhaseDiagramResult:
    r"""Estimate P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) on a (β, t) grid for uniform initial tokens:
    Fig. 3 (SA, Q = K = V = I) and Fig. 5 (random Q, K, V ensembles) of arXiv:2312.10794.

    The statistic is the clustered fraction over ordered pairs i ≠ j averaged over
    ``realizations`` independent systems (each pair is exchangeable with (1, 2), so this is an
    unbiased, lower-variance estimate of the pair probability).

    **Sampling.** Realisation r draws its tokens (and, per system, its (B, V) from
    ``ensemble``) from ``jax.random.split(key)``-derived keys, and the *same* draws are used
    for every β (common random numbers: differences across β are not sampling noise). With
    ``shared_weights=True`` one (B, V) is drawn for all realisations.

    **Span reduction.** With V = I the flow stays in span{x_j(0)}: Q = K = I (d ≥ 3) runs in
    log-distance form (n × n) with the Gram matrix sampled from the Bartlett factor
    (:func:`bartlett_tokens`), so d = 1024 costs what d = n costs; other Q, K run in
    min(n, d) coordinates. General V runs in R^d.

    **Solver.** Dormand–Prince 5(4) with scipy's ``RK45`` error control and step size rule per
    system (``rtol``, ``atol``; RMS norm over the system's state; float32 tolerances are
    floored at rtol 1e-5, atol 1e-6), cubic Hermite output at ``ts`` (no extra field
    evaluations). With V = I a fully clustered system stops early (it stays clustered). At
    the defaults P is accurate to a few 1e-3, about what one merge of two clusters in one
    realisation moves it by; ``dtype=float32`` gives the same P as float64 at equal tolerance.

    **Device layout.** Each compiled call integrates chunk_size × beta_block systems as a
    queue over ``slots`` lanes (a finished system's lane takes the next one); calls are spread
    over ``jax.local_devices()`` (set ``jax_num_cpu_devices`` before JAX starts to use every
    CPU core). ``backend`` (or ``layout=DeviceLayout(backend=...)``) picks the preset: ``"cpu"``
    (256 × 8 systems per call, 128 in flight, counts summed on the host after each call) or
    ``"accelerator"`` (1024 × 32 per call, 16384 in flight, counts summed on the device);
    None reads ``jax.default_backend()``. ``chunk_size``, ``beta_block`` and ``slots`` override
    the preset. Results are deterministic given ``key`` and do not depend on the layout
    (bitwise in float64; in float32 XLA may round a batched product differently for another
    batch shape, which moves P by at most one realisation's merge: docs/benchmarks.md).

    Args:
        key: PRNG key.
        n, d: tokens and dimension.
        betas: 1-d array of finite β (either sign).
        ts: 1-d non-decreasing save times ≥ 0 (the flow starts at 0).
        realizations: number of independent systems.
        delta: clustering threshold δ.
        normalization: ``"softmax"`` (SA) or ``"n"`` (USA).
        ensemble: an :class:`AttentionEnsemble` (e.g. ``FIG5_ENSEMBLES["a"]``); None is
            Q = K = V = I.
        shared_weights: one (B, V) draw for all systems instead of one per system.
        statistic: what to record, an :class:`AbstractStatistic` (:class:`ClusteredFraction`,
            :class:`ClusterCount`, :class:`SpanDimension`, :class:`Energy`,
            :class:`GramStatistic`); None is ``ClusteredFraction(delta)`` (``delta`` is
            used only then). Any statistic but the mean clustered fraction, and any
            non-default ``family``, runs on the general engine (see
            :func:`phase_diagram_from_tokens`).
        family: the attention dynamics, a :class:`FieldFamily` (heads, causal mask,
            normalisation scheme, weights redrawn every ``period``); None is single-head
            (SA)/(USA). With an ensemble, each head and each piece draws its own (B, V).
            Without one, H heads are H identical identity heads: single-head attention at
            H× speed (P(heads=H, t) = P(heads=1, H·t)), which warns.
        layout: the device layout as one argument, a :class:`attnflow.DeviceLayout`
            (``backend``, ``chunk_size``, ``beta_block``, ``slots``); None is the preset.
        chunk_size: realisations per compiled call (memory ∝ chunk_size × n × m).
        beta_block: β values per compiled call.
        slots: systems integrated side by side in a call (memory ∝ slots × n × m).
        backend: the layout preset, ``"cpu"`` or ``"accelerator"`` (or a JAX platform name).
            These four keywords are ``layout`` spelt out; give one or the other.
        rtol, atol, max_steps: integrator controls (max_steps counts the steps of one system).
        dtype: float dtype (default: JAX's default float).
        progress: report the systems done (a bar on a terminal, log lines otherwise;
            compilation is reported as its own phase).
        statistics: deprecated (a DeprecationWarning): return a
            :class:`attnflow.PhaseDiagramResult` (P with each system's accepted and rejected
            steps and the evaluation counts, reduced engines); use :func:`phase_diagram_result`.

    Returns:
        (len(betas), len(ts)) array (or the result with statistics).

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> P = af.phase_diagram(jr.key(0), n=4, d=64, betas=[0.5, 8.0], ts=[0.0, 3.0, 30.0],
        ...                      realizations=8, progress=False)
        >>> P.shape, float(P[0, 0]), float(P[0, -1])
        ((2, 3), 0.0, 1.0)
    """
    key = None if key is None else check_key(key)
    n = _positive_int(n, "n")
    if n < 2:
        raise ValueError(f"n: expected at least two tokens, got n = {n}")
    d = _positive_int(d, "d")
    if d < 2:
        raise ValueError(f"d: the sphere S^(d-1) needs d >= 2, got d = {d}")
    R = _positive_int(realizations, "realizations")
    shared_weights = check_bool(shared_weights, "shared_weights")
    if ensemble is not None and not isinstance(ensemble, AttentionEnsemble):
        raise ValueError(
            f"ensemble: expected an AttentionEnsemble or None, got {type(ensemble).__name__}"
        )
    # Before sampling: the checks of phase_diagram_from_tokens, made once and without the wait.
    layout = _layout(layout, backend, chunk_size, beta_block, slots)
    engine_args = (*layout, rtol, atol, max_steps)
    betas, ts, statistic, family, statistics, engine = _check_options(
        betas, ts, delta, normalization, statistic, family, statistics, progress, engine_args
    )
    if ensemble is None:
        _warn_identical_heads(family)
    dtype = check_dtype_option(dtype, "dtype")
    dtype = dtype if dtype is not None else jnp.result_type(float)
    if ensemble is None or ensemble.bilinear == "identity":
        _check_usa_overflow(betas, normalization, dtype)
    check_budget(
        "realizations",
        R * family.num_pieces(float(ts[-1])) * family.heads * d * max(n, d),
        MAX_ARRAY_ELEMENTS,
        what="numbers in the sampled tokens and weights (realizations x pieces x heads x d x "
        "max(n, d))",
        factors={"realizations": R, "n": n, "d": d},
    )
    x0, weights = _sample(key, n, d, R, dtype, ensemble, shared_weights, family, float(ts[-1]))
    Q, K, V = (weights.get(name) for name in ("Q", "K", "V"))
    return _from_tokens(
        x0, Q, K, V, betas, ts, normalization, True, statistic, family, statistics, engine
    )


def _sample(key, n, d, R, dtype, ensemble, shared_weights, family, t1):
    """Initial tokens (R, n, ·) and the Q, K, V arguments of :func:`phase_diagram_from_tokens`:
    Bartlett coordinates for Q = K = V = I (rotation-invariant families), tokens in R^d and
    (B, V) draws otherwise (one per realisation, piece and head for a non-default family)."""
    k_tokens, k_weights = jr.split(key)
    plain = ensemble is None or (ensemble.bilinear == "identity" and ensemble.value_is_identity)
    if plain and family.rotation_invariant:
        return bartlett_tokens(k_tokens, n, d, (R,), dtype), {}
    x0 = unit_rows(jr.normal(k_tokens, (R, n, d), dtype))
    if plain:
        return x0, {}
    if not family.plain:
        L, H = family.num_pieces(t1), family.heads
        lead = (L, H) if shared_weights else (R, L, H)
        B, V = jax.vmap(lambda k: ensemble.sample(k, d, dtype))(
            jr.split(k_weights, math.prod(lead))
        )
        B, V = (jnp.broadcast_to(m.reshape(lead + (d, d)), (R, L, H, d, d)) for m in (B, V))
    elif shared_weights:
        B, V = ensemble.sample(k_weights, d, dtype)
    else:
        B, V = jax.vmap(lambda k: ensemble.sample(k, d, dtype))(jr.split(k_weights, R))
    # B = QᵀK enters as Q = I, K = B; V = I is passed as None to keep the span reduction.
    Q = jnp.broadcast_to(jnp.eye(d, dtype=dtype), B.shape)
    return x0, dict(Q=Q, K=B, V=None if ensemble.value_is_identity else V)


__all__ = ["phase_diagram", "phase_diagram_from_tokens"]


def _rich_signature(entry):
    """``entry``'s signature without ``statistics``, returning a PhaseDiagramResult."""
    signature = inspect.signature(entry)
    parameters = [p for name, p in signature.parameters.items() if name != "statistics"]
    return signature.replace(parameters=parameters, return_annotation=PhaseDiagramResult)


def _no_flag(options):
    if "statistics" in options:
        raise TypeError("statistics: the result entry points always return the result")


def phase_diagram_result(key: PRNGKeyArray, **options) -> PhaseDiagramResult:
    """:func:`phase_diagram` with the work its integration took: the same arguments (but
    ``statistics``), and always a :class:`attnflow.PhaseDiagramResult` (``probability``, the
    array :func:`phase_diagram` returns, bitwise; each system's ``accepted`` and ``rejected``
    steps; ``slot_steps``; ``evaluations``). It replaces ``phase_diagram(statistics=True)``.

    The step counts come from the reduced engines (the mean clustered fraction of the default
    family); a ``statistic`` or ``family`` that runs on the general engine is refused.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> r = af.phase_diagram_result(jr.key(0), n=4, d=64, betas=[0.5, 8.0],
        ...                             ts=[0.0, 3.0, 30.0], realizations=8, progress=False)
        >>> r.probability.shape, r.accepted.shape, float(r.probability[0, -1])
        ((2, 3), (2, 8), 1.0)
    """
    _no_flag(options)
    return phase_diagram(key, **options, statistics=_RESULT)


def phase_diagram_from_tokens_result(
    x0: Float[ArrayLike, "realizations n d"], **options
) -> PhaseDiagramResult:
    """:func:`phase_diagram_from_tokens` with the work its integration took: the same
    arguments (but ``statistics``), and always a :class:`attnflow.PhaseDiagramResult` (see
    :func:`phase_diagram_result`). It replaces ``phase_diagram_from_tokens(statistics=True)``.

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 6, 3, batch_shape=(4,))
        >>> r = af.phase_diagram_from_tokens_result(x0, betas=[1.0], ts=[0.0, 30.0])
        >>> r.probability.shape, r.accepted.shape, float(r.probability[0, 1])
        ((1, 2), (1, 4), 1.0)
    """
    _no_flag(options)
    return phase_diagram_from_tokens(x0, **options, statistics=_RESULT)


phase_diagram_result.__signature__ = _rich_signature(phase_diagram)
phase_diagram_from_tokens_result.__signature__ = _rich_signature(phase_diagram_from_tokens)
