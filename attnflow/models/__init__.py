"""Follow-up models of the attention dynamics: limit geometries of the pure (unprojected)
dynamics by the spectrum of V (arXiv:2305.05465), and the time-rescaled staircase of dynamic
metastability on the circle with its collision model, the staircase theorem's modified
USA, time change and plateaus, and the metastability theorem's separation, exponents and times
T₁, T₂ (arXiv:2410.06833); the homogenised SDE
limits of deep random multi-head attention (arXiv:2604.01978); explicit Transformer parameters
that carry N empirical measures onto N targets (arXiv:2411.04551)."""

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
    collision_model as collision_model,
    rescaled_staircase as rescaled_staircase,
)
from ._metastability_bounds import (
    MetastabilityBounds as MetastabilityBounds,
    metastability_bounds as metastability_bounds,
)
from ._pairing import (
    PairingPhase as PairingPhase,
    pairing_phase as pairing_phase,
)
from ._staircase_theorem import (
    collision_radius as collision_radius,
    modified_usa as modified_usa,
    pair_merge_time as pair_merge_time,
    staircase_log_time_change as staircase_log_time_change,
    staircase_plateaus as staircase_plateaus,
    well_prepared_constant as well_prepared_constant,
)
from ._transport import (
    MeasureInterpolation as MeasureInterpolation,
    interpolate_measures as interpolate_measures,
)
