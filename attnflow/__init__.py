"""attnflow: the mathematics of Transformers in JAX.

Tokens are particles on the unit sphere, layers are time, self-attention is an interacting
particle vector field whose empirical measure follows a Wasserstein gradient flow of an
interaction energy (Geshkovski, Letrouit, Polyanskiy, Rigollet, arXiv:2312.10794).

The public names are imported on first use (PEP 562), so that ``import attnflow`` and the
``attnflow`` command's argument parsing do not start JAX; the imports below list them.
"""

import importlib as _importlib
import importlib.metadata as _metadata
import typing as _typing

if _typing.TYPE_CHECKING:  # read by type checkers and the docs, and by _public_names() below
    from . import (
        landscape as landscape,
        meanfield as meanfield,
        measures as measures,
        models as models,
        pretrained as pretrained,
        theory as theory,
    )
    from ._compile_cache import enable_compilation_cache as enable_compilation_cache
    from ._diagnostics import (
        cluster_centers as cluster_centers,
        cluster_labels as cluster_labels,
        cluster_masses as cluster_masses,
        clustered_fraction as clustered_fraction,
        count_clusters as count_clusters,
        energy_along as energy_along,
        gram as gram,
        inner_product_histogram as inner_product_histogram,
        wasserstein_to_dirac as wasserstein_to_dirac,
    )
    from ._energy import (
        AbstractEnergy as AbstractEnergy,
        AbstractRescaledEnergy as AbstractRescaledEnergy,
        InteractionEnergy as InteractionEnergy,
    )
    from ._ensembles import (
        FIG5_ENSEMBLES as FIG5_ENSEMBLES,
        GPT2_ENSEMBLE as GPT2_ENSEMBLE,
        AttentionEnsemble as AttentionEnsemble,
    )
    from ._fields._base import (
        AbstractAttention as AbstractAttention,
        AbstractField as AbstractField,
        AbstractPureField as AbstractPureField,
        AttentionScores as AttentionScores,
    )
    from ._fields._blocked import blocked_attention as blocked_attention
    from ._fields._causal_alibi import CausalALiBiAttention as CausalALiBiAttention
    from ._fields._feedforward import (
        FeedForward as FeedForward,
        TransformerBlock as TransformerBlock,
    )
    from ._fields._gradient_flow import GradientFlow as GradientFlow
    from ._fields._hardmax import (
        HardmaxRescaledAttention as HardmaxRescaledAttention,
        HardmaxSelfAttention as HardmaxSelfAttention,
        hardmax as hardmax,
    )
    from ._fields._kernel import attention as attention, attention_matrix as attention_matrix
    from ._fields._perceptron import Perceptron as Perceptron
    from ._fields._piecewise import PiecewiseConstant as PiecewiseConstant
    from ._fields._positional import (
        PositionalAttention as PositionalAttention,
        alibi_bias as alibi_bias,
        alibi_slopes as alibi_slopes,
    )
    from ._fields._pure import (
        PureSelfAttention as PureSelfAttention,
        RescaledSelfAttention as RescaledSelfAttention,
        rescale as rescale,
        unrescale as unrescale,
    )
    from ._fields._self_attention import (
        MultiHeadAttention as MultiHeadAttention,
        SelfAttention as SelfAttention,
    )
    from ._fields._sinkhorn import (
        SinkhornAttention as SinkhornAttention,
        SinkhornEnergy as SinkhornEnergy,
        sinkhorn_potentials as sinkhorn_potentials,
    )
    from ._integrators._stored_adjoint import StoredStepAdjoint as StoredStepAdjoint
    from ._layers import (
        iterate_layers as iterate_layers,
        layers as layers,
        lie_trotter_layers as lie_trotter_layers,
        residual_layers as residual_layers,
    )
    from ._layers._schemes import (
        NGPT as NGPT,
        AbstractNormalizationScheme as AbstractNormalizationScheme,
        AbstractOneSublayerScheme as AbstractOneSublayerScheme,
        AttentionSublayer as AttentionSublayer,
        LieTrotter as LieTrotter,
        MixLN as MixLN,
        PeriLN as PeriLN,
        PostLN as PostLN,
        PreLN as PreLN,
        ResidualOnly as ResidualOnly,
        SqrtScaling as SqrtScaling,
    )
    from ._metric import (
        AbstractMetric as AbstractMetric,
        AbstractRescaledMetric as AbstractRescaledMetric,
        AttentionMetric as AttentionMetric,
        WassersteinMetric as WassersteinMetric,
        riemannian_gradient as riemannian_gradient,
    )
    from ._noise import solve_sde as solve_sde
    from ._phase import (
        AbstractStatistic as AbstractStatistic,
        ClusterCount as ClusterCount,
        ClusteredFraction as ClusteredFraction,
        DeviceLayout as DeviceLayout,
        Energy as Energy,
        FieldFamily as FieldFamily,
        GramStatistic as GramStatistic,
        PhaseDiagramResult as PhaseDiagramResult,
        SpanDimension as SpanDimension,
        bartlett_tokens as bartlett_tokens,
        phase_diagram as phase_diagram,
        phase_diagram_from_tokens as phase_diagram_from_tokens,
        phase_diagram_from_tokens_result as phase_diagram_from_tokens_result,
        phase_diagram_result as phase_diagram_result,
    )
    from ._random_weights import random_multihead_attention as random_multihead_attention
    from ._retrieval import retrieval_profile as retrieval_profile
    from ._sharding import (
        sharded_ensemble_solve as sharded_ensemble_solve,
        sharded_solve as sharded_solve,
    )
    from ._solve import clustered_event as clustered_event, solve as solve
    from ._sphere import (
        equiangular_tokens as equiangular_tokens,
        geodesic as geodesic,
        normalize as normalize,
        orthogonal_tokens as orthogonal_tokens,
        project_tangent as project_tangent,
        random_tokens as random_tokens,
        tangent as tangent,
        tangent_basis as tangent_basis,
    )
    from .landscape import (
        classify_critical_point as classify_critical_point,
        find_critical_point as find_critical_point,
        riemannian_hessian as riemannian_hessian,
    )
    from .models._homogenized import (
        HOMOGENIZED_REGIMES as HOMOGENIZED_REGIMES,
        homogenized_phase_diagram as homogenized_phase_diagram,
        solve_homogenized as solve_homogenized,
    )

try:
    __version__ = _metadata.version("attnflow")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "unknown"

# Names that moved to a public subpackage: the old top-level name still works, with a warning.
_MOVED = {
    **dict.fromkeys(
        [
            "Classification",
            "CriticalPoint",
            "LandscapeSurvey",
            "MeasureOptimum",
            "SurveyPoint",
            "circle_angles",
            "circle_energy",
            "circle_field",
            "circle_tokens",
            "configuration_signature",
            "first_variation",
            "hessian_extreme_eigenvalues",
            "hessian_vector_product",
            "maximize_measure_energy",
            "measure_energy",
            "measure_stationarity",
            "minimize_measure_energy",
            "rotation_orbit_basis",
            "sphere_points",
            "survey_critical_points",
            "symmetric_configurations",
            "torus_hessian",
            "wasserstein_gradient",
        ],
        "attnflow.landscape",
    ),
    "LimitGeometry": "attnflow.models",
    "ValueSpectrum": "attnflow.models",
    "collision_model": "attnflow.models",
    "kde_mode_count": "attnflow.measures",
    "kde_modes": "attnflow.measures",
    "limit_geometry": "attnflow.models",
    "rescaled_staircase": "attnflow.models",
    "sinkhorn_divergence": "attnflow.measures",
    "sliced_wasserstein": "attnflow.measures",
    "squared_mmd": "attnflow.measures",
    "two_body_log_time": "attnflow.theory",
    "value_spectrum": "attnflow.models",
    "von_mises_fisher": "attnflow.measures",
    "von_mises_fisher_mixture": "attnflow.measures",
}

# Names replaced by another public name: the old name still works, with a warning naming the new.
_REPLACED = {
    "StackedMultiHeadAttention": (
        "attnflow._fields._self_attention",
        "attnflow.MultiHeadAttention(beta=beta, Q=Q, K=K, V=V, scale=scale), the one multi-head "
        "class (it stores the heads stacked)",
    ),
}


def _public_names() -> dict[str, tuple[str, str | None]]:
    """Each public name -> (module, attribute), from the ``TYPE_CHECKING`` imports above;
    attribute None for a subpackage (``from . import theory``)."""
    import ast
    import pathlib

    tree = ast.parse(pathlib.Path(__file__).read_text("utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If))
    names = {}
    for node in block.body:
        for alias in node.names:
            if node.module is None:  # from . import theory
                names[alias.asname or alias.name] = (f"{__name__}.{alias.name}", None)
            else:
                names[alias.asname or alias.name] = (f"{__name__}.{node.module}", alias.name)
    return names


_PUBLIC = _public_names()
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        module_name, attribute = _PUBLIC[name]
        module = _importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        globals()[name] = value  # later lookups skip this hook
        return value
    if name in _MOVED:
        import warnings

        warnings.warn(
            f"attnflow.{name} moved to {_MOVED[name]}.{name}; the old name will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_importlib.import_module(_MOVED[name]), name)
    if name in _REPLACED:
        import warnings

        module_name, replacement = _REPLACED[name]
        warnings.warn(
            f"attnflow.{name} is deprecated: use {replacement}; the old name will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_importlib.import_module(module_name), name)
    raise AttributeError(f"module 'attnflow' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
