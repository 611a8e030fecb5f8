"""attnflow: the mathematics of Transformers in JAX.

Tokens are particles on the unit sphere, layers are time, self-attention is an interacting
particle vector field whose empirical measure follows a Wasserstein gradient flow of an
interaction energy (Geshkovski, Letrouit, Polyanskiy, Rigollet, arXiv:2312.10794).
"""

import importlib.metadata

from ._diagnostics import (
    cluster_labels as cluster_labels,
    clustered_fraction as clustered_fraction,
    count_clusters as count_clusters,
    gram as gram,
)
from ._energy import AbstractEnergy as AbstractEnergy, InteractionEnergy as InteractionEnergy
from ._field import (
    AbstractField as AbstractField,
    GradientFlow as GradientFlow,
    MultiHeadAttention as MultiHeadAttention,
    SelfAttention as SelfAttention,
)
from ._metric import (
    AbstractMetric as AbstractMetric,
    AttentionMetric as AttentionMetric,
    WassersteinMetric as WassersteinMetric,
    riemannian_gradient as riemannian_gradient,
)
from ._solve import layers as layers, solve as solve
from ._sphere import (
    geodesic as geodesic,
    normalize as normalize,
    orthogonal_tokens as orthogonal_tokens,
    project_tangent as project_tangent,
    random_tokens as random_tokens,
    tangent as tangent,
)

__version__ = importlib.metadata.version("attnflow")
