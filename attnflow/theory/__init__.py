"""Closed forms from the papers (docs/maths.md), each tested against an independent computation.

Functions are grouped by topic in private modules (``_clustering``: clustering of SA/USA from
arXiv:2312.10794; ``_kinetic``: lost in the middle; ``_measures``: optimal measures;
``_metastability``: dynamic metastability on the circle; ``_stationary``: stationary states of
the noisy flow) and re-exported here.
"""

from ..landscape._circle import (
    hessian_kernel as hessian_kernel,
    strict_saddle_threshold as strict_saddle_threshold,
    tau_star as tau_star,
)
from ..landscape._configurations import (
    KNOWN_SPECTRA as KNOWN_SPECTRA,
    cell600 as cell600,
    cross_polytope as cross_polytope,
    demicube5 as demicube5,
    design_strength as design_strength,
    e8_roots as e8_roots,
    icosahedron as icosahedron,
    inner_product_spectrum as inner_product_spectrum,
    known_spectrum as known_spectrum,
    optimal_configuration as optimal_configuration,
    optimal_energy as optimal_energy,
    regular_polygon as regular_polygon,
    simplex as simplex,
)
from ._clustering import (
    clustering_beta as clustering_beta,
    clustering_time as clustering_time,
    cone_collapse_bound as cone_collapse_bound,
    cone_collapse_rate as cone_collapse_rate,
    orthogonal_inner_product as orthogonal_inner_product,
    orthogonal_inner_product_beta0 as orthogonal_inner_product_beta0,
    wendel as wendel,
)
from ._homogenized import (
    OrthogonalTradeoff as OrthogonalTradeoff,
    attention_concentration as attention_concentration,
    homogenized_antipodal_rate as homogenized_antipodal_rate,
    homogenized_collapse_probability as homogenized_collapse_probability,
    homogenized_critical_beta as homogenized_critical_beta,
    homogenized_orthogonal_tradeoff as homogenized_orthogonal_tradeoff,
    homogenized_pair_coefficients as homogenized_pair_coefficients,
)
from ._kinetic import (
    lost_in_the_middle_profile as lost_in_the_middle_profile,
    lost_in_the_middle_threshold as lost_in_the_middle_threshold,
    psi as psi,
)
from ._measures import (
    antipodal_energy as antipodal_energy,
    dirac_energy as dirac_energy,
    first_order_minimizer_coefficient as first_order_minimizer_coefficient,
    first_order_minimizer_density as first_order_minimizer_density,
    maximizer as maximizer,
    maximizer_switch as maximizer_switch,
    maximum_energy as maximum_energy,
    minimizer as minimizer,
    rectangle_critical_angle as rectangle_critical_angle,
    rectangle_energy as rectangle_energy,
    uniform_potential as uniform_potential,
    uniform_wasserstein_gradient as uniform_wasserstein_gradient,
)
from ._metastability import (
    metastable_cluster_count as metastable_cluster_count,
    metastable_growth_rates as metastable_growth_rates,
    two_body_log_time as two_body_log_time,
    uniform_circle_mode_count as uniform_circle_mode_count,
)
from ._stationary import (
    StationaryBranches as StationaryBranches,
    StationaryState as StationaryState,
    stationary_branches as stationary_branches,
    stationary_critical_kappa as stationary_critical_kappa,
    stationary_order_parameter as stationary_order_parameter,
    stationary_state as stationary_state,
)
