"""Reverse mode through an adaptive solve that stores each accepted step and skips the rejected
ones: :class:`StoredStepAdjoint`, a diffrax adjoint."""

import functools as ft

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jax import lax

from .._check import MAX_ARRAY_ELEMENTS, MAX_STEPS_LIMIT, check_budget, check_int


class StoredStepAdjoint(diffrax.AbstractAdjoint):
    r"""Exact reverse mode through ``solve`` that keeps what each accepted step needs for its
    backward pass and never revisits a rejected step.

    diffrax's default ``RecursiveCheckpointAdjoint`` stores a few checkpoints and, in the
    backward pass, re-runs every step after a checkpoint, rejected steps included, before it
    pulls the cotangent through. This adjoint instead linearises each step once, during the
    forward pass, and keeps the linearisations of up to ``steps`` *accepted* steps; the
    backward pass applies them in reverse order and nothing else.

    Why skipping rejected steps is exact: a rejected step leaves the state (y and the solver's
    first-same-as-last stage) unchanged, and diffrax's step-size controller is under
    ``stop_gradient``, so the derivative of a rejected step with respect to y and to the field's
    parameters is the identity. The gradient is the default adjoint's to rounding (bitwise equal
    in the tests, float32 and float64).

    A solve that accepts more steps than were stored is not an error: its backward pass falls
    back to diffrax's checkpointed reverse loop from the start (the default adjoint's gradient,
    at the default adjoint's cost plus the forward pass already run). Size ``steps`` to the
    solve (``sol.stats["num_accepted_steps"]``) to stay on the fast path.

    Cost: measured by ``benchmarks/grad.py`` against the default adjoint, in forward solves
    per gradient, on the benchmarks page (docs/benchmarks.md#bench-grad). Within each step,
    diffrax's Runge–Kutta stage loop still recomputes its stages in the backward pass (its
    ``scan_kind="bounded"`` alternative stores them but costs more), which is what stands
    between this and the floor of the flop count. The buffer is allocated and cleared on every
    call, so unused slots cost time as well as memory.

    Memory: ``min(steps, max_memory // step_bytes, max_steps)`` slots of one step's
    linearisation each (counted in full; XLA drops the parts the backward pass never reads,
    which leaves about 9 states of n × d per step for Tsit5: 0.55 MiB at n = 256, d = 64,
    float32).

    Restrictions (each raises a clear error): reverse mode only (forward mode and second
    derivatives need ``DirectAdjoint`` or ``ForwardMode``); no ``event``; t0, t1 and dt0 are not
    differentiated; no ``jax.vmap`` over solves whose steps differ across the batch (the
    default adjoint handles batches).

    Attributes:
        steps: how many accepted steps to store (a positive integer; default 64).
        max_memory: optional cap in bytes on the stored linearisations (a positive integer, or
            None for no cap beyond ``steps``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import attnflow as af
        >>> x0 = af.random_tokens(jax.random.key(0), 8, 3)
        >>> def loss(beta, adjoint):
        ...     field = af.SelfAttention(beta)
        ...     return jnp.sum(af.solve(field, x0, 2.0, adjoint=adjoint).ys[-1][0])
        >>> stored = jax.grad(loss)(1.0, af.StoredStepAdjoint(steps=16))
        >>> default = jax.grad(loss)(1.0, None)
        >>> bool(jnp.allclose(stored, default, rtol=1e-6))
        True
    """

    steps: int = eqx.field(static=True, default=64)
    max_memory: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_int(self.steps, "steps", low=1)
        check_budget(
            "steps",
            self.steps,
            MAX_STEPS_LIMIT,
            what="stored steps",
            hint="the default 64 recomputes the rest; use max_memory to bound the memory",
        )
        if self.max_memory is not None:
            check_int(self.max_memory, "max_memory", low=1)

    def loop(
        self,
        *,
        terms,
        saveat,
        init_state,
        max_steps,
        throw,
        passed_solver_state,
        passed_controller_state,
        event,
        t0,
        t1,
        dt0,
        **kwargs,
    ):
        """Called by ``diffrax.diffeqsolve`` (through :func:`attnflow.solve`), not by users: runs
        the solve's step loop, storing the linearisation of each accepted step for the
        backward pass (see the class docstring)."""
        del throw, passed_solver_state, passed_controller_state
        if event is not None:
            raise ValueError(
                "adjoint: StoredStepAdjoint does not support an event (the event time depends "
                "on the state); use the default adjoint"
            )
        t0, t1, dt0 = (
            None if value is None else eqxi.nondifferentiable(value, name=name)
            for value, name in ((t0, "t0"), (t1, "t1"), (dt0, "dt0"))
        )
        init_state = eqx.tree_at(
            lambda s: (s.tprev, s.tnext),
            init_state,
            (
                eqxi.nondifferentiable(init_state.tprev, name="t0"),
                eqxi.nondifferentiable(init_state.tnext, name="t0 + dt0"),
            ),
        )
        return self._loop(
            terms=terms,
            saveat=saveat,
            init_state=init_state,
            max_steps=max_steps,
            event=event,
            t0=t0,
            t1=t1,
            dt0=dt0,
            # A save between two step ends runs inside a step: diffrax's own reverse loop.
            inner_while_loop=ft.partial(eqxi.while_loop, kind="checkpointed"),
            outer_while_loop=ft.partial(
                _stored_while_loop, steps=self.steps, max_memory=self.max_memory
            ),
            **kwargs,
        )


_NO_VMAP = (
    "adjoint: StoredStepAdjoint cannot differentiate a solve under jax.vmap (each system of "
    "the batch takes its own steps); use the default adjoint for batches of solves"
)


class _TreedefBox:
    """Carries the structure of a step's linearisation from the forward to the backward pass of
    one call (the structure holds the step's linear program; the buffers hold its values)."""

    treedef = None


def _is_python_scalar(x):
    return isinstance(x, (bool, int, float, np.generic))


def _stored_while_loop(cond_fun, body_fun, init_val, *, max_steps, buffers=None, steps, max_memory):
    """``eqxi.while_loop``'s interface, reverse-differentiable by storing each accepted step's
    linearisation (the loop state must be diffrax's ``State``)."""
    del buffers  # written functionally: the body's `.at[].set` updates work on plain arrays
    init_val = jtu.tree_map(lambda x: jnp.asarray(x) if _is_python_scalar(x) else x, init_val)
    body = eqx.filter_closure_convert(body_fun, init_val)
    cond = eqx.filter_closure_convert(cond_fun, init_val)
    return _stored_loop((init_val, body), cond, max_steps, (steps, max_memory), _TreedefBox())


def _keep_going(cond, max_steps, step, val):
    keep_going = cond(val)
    return keep_going if max_steps is None else keep_going & (step < max_steps)


def _linearize(diff_val, static_val, body):
    """One step and its VJP with respect to the state's floating leaves and the body's."""
    body_diff, body_static = eqx.partition(body, eqx.is_inexact_array)

    def step(d, b):
        out = eqx.combine(b, body_static)(eqx.combine(d, static_val))
        return eqx.partition(out, eqx.is_inexact_array)

    out_diff, vjp_fn, out_static = jax.vjp(step, diff_val, body_diff, has_aux=True)
    return eqx.combine(out_diff, out_static), vjp_fn


@eqx.filter_custom_vjp
def _stored_loop(vjp_arg, cond, max_steps, limits, box):
    init_val, body = vjp_arg

    def plain_body(carry):
        step, val = carry
        return step + 1, body(val)

    keep_going = ft.partial(_keep_going, cond, max_steps)
    return lax.while_loop(lambda c: keep_going(*c), plain_body, (0, init_val))[1]


@_stored_loop.def_fwd
def _stored_loop_fwd(perturbed, vjp_arg, cond, max_steps, limits, box):
    del perturbed
    init_val, body = vjp_arg
    diff_val, static_val = eqx.partition(init_val, eqx.is_inexact_array)
    _, vjp_shape = eqx.filter_eval_shape(_linearize, diff_val, static_val, body)
    shapes = jtu.tree_leaves(vjp_shape)
    capacity = _capacity(shapes, *limits, max_steps)
    stored = [jnp.zeros((capacity, *s.shape), s.dtype) for s in shapes]

    def store_step(carry):
        step, num_stored, val, stored = carry
        new_val, vjp_fn = _linearize(*eqx.partition(val, eqx.is_inexact_array), body)
        leaves, box.treedef = jtu.tree_flatten(vjp_fn)
        # A rejected step is written to the next free slot and overwritten by the next step.
        slot = jnp.minimum(num_stored, capacity - 1)
        stored = [
            lax.dynamic_update_index_in_dim(buffer, leaf, slot, 0)
            for buffer, leaf in zip(stored, leaves, strict=True)
        ]
        accepted = new_val.num_accepted_steps > val.num_accepted_steps
        return step + 1, num_stored + accepted.astype(jnp.int32), new_val, stored

    carry = (0, jnp.array(0, jnp.int32), init_val, stored)
    keep_going = ft.partial(_keep_going, cond, max_steps)
    _, num_stored, final, stored = lax.while_loop(
        lambda c: keep_going(c[0], c[2]), store_step, carry
    )
    # Batched systems take different steps; diffrax's stage loop replays a stored step only if
    # every system of the batch is at the same one. Refuse vmap at trace time, by name.
    num_stored = eqxi.nonbatchable(num_stored, msg=_NO_VMAP)
    return final, (num_stored, stored)


@_stored_loop.def_bwd
def _stored_loop_bwd(residuals, grad_obj, perturbed, vjp_arg, cond, max_steps, limits, box):
    del perturbed, limits
    num_stored, stored = residuals
    init_val, body = vjp_arg
    diff_val, static_val = eqx.partition(init_val, eqx.is_inexact_array)
    ct_val = jtu.tree_map(
        lambda g, v: None if v is None else (jnp.zeros_like(v) if g is None else g),
        grad_obj,
        diff_val,
        is_leaf=lambda x: x is None,
    )
    ct_body = jtu.tree_map(jnp.zeros_like, eqx.filter(body, eqx.is_inexact_array))

    def pull_back(k, carry):
        ct_val, ct_body = carry
        index = num_stored - 1 - k
        vjp_fn = jtu.tree_unflatten(box.treedef, [buffer[index] for buffer in stored])
        ct_val, d_body = vjp_fn(ct_val)
        return ct_val, jtu.tree_map(jnp.add, ct_body, d_body)

    def from_stored_steps():
        return lax.fori_loop(0, num_stored, pull_back, (ct_val, ct_body))

    def by_recomputation():
        # More accepted steps than slots: diffrax's checkpointed reverse loop from the start.
        body_diff, body_static = eqx.partition(body, eqx.is_inexact_array)

        def run(d, b):
            out = eqxi.while_loop(
                cond,
                eqx.combine(b, body_static),
                eqx.combine(d, static_val),
                max_steps=max_steps,
                kind="checkpointed",
            )
            return eqx.filter(out, eqx.is_inexact_array)

        _, vjp_fn = jax.vjp(run, diff_val, body_diff)
        return vjp_fn(ct_val)

    return lax.cond(num_stored > stored[0].shape[0], by_recomputation, from_stored_steps)


def _capacity(shapes, steps, max_memory, max_steps) -> int:
    """Slots to allocate: ``steps``, fewer if ``max_memory`` or the step cap says so."""
    capacity = steps if max_steps is None else min(steps, max_steps)
    step_elements = sum(int(np.prod(s.shape)) for s in shapes)
    if max_memory is not None:
        step_bytes = sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in shapes)
        capacity = min(capacity, max_memory // max(step_bytes, 1))
    check_budget(
        "steps",
        max(capacity, 1) * step_elements,
        MAX_ARRAY_ELEMENTS,
        what="stored numbers (steps x the solver state of one step)",
        hint="lower steps or pass max_memory (bytes)",
    )
    return max(capacity, 1)
