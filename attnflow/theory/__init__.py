"""Closed forms only (no solves): formulas from the papers (docs/maths.md), each tested against an
independent computation.

Functions are grouped by concept in private modules (``_clustering``: clustering of SA/USA from
arXiv:2312.10794; ``_circle``: the Hessian kernel and τ*; ``_configurations``: optimal
configurations; ``_kinetic``: lost in the middle; ``_measures``: optimal measures;
``_metastability``: dynamic metastability on the circle; ``_metastability_bounds``: the caps and
times of the metastability theorem; ``_staircase``: the staircase theorem's merge times and
plateaus; ``_stationary``: stationary states of the noisy flow) and re-exported here.
"""

from .._attention_scaling import long_context_beta as long_context_beta
from ._circle import (
    hessian_kernel as hessian_kernel,
    strict_saddle_threshold as strict_saddle_threshold,
    tau_star as tau_star,
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
from ._configurations import (
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
from ._equiangular import (
    EquiangularAsymptotics as EquiangularAsymptotics,
    equiangular_asymptotics as equiangular_asymptotics,
    equiangular_inner_product as equiangular_inner_product,
    equiangular_time as equiangular_time,
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
from ._long_context import (
    EquiangularAttentionWeights as EquiangularAttentionWeights,
    PreLNEquiangularLayers as PreLNEquiangularLayers,
    equiangular_attention_weights as equiangular_attention_weights,
    long_context_limit as long_context_limit,
    pre_ln_equiangular_layers as pre_ln_equiangular_layers,
    pre_ln_equiangular_map as pre_ln_equiangular_map,
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
    fastest_growing_degree as fastest_growing_degree,
    metastable_cluster_count as metastable_cluster_count,
    metastable_growth_rates as metastable_growth_rates,
    two_body_log_time as two_body_log_time,
    uniform_circle_mode_count as uniform_circle_mode_count,
)
from ._metastability_bounds import (
    MetastabilityBounds as MetastabilityBounds,
    metastability_bounds as metastability_bounds,
)
from ._normalization import normalized_equiangular_rhs as normalized_equiangular_rhs
from ._staircase import (
    StaircasePlateaus as StaircasePlateaus,
    collision_radius as collision_radius,
    pair_merge_time as pair_merge_time,
    staircase_log_time_change as staircase_log_time_change,
    staircase_plateaus as staircase_plateaus,
    well_prepared_constant as well_prepared_constant,
)
from ._stationary import (
    StationaryBranches as StationaryBranches,
    StationaryState as StationaryState,
    stationary_branches as stationary_branches,
    stationary_critical_kappa as stationary_critical_kappa,
    stationary_order_parameter as stationary_order_parameter,
    stationary_state as stationary_state,
)
