"""Measures on the sphere and distances between them: von Mises–Fisher samples, sliced
Wasserstein, MMD and Sinkhorn divergences, and the modes of Gaussian kernel density estimates
(arXiv:2412.09080)."""

from ._kde import (
    kde_band_fraction as kde_band_fraction,
    kde_mode_count as kde_mode_count,
    kde_modes as kde_modes,
)
from ._losses import sinkhorn_divergence as sinkhorn_divergence, squared_mmd as squared_mmd
from ._sampling import (
    sliced_wasserstein as sliced_wasserstein,
    von_mises_fisher as von_mises_fisher,
    von_mises_fisher_mixture as von_mises_fisher_mixture,
)
