"""Closed forms of dynamic metastability on the circle: two-body merge times, the number of
metastable clusters and the staircase bounds."""

import math


def two_body_log_time(gap: float, mass: float, beta: float) -> float:
    """log T for two point clusters of total mass m = m_a + m_b at gap u under (USA):
    u̇ = −m e^{β cos u} sin u, T = time for u to fall from ``gap`` to β^{-1/2}/10, in units where
    the shifted rate e^{β(cos u − 1)} is used (T_phys = e^{−β} T). By quadrature of
    ∫ e^{β(1 − cos v)} / (m sin v) dv, carried in the log domain."""
    from scipy.integrate import quad

    end = min(gap, 0.1 / math.sqrt(beta))
    peak = beta * 2 * math.sin(gap / 2) ** 2
    value, _ = quad(
        lambda v: math.exp(beta * 2 * math.sin(v / 2) ** 2 - peak) / math.sin(v),
        end,
        gap,
        limit=200,
    )
    return peak + math.log(max(value, 1e-300)) - math.log(mass)
