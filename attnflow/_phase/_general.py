r"""The general phase-diagram engine: any attention field family and any statistic.

Each realisation is solved with :func:`attnflow.solve` (or a normalisation scheme's
:meth:`~attnflow.AbstractNormalizationScheme.solve`), batched with ``vmap`` over the realisations
of one β, and the statistic is evaluated on the tokens at the save times. Piecewise-constant
weights are integrated piece by piece, each piece from its own start to its own end, so the
adaptive solver never steps across a switch.
"""

import math
from typing import Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._check import check_finite_scalar, expected, failed_solves_message
from .._fields._self_attention import MultiHeadAttention, SelfAttention
from .._layers._schemes import (
    NGPT,
    AbstractNormalizationScheme,
    AttentionSublayer,
    PostLN,
)
from .._progress import Progress
from .._solve import solve
from ._statistics import AbstractStatistic


class FieldFamily(eqx.Module):
    r"""Which attention dynamics a phase diagram integrates (every system, every β).

    With H = ``heads`` heads sharing β, weights (Q_h, K_h, V_h) and L pieces,

        ẋ_i = P^⊥_{x_i} Σ_h Σ_{j ∈ J(i)} a^h_ij V_h^{(k)} x_j,
        a^h_ij ∝ exp(β⟨Q_h^{(k)} x_i, K_h^{(k)} x_j⟩)    for t ∈ [kT, (k + 1)T),

    where J(i) = {j ≤ i} when ``causal`` (KPR24) and all j otherwise, multi-head as paper (2.7)
    (arXiv:2312.10794), and the weights are redrawn every ``period`` T (piece k uses draw k: the
    authors' ``--regen_period``). ``scheme`` places the layer normalisation
    (:class:`attnflow.PreLN`, :class:`attnflow.PeriLN`, :class:`attnflow.NGPT`; ``None`` or
    :class:`attnflow.PostLN` is the paper's flow above); with a scheme the attention output
    Σ_h Σ_j a^h_ij V_h x_j is its sublayer and the statistics see the tokens z/|z|.

    The default family (one head, not causal, post-LN, no redraws) runs on the fast engines of
    :func:`attnflow.phase_diagram`; every other one on the general engine (one
    :func:`attnflow.solve` per system).

    Args:
        heads: number of heads H ≥ 1.
        causal: mask j > i in every head.
        scheme: a normalisation scheme or None.
        period: redraw period T > 0 of the weights, or None (fixed weights).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> fam = af.FieldFamily(causal=True)  # one causal head (heads=H needs an ensemble)
        >>> P = af.phase_diagram(jr.key(0), n=4, d=3, betas=[1.0], ts=[0.0, 20.0],
        ...                      realizations=4, family=fam, progress=False)
        >>> P.shape
        (1, 2)
    """

    heads: int = eqx.field(static=True, default=1)
    causal: bool = eqx.field(static=True, default=False)
    scheme: AbstractNormalizationScheme | None = None
    period: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if isinstance(self.heads, bool) or not isinstance(self.heads, (int, np.integer)):
            raise ValueError(f"heads: expected a positive integer, got {self.heads!r}")
        if self.heads < 1:
            raise ValueError(f"heads: expected a positive integer, got {self.heads!r}")
        if not isinstance(self.causal, (bool, np.bool_)):
            raise ValueError(f"causal: expected True or False, got {self.causal!r}")
        if self.scheme is not None and not isinstance(self.scheme, AbstractNormalizationScheme):
            raise ValueError(
                f"scheme: expected a normalisation scheme (PostLN(), PreLN(), PeriLN(), NGPT()) "
                f"or None, got {type(self.scheme).__name__}"
            )
        if self.period is not None and (
            isinstance(self.period, (bool, np.bool_))
            or not isinstance(self.period, (int, float, np.integer, np.floating))
            or not (math.isfinite(self.period) and self.period > 0)
        ):
            raise ValueError(
                f"period: expected a finite redraw period > 0 or None, got {self.period!r}"
            )

    @property
    def plain(self) -> bool:
        """One head, not causal, post-LN, fixed weights: the paper's (SA)/(USA)."""
        post = self.scheme is None or isinstance(self.scheme, PostLN)
        return self.heads == 1 and not self.causal and post and self.period is None

    @property
    def rotation_invariant(self) -> bool:
        """Whether identity weights give dynamics equivariant under rotations of R^d (so that
        tokens may be given in coordinates of their span): false only for a vector nGPT rate."""
        return not (isinstance(self.scheme, NGPT) and jnp.ndim(self.scheme.rate) > 0)

    def num_pieces(self, t_end: float) -> int:
        """Pieces of constant weights covering [0, t_end]: ⌈t_end / T⌉ (at least 1)."""
        t_end = check_finite_scalar(t_end, "t_end")
        if float(t_end) < 0:
            expected("t_end", "a final time >= 0 (the pieces cover [0, t_end])", float(t_end))
        if self.period is None:
            return 1
        return max(1, math.ceil(t_end / self.period))

    def pieces(self, ts) -> tuple[tuple[float, float, tuple[float, ...]], ...]:
        """(start, end, save times) of each piece: piece k owns [kT, (k + 1)T) (the last one
        also its end t_end = ts[-1])."""
        ts = [float(t) for t in ts]
        t_end = ts[-1]
        L = self.num_pieces(t_end)
        out = []
        for k in range(L):
            start = 0.0 if self.period is None else k * self.period
            end = t_end if k == L - 1 else (k + 1) * self.period
            last = k == L - 1
            save = tuple(t for t in ts if start <= t and (t < end or (last and t <= end)))
            out.append((start, end, save))
        return tuple(out)

    def field(self, beta, Q, K, V, normalization):
        """The attention field of one piece: Q, K, V are (H, ·, d) arrays or None."""

        if self.heads == 1:
            pick = lambda m: None if m is None else m[0]  # noqa: E731
            return SelfAttention(
                beta, pick(Q), pick(K), pick(V), normalization=normalization, causal=self.causal
            )
        return MultiHeadAttention(
            beta=(beta,) * self.heads,  # one β per head: H is known when Q, K, V are all None
            Q=Q,
            K=K,
            V=V,
            normalization=normalization,
            causal=self.causal,
        )


def _solve_piece(family, field, z, t0, t1, save, rtol, atol, max_steps):
    ts = jnp.asarray(save + (t1,), z.dtype)
    common = dict(t0=t0, ts=ts, rtol=rtol, atol=atol, max_steps=max_steps, args=None, throw=False)
    if family.scheme is None or isinstance(family.scheme, PostLN):
        sol = solve(field, z, t1, **common)
    else:
        sol = family.scheme.solve(AttentionSublayer(field), z, t1, **common)
    return sol.ys, sol.result == diffrax.RESULTS.successful


@eqx.filter_jit
def _general_solve(beta, x0, weights, family, pieces, normalization, rtol, atol, max_steps):
    """Tokens (chunk, T, n, d) of the systems x0 (chunk, n, d) at the save times at one β, and
    which systems failed (chunk,). (The solver stores these saves anyway; keeping the
    statistic out of this function lets every statistic share its compilation.)"""

    def one(x, w):
        z, ok, saved = x, jnp.asarray(True), []
        for k, (t0, t1, save) in enumerate(pieces):
            if t1 > t0:
                Q, K, V = (None if m is None else m[k] for m in (w["Q"], w["K"], w["V"]))
                field = family.field(beta, Q, K, V, normalization)
                ys, good = _solve_piece(family, field, z, t0, t1, save, rtol, atol, max_steps)
                ok = ok & good
                # A failed solve leaves non-finite states: keep the statistic finite (the
                # failure is reported by the caller).
                ys = jnp.where(good, ys, x)
                z, zs = ys[-1], ys[:-1]
            else:
                zs = jnp.broadcast_to(z, (len(save),) + z.shape)
            if save:
                saved.append(zs if family.scheme is None else family.scheme.tokens(zs))
        return jnp.concatenate(saved), ~ok

    return jax.vmap(one)(x0, weights)


@eqx.filter_jit
def _statistic_values(statistic, xs, beta):
    """statistic(x, β) for tokens xs (chunk, T, n, d): (chunk, T)."""
    return jax.vmap(jax.vmap(statistic, in_axes=(0, None)), in_axes=(0, None))(xs, beta)


def general_phase_diagram(
    x0,
    weights,
    *,
    betas,
    ts,
    statistic: AbstractStatistic,
    family: FieldFamily,
    normalization: Literal["softmax", "n"],
    chunk_size: int,
    rtol: float,
    atol: float,
    max_steps: int,
    progress: bool,
):
    """The statistic on the (β, t) grid through one solve per system.

    ``x0``: (R, n, d) initial tokens; ``weights``: dict with ``"Q"``, ``"K"``, ``"V"`` each None
    (identity) or an (R, L, H, ·, d) array (L pieces, H heads). Returns (len(betas), len(ts)).
    """
    R = x0.shape[0]
    dtype = x0.dtype
    pieces = family.pieces(ts)
    chunk = min(chunk_size, R)
    n_chunks = math.ceil(R / chunk)
    values = np.zeros((len(betas), R, len(ts)), np.dtype(dtype))
    failed = 0
    bar = Progress("phase diagram", len(betas) * R, "systems", enabled=progress)
    for b, beta in enumerate(betas):
        for c in range(n_chunks):
            # One shape per call (one compilation): the last chunk is padded by repetition.
            rows = np.minimum(np.arange(c * chunk, (c + 1) * chunk), R - 1)
            n_r = min(chunk, R - c * chunk)
            w = {name: None if m is None else m[rows] for name, m in weights.items()}
            beta_a = jnp.asarray(beta, dtype)
            xs, bad = _general_solve(
                beta_a, x0[rows], w, family, pieces, normalization, rtol, atol, max_steps
            )
            values[b, rows[:n_r]] = np.asarray(_statistic_values(statistic, xs, beta_a))[:n_r]
            failed += int(np.sum(np.asarray(bad)[:n_r]))
            bar.update(n_r)
    bar.close()
    if failed:
        raise RuntimeError(
            failed_solves_message(
                "phase diagram",
                failed,
                R * len(betas),
                ts[-1],
                max_steps,
                normalization=normalization,
                dtype=dtype,
            )
        )
    return statistic.aggregate(jnp.swapaxes(jnp.asarray(values), 0, 1))


__all__ = ["FieldFamily", "general_phase_diagram"]
