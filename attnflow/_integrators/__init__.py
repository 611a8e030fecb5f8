"""The package's integrators, one per kind: the adaptive Dormand–Prince 5(4) stepper
(:mod:`._dopri5`), the fixed-step SDE driver (:mod:`._sde`) and the float32 tolerance floor
(:mod:`._tolerance`)."""
