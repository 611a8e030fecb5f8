"""The slot queue: the systems of one compiled call integrated side by side, one per slot.

``slots`` systems are integrated at once, each with its own time, step size and error test; a
slot whose system has finished (reached the last save time, clustered completely, or run out
of steps) is idle, and idle slots are refilled from the queue of systems not yet started, so
cheap systems (small β, early clustering) never wait for expensive ones.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int


class Slots(NamedTuple):
    """The state of the W slots of the queue (one entry per slot; N = n·m, the flat state)."""

    active: Bool[Array, " W"]
    """The slot holds a system that is still being integrated."""
    b: Int[Array, " W"]
    """Index of the system's β in the call's β grid (its row of the counts)."""
    r: Int[Array, " W"]
    """Index of the system's realisation in the call."""
    beta: Float[Array, " W"]
    """The system's β."""
    params: Any
    """The system's own parameters of the state form (a dict of arrays, possibly empty)."""
    y: Float[Array, "W N"]
    """State at time t."""
    f: Float[Array, "W N"]
    """Its rate F(y) (the first stage of the next step)."""
    h: Float[Array, " W"]
    """Next trial step size."""
    t: Float[Array, " W"]
    """Time reached."""
    ptr: Int[Array, " W"]
    """Index of the first save time not yet counted."""
    accepted: Int[Array, " W"]
    """Accepted steps taken."""
    rejected: Int[Array, " W"]
    """Rejected steps taken."""
    after_rejection: Bool[Array, " W"]
    """The last step tried was rejected (the next accepted one may not grow the step)."""


def refill(slots: Slots, new: Slots, valid: Bool[Array, " k"]) -> tuple[Slots, Int[Array, ""]]:
    """Place the systems ``new`` (k of them, those with ``valid``) in the idle slots, in order:
    new system j goes to the j-th idle slot, if there is one. Returns the slots and the number
    of systems placed."""
    size = valid.shape[0]
    W = slots.active.shape[0]
    idle = ~slots.active
    n_idle = jnp.sum(idle, dtype=jnp.int32)
    j = jnp.arange(size, dtype=n_idle.dtype)
    slot = jnp.nonzero(idle, size=size, fill_value=W)[0]
    take = (j < n_idle) & valid
    # Slots not taken (index W) are dropped by the scatter.
    slot = jnp.where(take, slot, W)
    slots = jax.tree.map(lambda a, v: a.at[slot].set(v, mode="drop"), slots, new)
    return slots, jnp.sum(take, dtype=jnp.int32)
