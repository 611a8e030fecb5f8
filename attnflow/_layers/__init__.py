"""Discrete time: the layer scan, the normalisation schemes that step it and the public layer
loops that delegate to them (above the fields and solve; nothing below imports it)."""

from ._loops import (
    layers as layers,
    lie_trotter_layers as lie_trotter_layers,
    residual_layers as residual_layers,
)
from ._scan import (
    check_layer_arguments as check_layer_arguments,
    check_num_layers as check_num_layers,
    iterate_layers as iterate_layers,
    residual_update as residual_update,
)
from ._schemes import (
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
