"""Discrete time: the layer scan, the normalisation schemes that step it and the public layer
loops that delegate to them (above the fields and solve; nothing below imports it).

The loops and the scan are re-exported here; the schemes are imported from ``._schemes``, whose
``__all__`` is their one list (the flat namespace ``attnflow`` publishes them)."""

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
