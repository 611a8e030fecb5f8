"""The retrieval profile of a field: how much of each source token the query token carries
after depth t1, by Monte Carlo over solves (the lost-in-the-middle observable of
:mod:`attnflow._fields._positional`, measured for any field)."""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._check import as_array_like, check_int, check_tokens
from ._solve import solve


def retrieval_profile(
    field: Callable,
    x0: Float[Array, "batch n d"],
    t1,
    *,
    query: int = -1,
    max_steps: int = 4096,
    rtol: float = 1e-6,
    atol: float = 1e-9,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    r"""Monte Carlo retrieval profile r(j) = E⟨x_q(t1), x_j(0)⟩ over a batch of prompts.

    How much of the source token at position j the query token (default the last) still carries
    after depth t1. For i.i.d. uniform prompts E x_j(0) = 0, so r(j) is the covariance between
    output and source. It shows a U shape by a different mechanism from the lost-in-the-middle
    paper: under causal softmax SA every token eventually collapses onto x_1(0) (primacy), while
    r(q) starts at 1 (recency). It is not that paper's observable: for the kinetic causal ALiBi
    model (:class:`CausalALiBiAttention`) use :func:`attnflow.theory.lost_in_the_middle_profile`,
    the limit N·Σ_n ω_n E cos(n(θ_N(t) − θ_{sN}(0))), and its particle Monte Carlo in
    ``attnflow.figures.lost_in_the_middle``.

    Args:
        field: any attnflow field (e.g. ``SelfAttention(β, causal=True)`` or
            :class:`PositionalAttention` with a causal ALiBi bias).
        x0: (batch, n, d) prompts, e.g. ``random_tokens(key, n, d, batch_shape=(B,))``.
        t1: depth (time) of the readout.
        query: position q of the reading token.

    Returns:
        ``(mean, standard_error)``, each of shape (n,): the batch mean of ⟨x_q(t1), x_j(0)⟩ and
        its standard error (sample std / √batch).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 4, 2, batch_shape=(8,))
        >>> mean, se = af.retrieval_profile(af.SelfAttention(1.0, causal=True), x0, 1.0)
        >>> mean.shape, bool(mean[-1] > 0.5)
        ((4,), True)
    """
    x0 = as_array_like(x0, "x0")
    if jnp.ndim(x0) != 3:
        raise ValueError(
            f"x0: expected a batch of prompts of shape (batch, n, d), got shape {jnp.shape(x0)}"
        )
    batch, n, _ = x0.shape
    if batch < 2:
        raise ValueError(f"x0: a Monte Carlo estimate needs at least 2 prompts, got {batch}")
    if not -n <= check_int(query, "query") < n:
        raise ValueError(f"query: expected a position in [-{n}, {n}), got {query}")
    # One (batch·n, d) check validates every prompt's tokens at once.
    x0 = check_tokens(x0.reshape(-1, x0.shape[-1]), "x0").reshape(x0.shape)

    def readout(prompt):
        sol = solve(field, prompt, t1, max_steps=max_steps, rtol=rtol, atol=atol, throw=False)
        return prompt @ sol.ys[-1][query], sol.result == diffrax.RESULTS.successful

    overlaps, ok = jax.vmap(readout)(x0)
    overlaps = eqx.error_if(
        overlaps,
        ~jnp.all(ok),
        "retrieval_profile: a solve stopped early "
        "(max_steps reached); raise max_steps or loosen rtol/atol",
    )
    mean = jnp.mean(overlaps, axis=0)
    stderr = jnp.std(overlaps, axis=0, ddof=1) / jnp.sqrt(batch)
    return mean, stderr


__all__ = ["retrieval_profile"]
