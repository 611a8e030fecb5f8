"""How the phase engine lays its systems out on a device: systems in flight, systems per compiled
call, and where the counts are summed.

None of these settings changes a result: every system is integrated with its own step size and
error test, and the counts are exact integer sums (bitwise equal in float64 for every setting;
in float32 XLA may round a batched product differently for another batch shape).
"""

from typing import Literal, NamedTuple

import jax

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
