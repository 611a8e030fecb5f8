r"""Statistics of a phase diagram: a number per system and save time, reduced over realisations.

A statistic sees one system's tokens x (n, d) on the sphere at a save time (a function of their
Gram matrix G = x xᵀ, G_ij = ⟨x_i, x_j⟩) and β, and returns a scalar; the phase diagram reports its
mean (or median) over the realisations at every (β, t). The clustered fraction of paper Fig. 3
(arXiv:2312.10794, §6) is the default; the others are the statistics the authors' runner
(``phase-diagrams.py``: ``--cluster_sizes``, ``--plotdim``) can record, the interaction energy
of paper (3.5), and any user function of G.
"""

import abc
import functools
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._check import (
    as_array_like,
    check_delta,
    check_finite_scalar,
    check_positive_scalar,
    check_tokens,
    is_traced,
)
from .._diagnostics import clustered_fraction, count_clusters, gram
from .._energy import InteractionEnergy

_REDUCE = ("mean", "median")


def _check_reduce(reduce):
    if reduce not in _REDUCE:
        raise ValueError(f"reduce: expected 'mean' or 'median', got {reduce!r}")


def _check_threshold(delta):
    check_delta(delta)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)):
        raise ValueError(f"delta: expected a Python number, got {delta!r}")


class AbstractStatistic(eqx.Module):
    r"""A per-system statistic s(x, β) of the tokens x (n, d), a function of their Gram matrix
    G_ij = ⟨x_i(t), x_j(t)⟩, reduced over the R realisations of a phase diagram by ``reduce``:

        S[b, k] = mean_r s(x^r(t_k), β_b)    or    median_r s(x^r(t_k), β_b).

    Subclasses implement :meth:`__call__` on one system's tokens and carry ``reduce``
    (``"mean"`` or ``"median"``). Pass one as ``statistic=`` to :func:`attnflow.phase_diagram`.
    """

    reduce: eqx.AbstractVar[Literal["mean", "median"]]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        method = cls.__dict__.get("__call__")
        if method is not None and not getattr(method, "__isabstractmethod__", False):
            cls.__call__ = _checked_statistic(method)

    @abc.abstractmethod
    def __call__(self, x: Float[Array, "n d"], beta: Float[Array, ""]) -> Float[Array, ""]:
        """The statistic of one system of tokens x (n, d) at inverse temperature β."""

    def aggregate(self, values: Float[Array, "realizations ..."]) -> Float[Array, "..."]:
        """Reduce per-realisation values (R, …) over the first axis."""
        values = jnp.asarray(values)
        return jnp.mean(values, axis=0) if self.reduce == "mean" else jnp.median(values, axis=0)


def _checked_statistic(method):
    """A statistic's ``__call__`` at the public boundary: ``x`` may be a list (converted);
    eager calls check the tokens (on the sphere, finite) and β (a finite real scalar, not a
    string). Inside a phase diagram the arguments are traced and only converted."""
    if getattr(method, "_converts_array_likes", False):
        return method

    @functools.wraps(method)
    def __call__(self, x, beta):
        x = as_array_like(x, "x")
        if not is_traced(x):
            x = check_tokens(x, "x")
        if not is_traced(beta):
            check_finite_scalar(beta, "beta")
        return method(self, x, beta)

    __call__._converts_array_likes = True
    return __call__


class _ThresholdStatistic(AbstractStatistic):
    """A statistic of the graph i ~ j iff G_ij ≥ 1 − δ: ``delta`` (a static Python number) and
    ``reduce``, checked."""

    delta: float = eqx.field(static=True, default=1e-3)
    reduce: Literal["mean", "median"] = eqx.field(static=True, default="mean")

    def __check_init__(self):
        _check_threshold(self.delta)
        _check_reduce(self.reduce)


class ClusteredFraction(_ThresholdStatistic):
    r"""The fraction of ordered pairs i ≠ j with ⟨x_i, x_j⟩ ≥ 1 − δ (paper Fig. 3):

        s(G) = #{(i, j): i ≠ j, G_ij ≥ 1 − δ} / (n(n − 1)),

    whose mean over realisations estimates P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) (pairs are
    exchangeable). The default statistic of :func:`attnflow.phase_diagram`; with
    ``reduce="mean"`` and a plain field it runs on the fast reduced engines.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> round(float(af.ClusteredFraction()(x, 1.0)), 4)  # 2 of the 6 ordered pairs
        0.3333
    """

    def __call__(self, x, beta):
        return clustered_fraction(x, self.delta).astype(x.dtype)


class ClusterCount(_ThresholdStatistic):
    r"""The number of clusters: connected components of the graph i ~ j iff G_ij ≥ 1 − δ
    (as :func:`attnflow.count_clusters`; single linkage, so chains merge).

    ``reduce="median"`` is the authors' ``--cluster_sizes`` statistic (their δ = 1e-4), except
    that they count the rank of the thresholded matrix 1[G > 1 − δ], which equals the number of
    components when every component is a clique and exceeds it otherwise (a chain a ~ b ~ c
    with a ≁ c has rank 3 and one component): components are counted here.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> int(af.ClusterCount()(x, 1.0))
        2
    """

    def __call__(self, x, beta):
        return count_clusters(x, self.delta).astype(x.dtype)


class SpanDimension(AbstractStatistic):
    r"""The numerical dimension of span{x_1, …, x_n}: the number of eigenvalues of G above
    ``tol``,

        s(G) = #{k: λ_k(G) > tol},

    i.e. the rank of the token matrix x with singular values below √tol dropped. The default
    tol = 1e-3 is the authors' ``--plotdim`` statistic. Starts at min(n, d) for generic tokens
    and falls to 1 when all tokens have clustered (to one point or to ±x).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
        >>> int(af.SpanDimension()(x, 1.0))
        2
    """

    tol: float = eqx.field(static=True, default=1e-3)
    reduce: Literal["mean", "median"] = eqx.field(static=True, default="mean")

    def __check_init__(self):
        check_positive_scalar(self.tol, "tol", what="eigenvalue threshold")
        if not isinstance(self.tol, (int, float)):
            raise ValueError(f"tol: expected a Python number (a static field), got {self.tol!r}")
        _check_reduce(self.reduce)

    def __call__(self, x, beta):
        return jnp.sum(jnp.linalg.eigvalsh(gram(x)) > self.tol, dtype=x.dtype)


class Energy(AbstractStatistic):
    r"""The interaction energy of paper (3.5) with weights 1/n (§3.3),

        s(G, β) = 1/(2βn²) Σ_{i,j} exp(β G_ij),

    as :class:`attnflow.InteractionEnergy` (A = I). Needs β ≠ 0 (negative for β < 0). It
    increases along (USA)
    with V = I, which is its gradient ascent (paper §3.3); at a single cluster it equals
    e^β/(2β).

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> x = jnp.eye(2)  # (2e + 2)/(2·1·4)
        >>> round(float(af.Energy()(x, 1.0)), 6)
        0.92957
    """

    reduce: Literal["mean", "median"] = eqx.field(static=True, default="mean")

    def __check_init__(self):
        _check_reduce(self.reduce)

    def __call__(self, x, beta):
        return InteractionEnergy(jnp.asarray(beta, x.dtype))(x)


class GramStatistic(AbstractStatistic):
    r"""A user statistic s(x) = fn(G) of the Gram matrix G = x xᵀ (``fn``: a JAX-traceable
    function (n, n) → scalar), e.g. the smallest inner product ``lambda G: G.min()``.

    Example:
        >>> import jax.numpy as jnp, attnflow as af
        >>> s = af.GramStatistic(lambda G: G.min(), reduce="median")
        >>> float(s(jnp.array([[1.0, 0.0], [-1.0, 0.0]]), 1.0))
        -1.0
    """

    fn: Callable = eqx.field(static=True)
    reduce: Literal["mean", "median"] = eqx.field(static=True, default="mean")

    def __check_init__(self):
        if not callable(self.fn):
            raise ValueError(f"fn: expected a function of the Gram matrix, got {self.fn!r}")
        _check_reduce(self.reduce)

    def __call__(self, x, beta):
        value = jnp.asarray(self.fn(gram(x)))
        if value.shape != ():
            raise ValueError(f"fn: expected a scalar statistic, got shape {value.shape}")
        return value.astype(x.dtype)


__all__ = [
    "AbstractStatistic",
    "ClusterCount",
    "ClusteredFraction",
    "Energy",
    "GramStatistic",
    "SpanDimension",
]
