"""The energy landscape on (S^{d-1})^n: Riemannian Hessians, critical points and their
classification, surveys of critical points, the circle, and energies of measures.

``riemannian_hessian``, ``find_critical_point`` and ``classify_critical_point`` are also
available at the top level (``attnflow.riemannian_hessian``).
"""

from ._circle import (
    circle_angles as circle_angles,
    circle_energy as circle_energy,
    circle_field as circle_field,
    circle_tokens as circle_tokens,
    torus_hessian as torus_hessian,
)
from ._critical import (
    Classification as Classification,
    CriticalPoint as CriticalPoint,
    classify_critical_point as classify_critical_point,
    find_critical_point as find_critical_point,
)
from ._hessian import (
    hessian_extreme_eigenvalues as hessian_extreme_eigenvalues,
    hessian_vector_product as hessian_vector_product,
    riemannian_hessian as riemannian_hessian,
    rotation_orbit_basis as rotation_orbit_basis,
)
from ._measures import (
    MeasureOptimum as MeasureOptimum,
    first_variation as first_variation,
    maximize_measure_energy as maximize_measure_energy,
    measure_energy as measure_energy,
    measure_stationarity as measure_stationarity,
    minimize_measure_energy as minimize_measure_energy,
    sphere_points as sphere_points,
    wasserstein_gradient as wasserstein_gradient,
)
from ._survey import (
    LandscapeSurvey as LandscapeSurvey,
    SurveyPoint as SurveyPoint,
    configuration_signature as configuration_signature,
    survey_critical_points as survey_critical_points,
    symmetric_configurations as symmetric_configurations,
)
