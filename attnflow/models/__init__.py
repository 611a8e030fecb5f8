"""Follow-up models of deep attention (SDE limits, constructions), each tested against an
independent computation."""

from ._homogenized import (
    HOMOGENIZED_REGIMES as HOMOGENIZED_REGIMES,
    homogenized_phase_diagram as homogenized_phase_diagram,
    random_qk_moments as random_qk_moments,
    random_qk_nodes as random_qk_nodes,
    solve_homogenized as solve_homogenized,
    solve_homogenized_fixed_qk as solve_homogenized_fixed_qk,
    solve_homogenized_random_qk as solve_homogenized_random_qk,
)
