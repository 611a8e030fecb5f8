"""attnflow.meanfield: the mean-field limit as a density — spectral grids on S¹ and S², one
differentiable continuity-equation solver returning a ``DensitySolution``, bridges to particles,
and what is built from its solves (the noisy phase diagram, a result Module; bump counts)."""

from ._bumps import count_bumps as count_bumps
from ._circle import CircleGrid as CircleGrid
from ._grid import (
    AbstractDensityGrid as AbstractDensityGrid,
    evaluate_by_quadrature as evaluate_by_quadrature,
    interaction_potential_by_quadrature as interaction_potential_by_quadrature,
)
from ._noisy_phase import (
    NoisyPhaseDiagram as NoisyPhaseDiagram,
    noisy_phase_diagram as noisy_phase_diagram,
)
from ._particles import (
    density_energy as density_energy,
    density_from_particles as density_from_particles,
    density_sliced_wasserstein as density_sliced_wasserstein,
    sample_density as sample_density,
)
from ._perturbation import random_perturbation as random_perturbation
from ._solve import (
    DensitySolution as DensitySolution,
    solve_density as solve_density,
    spectral_tail as spectral_tail,
)
from ._sphere import SphereGrid as SphereGrid
