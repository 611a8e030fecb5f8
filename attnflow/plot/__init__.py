"""Plotting: the only part of attnflow that imports matplotlib.

Pure functions taking arrays and an optional ``ax`` (and ``path`` to save); one private module per
topic, re-exported here.
"""

from ._circle import (
    hessian_kernel_curves as hessian_kernel_curves,
    tokens_on_circle as tokens_on_circle,
    tokens_on_sphere as tokens_on_sphere,
)
from ._clusters import (
    cluster_count_curve as cluster_count_curve,
    cluster_count_histogram as cluster_count_histogram,
    energy_staircase as energy_staircase,
    inner_product_histograms as inner_product_histograms,
)
from ._common import (
    clustered_fraction_curve as clustered_fraction_curve,
    save_figures as save_figures,
)
from ._density import (
    density_on_circle as density_on_circle,
    density_on_sphere as density_on_sphere,
)
from ._landscape import critical_point_spectra as critical_point_spectra
from ._movie import available_movie_format as available_movie_format, token_movie as token_movie
from ._phase import phase_diagram_heatmap as phase_diagram_heatmap
