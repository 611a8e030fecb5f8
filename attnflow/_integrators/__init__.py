"""Integrators shared by the package: the fixed-step SDE driver (``_sde``)."""
