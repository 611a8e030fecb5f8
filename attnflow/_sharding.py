"""Solving across devices with JAX's own SPMD engine: ensembles, and one system split by particles.

Both entry points wrap :func:`attnflow.solve` in ``jax.shard_map`` over a one-axis device mesh.
Every device runs its own diffrax loop (``check_vma=False``: no step of the loop is
communicated except what the code below asks for). On CPU, several host devices come from
``jax.config.update("jax_num_cpu_devices", 4)``; on a multi-GPU machine or a cluster the same
calls run unchanged once ``jax.distributed.initialize()`` has made every device visible
(docs/distributed.md). Both compile once per mesh, field structure (type, static fields, shapes,
dtypes), shapes and solver settings: a sweep over x0, β, Q, K, V, weights or t1 reuses the
compiled program (Python-scalar settings such as ``rtol`` of the ensemble or ``dt0`` are static).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P
from jaxtyping import Array, Float

from ._check import (
    as_array_like,
    check_field_callable,
    check_finite_scalar,
    check_positive_scalar,
    check_shape_tokens,
    check_tokens,
    public_names,
)
from ._fields._base import (
    AbstractAttention,
    AttentionScores,
    attend,
    query_rows,
    weights_from_args as _weights_from_args,
)
from ._fields._kernel import DEFAULT_BLOCK_SIZE
from ._integrators._tolerance import floor_tolerances
from ._solve import solve
from ._sphere import project_tangent


def _mesh_and_axis(mesh: Mesh | None) -> tuple[Mesh, str]:
    if mesh is None:
        mesh = Mesh(np.asarray(jax.devices()), ("devices",))
    if not isinstance(mesh, Mesh) or len(mesh.axis_names) != 1:
        raise ValueError(
            f"mesh: expected a one-axis jax.sharding.Mesh, got {mesh!r}; build one with "
            "jax.sharding.Mesh(np.asarray(devices), ('devices',))"
        )
    return mesh, mesh.axis_names[0]


def _as_arrays(field):
    """Python-float hyperparameters (β) as arrays: a sweep over them reuses the program."""
    return jax.tree.map(lambda leaf: jnp.asarray(leaf) if isinstance(leaf, float) else leaf, field)


def _pad_leading(tree, pad: int):
    """Append ``pad`` copies of the last entry along axis 0 of every array leaf."""
    if pad == 0:
        return tree
    return jax.tree.map(lambda a: jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]), tree)


def sharded_ensemble_solve(
    field,
    x0: Float[Array, "batch n d"],
    t1,
    *,
    args=None,
    batched_field: bool = False,
    mesh: Mesh | None = None,
    **solve_kwargs,
) -> diffrax.Solution:
    """Solve an ensemble of independent systems, split over the devices of ``mesh``.

    ``jax.shard_map`` gives each device a slice of the ensemble; each runs
    ``vmap(solve)`` with its own adaptive steps (no communication at all). The result equals
    ``jax.vmap(solve)`` on one device to rounding. An ensemble whose size is not a multiple of
    the number of devices is padded with copies of its last member, which are dropped again.

    Args:
        field: the vector field, shared by all members; with ``batched_field=True`` every
            array in it carries a leading ensemble axis (build it with ``eqx.filter_vmap``,
            e.g. one β per member).
        x0: (batch, n, d) initial tokens.
        t1: final time.
        args: ``None`` or a pytree whose arrays carry a leading ensemble axis (e.g. per-member
            weights of shape (batch, n)); member b's field receives its slice.
        batched_field: see ``field``.
        mesh: a one-axis device mesh; default all of ``jax.devices()``.
        **solve_kwargs: passed to :func:`attnflow.solve` (``ts``, ``rtol``, ``max_steps``…);
            ``throw`` defaults to False as under any ``vmap`` (inspect ``sol.result``).

    Returns:
        a ``diffrax.Solution`` whose arrays carry a leading ensemble axis (``sol.ys``:
        (batch, len(ts), n, d)).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 4, 3, batch_shape=(2,))
        >>> sol = af.sharded_ensemble_solve(af.SelfAttention(1.0), x0, 1.0)
        >>> sol.ys.shape
        (2, 1, 4, 3)
    """
    check_field_callable(field)
    x0 = as_array_like(x0, "x0")
    if jnp.ndim(x0) != 3:
        raise ValueError(
            f"x0: expected an ensemble of shape (batch, n, d), got shape {jnp.shape(x0)}"
        )
    check_shape_tokens(x0[0], "x0[0]")
    mesh, _ = _mesh_and_axis(mesh)
    solve_kwargs.setdefault("throw", False)
    # t1 in the tokens' dtype, as solve takes it: a Python float and an array hit one program.
    t1 = jnp.asarray(t1, jnp.result_type(x0))
    if not batched_field:  # a batched field's arrays all carry the ensemble axis
        field = _as_arrays(field)
    return _ensemble_program(field, x0, t1, args, solve_kwargs, batched_field, mesh)


@eqx.filter_jit
def _ensemble_program(field, x0, t1, args, solve_kwargs, batched_field, mesh):
    # Module-level and jitted on the static parts only (mesh, field structure, settings): a
    # repeated call with new x0, β, Q, K, V or args reuses the compiled program.
    axis = mesh.axis_names[0]
    batch = x0.shape[0]
    pad = (-batch) % mesh.devices.size
    params, static = eqx.partition(field, eqx.is_array)
    shared, shared_static = eqx.partition((t1, solve_kwargs), eqx.is_array)
    field_spec = P(axis) if batched_field else P()
    if batched_field:
        params = _pad_leading(params, pad)

    def on_device(x0_local, params_local, args_local, shared_local):
        t1_local, kwargs = eqx.combine(shared_local, shared_static)

        def one(x0_i, params_i, args_i):
            field_i = eqx.combine(params_i, static)
            return solve(field_i, x0_i, t1_local, args=args_i, **kwargs)

        return jax.vmap(one, in_axes=(0, 0 if batched_field else None, 0))(
            x0_local, params_local, args_local
        )

    sol = jax.shard_map(
        on_device,
        mesh=mesh,
        in_specs=(P(axis), field_spec, P(axis), P()),
        out_specs=P(axis),
        check_vma=False,
    )(_pad_leading(x0, pad), params, _pad_leading(args, pad), shared)
    return jax.tree.map(lambda a: a[:batch], sol)


def _check_attention(field) -> AbstractAttention:
    if isinstance(field, AbstractAttention):
        return field
    raise ValueError(
        "field: sharded_solve splits the particles of an attention field (any "
        f"attnflow.AbstractAttention), got {type(field).__name__}; for any other field place x0 "
        "with jax.device_put(x0, NamedSharding(mesh, P('devices'))) and call "
        "jax.jit(attnflow.solve) (docs/distributed.md)"
    )


def _local_attention(field, x_local, x_all, n, weights, offset):
    """The field's rows for the local queries against every gathered key, projected.

    The scores of the n real tokens (keys, values, weights, and the bias of every row) come from
    the field's own ``scores``; the local block of query rows is kept (:meth:`query_rows`) and
    the kernel, mapped over the heads, runs with the block's global offset for the causal mask.
    Query rows past n (padding) repeat row 0 and are dropped by the caller.
    """
    scores = field.scores(x_all[:n], weights)
    pad = x_all.shape[0] - n
    if pad:
        scores = _pad_queries(scores, pad)
    local = query_rows(scores, offset, x_local.shape[0])
    block = field._block_size(n) or DEFAULT_BLOCK_SIZE
    return project_tangent(x_local, attend(local, block, query_offset=offset))


def _pad_queries(scores, pad: int):
    if not isinstance(scores, AttentionScores):
        return tuple(_pad_queries(g, pad) for g in scores)

    def padded(a):
        first = jax.lax.slice_in_dim(a, 0, 1, axis=a.ndim - 2)
        return jnp.concatenate([a, jnp.repeat(first, pad, axis=a.ndim - 2)], axis=a.ndim - 2)

    bias = None if scores.bias is None else padded(scores.bias)
    return scores._replace(queries=padded(scores.queries), bias=bias)


def sharded_solve(
    field,
    x0: Float[Array, "n d"],
    t1,
    *,
    args=None,
    mesh: Mesh | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    **solve_kwargs,
) -> diffrax.Solution:
    """Solve ONE system whose particles are split across the devices of ``mesh``.

    Each device owns n/D tokens (queries). At every right-hand-side evaluation it all-gathers
    the tokens (keys and values: O(n·d) traffic, no n × n anywhere) and computes its rows of the
    attention field with :func:`attnflow.blocked_attention`. The step-size controller's error
    norm is the RMS norm of the whole system, summed across devices with ``psum``, so every
    device accepts and rejects the same steps and runs the same diffrax loop: the result equals
    :func:`attnflow.solve` on one device to rounding. If D does not divide n, the system is
    padded with copies of token 0 of weight zero, which neither act on the others nor enter
    the error norm, and dropped from the output.

    Args:
        field: any attention field (an :class:`attnflow.AbstractAttention`: SA, USA, causal,
            multi-head, stacked heads, positional, hardmax, Sinkhorn, causal ALiBi), with any
            parameters. Fields whose scores hold an n × n bias (positional, causal ALiBi, the
            Sinkhorn scalings, which need every logit) form it on every device; SA, USA and
            the heads never do.
        x0: (n, d) initial tokens on the sphere.
        t1: final time.
        args: ``None`` or the measure's weights (n,) (or ``{"weights": w}``), as for the fields.
        mesh: a one-axis device mesh; default all of ``jax.devices()``.
        rtol, atol: tolerances of the PID controller (same meaning as in :func:`attnflow.solve`).
        **solve_kwargs: passed to :func:`attnflow.solve` (``ts``, ``solver``, ``dt0``,
            ``max_steps``, ``throw``); ``stepsize_controller`` is set here.

    Returns:
        a ``diffrax.Solution`` with ``sol.ys`` of shape (len(ts), n, d), as from ``solve``.

    Example:
        >>> import jax.numpy as jnp, jax.random as jr, attnflow as af
        >>> x0 = af.random_tokens(jr.key(0), 6, 3)
        >>> sol = af.sharded_solve(af.SelfAttention(1.0), x0, 1.0)
        >>> ref = af.solve(af.SelfAttention(1.0), x0, 1.0)
        >>> bool(jnp.allclose(sol.ys, ref.ys, atol=1e-6))
        True
    """
    check_field_callable(field)
    x0 = check_tokens(x0, "x0")
    with public_names({"x": "x0"}):
        _check_attention(field).check_tokens(x0)  # validates the field before any tracing
    if "stepsize_controller" in solve_kwargs:
        raise ValueError(
            "stepsize_controller: sharded_solve builds its own (a PID controller whose error "
            "norm is reduced across devices); pass rtol and atol instead"
        )
    mesh, _ = _mesh_and_axis(mesh)
    n = x0.shape[0]
    weights = _weights_from_args(args, n)
    dtype = jnp.result_type(x0)
    t1 = check_finite_scalar(t1, "t1")  # before compiling the sharded program
    rtol = check_positive_scalar(rtol, "rtol", what="tolerance")
    atol = check_positive_scalar(atol, "atol", what="tolerance")
    rtol, atol = floor_tolerances(rtol, atol, dtype)
    # As arrays (the way solve takes them) t1 and the tolerances are traced, not static.
    t1, rtol, atol = (jnp.asarray(a, dtype) for a in (t1, rtol, atol))
    return _single_program(_as_arrays(field), x0, t1, weights, rtol, atol, solve_kwargs, mesh)


@eqx.filter_jit
def _single_program(field, x0, t1, weights, rtol, atol, solve_kwargs, mesh):
    # Jitted on the static parts only, as _ensemble_program.
    axis = mesh.axis_names[0]
    n, d = x0.shape
    devices = mesh.devices.size
    n_local = -(-n // devices)
    pad = n_local * devices - n
    dtype = x0.dtype
    if weights is None:
        weights = jnp.full((n,), 1.0 / n, dtype=dtype)
    weights = jnp.concatenate([jnp.asarray(weights, dtype), jnp.zeros((pad,), dtype)])
    real = jnp.arange(n + pad) < n
    x0 = jnp.concatenate([x0, jnp.repeat(x0[:1], pad, axis=0)])
    shared, shared_static = eqx.partition((field, t1, weights, solve_kwargs), eqx.is_array)

    def on_device(x0_local, real_local, shared_local):
        field_local, t1_local, weights_local, kwargs = eqx.combine(shared_local, shared_static)
        offset = jax.lax.axis_index(axis) * n_local

        def norm(error):
            squares = jnp.sum(jnp.where(real_local[:, None], error**2, 0.0))
            total = jax.lax.psum(squares, axis)
            # sqrt with a zero-safe derivative, like lineax.rms_norm
            safe = jnp.where(total > 0, total, 1.0)
            return jnp.where(total > 0, jnp.sqrt(safe), 0.0) / np.sqrt(n * d)

        def local_field(t, x_local, _):
            x_all = jax.lax.all_gather(x_local, axis, tiled=True)
            return _local_attention(field_local, x_local, x_all, n, weights_local[:n], offset)

        controller = diffrax.PIDController(rtol=rtol, atol=atol, norm=norm)
        sol = solve(local_field, x0_local, t1_local, stepsize_controller=controller, **kwargs)
        return sol.ys, eqx.tree_at(lambda s: s.ys, sol, None)

    ys, rest = jax.shard_map(
        on_device,
        mesh=mesh,
        in_specs=(P(axis), P(axis), P()),
        out_specs=(P(None, axis), P()),
        check_vma=False,
    )(x0, real, shared)
    return eqx.tree_at(lambda s: s.ys, rest, ys[:, :n], is_leaf=lambda a: a is None)
