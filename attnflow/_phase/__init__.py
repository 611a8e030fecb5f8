"""Phase diagrams: P(⟨x_1(t), x_2(t)⟩ ≥ 1 − δ) on a (β, t) grid (paper Fig. 3 and Fig. 5).

The engine integrates many independent systems with a batched Dormand–Prince 5(4) scheme
(:mod:`attnflow._integrators._dopri5`: the tableau and step size rule of scipy's ``RK45``;
cubic Hermite output between steps), each system with its own adaptive step size and error
control, so a system's trajectory does not depend on which other systems share its batch: in
float64 results are bitwise invariant to ``chunk_size``, ``beta_block``, ``slots`` and the
device preset (:mod:`._settings`); in float32 XLA may round a batched product differently for
another batch shape, which moves P by rounding only (below the integration error). The systems
of one compiled call form a queue (:mod:`._queue`): ``slots`` of them are integrated side by
side and a slot whose system has finished (reached the last save time, or clustered completely)
is refilled from the queue, so cheap systems (small β, early clustering) never wait for
expensive ones. Statistics are computed only at the save times, from the dense output, and only
in the slots where some pair changes status during the step (:mod:`._integrate`).

Three state forms (:class:`._form.AbstractStateForm`, each with a ``rate`` and a ``clustered``
test), chosen automatically by the driver (:mod:`._driver`):

- V = I, Q = K = I: the log-distances L_ij = log D_ij of the distance matrix D = 1 − G = (|x_i
  − x_j|²/2)_ij (n × n), whose flow is closed (:mod:`._log_distance`, :mod:`._distance`; its
  overflow-safe row shift for β < 0 is compiled only for a grid with a negative β, being 0 for
  β ≥ 0). For uniform tokens D is sampled from the Bartlett factor of an n × d Gaussian matrix
  (:mod:`._bartlett`), so the cost does not depend on d. Used for every d ≥ 3 (D itself when δ
  is too close to the rounding level for logarithms, below about 2e-4 in float32); on the
  circle (d = 2), where the n × n form drifts off the rank-2 Gram matrices, the plain
  coordinates are used instead.
- V = I, any Q, K: coordinates in an orthonormal basis of span{x_j(0)} (dimension min(n, d)),
  with the bilinear form compressed to Uᵀ(QᵀK)U; exact, because ẋ_i ∈ span{x_j}
  (:mod:`._coordinates`).
- general V: coordinates in R^d.

Any other statistic (:mod:`._statistics`) or field family (multi-head, causal, a normalisation
scheme, weights redrawn every period: :class:`._general.FieldFamily`) runs on the general engine
(:mod:`._general`): one :func:`attnflow.solve` per system, batched over realisations.
"""

from ._bartlett import bartlett_tokens as bartlett_tokens
from ._driver import (
    phase_diagram as phase_diagram,
    phase_diagram_from_tokens as phase_diagram_from_tokens,
    phase_diagram_from_tokens_result as phase_diagram_from_tokens_result,
    phase_diagram_result as phase_diagram_result,
)
from ._general import FieldFamily as FieldFamily
from ._run import PhaseDiagramResult as PhaseDiagramResult
from ._settings import DeviceLayout as DeviceLayout
from ._statistics import (
    AbstractStatistic as AbstractStatistic,
    ClusterCount as ClusterCount,
    ClusteredFraction as ClusteredFraction,
    Energy as Energy,
    GramStatistic as GramStatistic,
    SpanDimension as SpanDimension,
)
