"""Follow-up models of the attention dynamics: limit geometries of the pure (unprojected)
dynamics by the spectrum of V (arXiv:2305.05465), and the time-rescaled staircase of dynamic
metastability on the circle with its collision model (arXiv:2410.06833)."""

from ._limit_geometry import (
    LimitGeometry as LimitGeometry,
    ValueSpectrum as ValueSpectrum,
    limit_geometry as limit_geometry,
    value_spectrum as value_spectrum,
)
from ._metastability import (
    collision_model as collision_model,
    rescaled_staircase as rescaled_staircase,
)
