"""How the phase engine lays its systems out on a device: systems in flight, systems per compiled
call, and where the counts are summed.

None of these settings changes a result: every system is integrated with its own step size and
error test, and the counts are exact integer sums (bitwise equal in float64 for every setting;
in float32 XLA may round a batched product differently for another batch shape).
"""

from typing import Literal, NamedTuple

import equinox as eqx
import jax

from .._check import check_int

Backend = Literal["cpu", "accelerator"]


class EngineSettings(NamedTuple):
    """Layout of the systems of a phase diagram on a device."""

    chunk_size: int
    """Realisations per compiled call."""
    beta_block: int
    """β values per compiled call (a call integrates chunk_size × beta_block systems)."""
    slots: int
    """Systems integrated side by side within a call (a finished one's slot takes the next)."""
    accumulate: Literal["host", "device"]
    """Where the counts of the calls are summed: in NumPy after each call (two calls in flight
    per device), or on the device with every call dispatched at once and one transfer."""


# A CPU wants few systems per pass (the batch stays in cache, two calls keep two cores busy);
# an accelerator wants tens of thousands at once to fill its cores, and no host round trips.
PRESETS: dict[str, EngineSettings] = {
    "cpu": EngineSettings(chunk_size=256, beta_block=8, slots=128, accumulate="host"),
    "accelerator": EngineSettings(chunk_size=1024, beta_block=32, slots=16384, accumulate="device"),
}


def engine_settings(
    backend: str | None = None,
    *,
    chunk_size: int | None = None,
    beta_block: int | None = None,
    slots: int | None = None,
    accumulate: str | None = None,
) -> EngineSettings:
    """The preset for ``backend`` (``"cpu"``, ``"accelerator"``, or a JAX platform name such as
    ``"gpu"``; None reads ``jax.default_backend()``), with the settings given overriding it.

    Example:
        >>> from attnflow._phase._settings import engine_settings
        >>> engine_settings("cpu").slots, engine_settings("gpu", slots=64).slots
        (128, 64)
    """
    name = jax.default_backend() if backend is None else backend
    if name not in ("cpu", "accelerator", "gpu", "cuda", "rocm", "tpu", "METAL"):
        raise ValueError(
            f"backend: expected 'cpu', 'accelerator' or a JAX platform name, got {backend!r}"
        )
    preset = PRESETS["cpu" if name == "cpu" else "accelerator"]
    if accumulate not in (None, "host", "device"):
        raise ValueError(f"accumulate: expected 'host' or 'device', got {accumulate!r}")
    given = dict(chunk_size=chunk_size, beta_block=beta_block, slots=slots, accumulate=accumulate)
    return preset._replace(**{k: v for k, v in given.items() if v is not None})


class DeviceLayout(eqx.Module):
    """The device layout of a phase diagram, one argument for :func:`attnflow.phase_diagram`,
    :func:`attnflow.phase_diagram_from_tokens` and their ``_result`` entry points
    (``layout=DeviceLayout(slots=64)``): the same settings as their ``backend``, ``chunk_size``,
    ``beta_block`` and ``slots`` keywords (which still work), None for the preset's value. No
    result depends on it (bitwise in float64).

    Attributes:
        backend: the preset, ``"cpu"`` or ``"accelerator"`` (or a JAX platform name); None reads
            ``jax.default_backend()``.
        chunk_size: realisations per compiled call (memory ∝ chunk_size × n × m).
        beta_block: β values per compiled call.
        slots: systems integrated side by side in a call (memory ∝ slots × n × m).

    Example:
        >>> import jax.random as jr, attnflow as af
        >>> layout = af.DeviceLayout(backend="cpu", chunk_size=4, slots=8)
        >>> P = af.phase_diagram(jr.key(0), n=4, d=8, betas=[1.0], ts=[0.0, 30.0],
        ...                      realizations=8, layout=layout, progress=False)
        >>> P.shape, float(P[0, -1])
        ((1, 2), 1.0)
    """

    backend: str | None = None
    chunk_size: int | None = None
    beta_block: int | None = None
    slots: int | None = None

    def __check_init__(self):
        for name in ("chunk_size", "beta_block", "slots"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, low=1)
        engine_settings(self.backend)  # an unknown backend is refused here, not at the solve
