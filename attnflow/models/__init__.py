"""Simulations of follow-up models, each returning a result ``eqx.Module``: limit geometries of
the pure (unprojected) dynamics by the spectrum of V (arXiv:2305.05465), and the time-rescaled
staircase of dynamic metastability on the circle with its collision model and the staircase
theorem's modified USA (arXiv:2410.06833; the closed forms of the staircase and metastability
theorems are in ``attnflow.theory``); the homogenised SDE limits of deep random multi-head
attention (arXiv:2604.01978); explicit Transformer parameters that carry N empirical measures
onto N targets (arXiv:2411.04551).

Names that moved to ``attnflow.theory`` (closed forms) stay importable from here, with a
DeprecationWarning naming their new home (``_MOVED``)."""

from ._homogenized import (
    HOMOGENIZED_REGIMES as HOMOGENIZED_REGIMES,
    homogenized_phase_diagram as homogenized_phase_diagram,
    random_qk_moments as random_qk_moments,
    random_qk_nodes as random_qk_nodes,
    solve_homogenized as solve_homogenized,
    solve_homogenized_fixed_qk as solve_homogenized_fixed_qk,
    solve_homogenized_random_qk as solve_homogenized_random_qk,
)
from ._limit_geometry import (
    LimitGeometry as LimitGeometry,
    ValueSpectrum as ValueSpectrum,
    limit_geometry as limit_geometry,
    value_spectrum as value_spectrum,
)
from ._metastability import (
    CollisionEvent as CollisionEvent,
    StaircaseMerge as StaircaseMerge,
    StaircaseRun as StaircaseRun,
    collision_model as collision_model,
    modified_usa as modified_usa,
    rescaled_staircase as rescaled_staircase,
)
from ._pairing import (
    PairingPhase as PairingPhase,
    pairing_phase as pairing_phase,
)
from ._transport import (
    MeasureInterpolation as MeasureInterpolation,
    interpolate_measures as interpolate_measures,
)

# Closed forms that moved to attnflow.theory: the old name still works, with a warning.
_MOVED = dict.fromkeys(
    [
        "MetastabilityBounds",
        "collision_radius",
        "metastability_bounds",
        "pair_merge_time",
        "staircase_log_time_change",
        "staircase_plateaus",
        "well_prepared_constant",
    ],
    "attnflow.theory",
)


def __getattr__(name):
    from .._legacy_access import moved_attribute

    return moved_attribute(__name__, _MOVED, name)
