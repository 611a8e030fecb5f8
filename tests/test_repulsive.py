"""Repulsive dynamics (V = −I, or the gradient descent of E_β) from random starts reach the
known optimal configurations of MATH.md §8: energy equal to the constructed optimum to 1e-8 and
the inner-product spectra of the table."""

import math
import os
import pathlib
import runpy

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
from attnflow import theory

SQ5 = math.sqrt(5)

# Several independent systems are integrated as one (N, 3) system whose attention is masked to
# blocks, so a single compilation covers every target (compilation dominates the cost). Masked
# entries get zero softmax weight, so each block follows its own (SA) with V = −I exactly.
# The polygon block starts in the plane x_3 = 0, which the flow preserves (ẋ_i ∈ span{x_j}).
TARGETS = [  # name, constructor kwargs, size, expected spectrum (MATH.md §8)
    ("simplex", {"n": 3, "d": 3}, 3, [(-1 / 2, 2)]),
    ("simplex", {"n": 4, "d": 3}, 4, [(-1 / 3, 3)]),
    ("cross-polytope", {"d": 3}, 6, [(-1, 1), (0, 4)]),
    ("icosahedron", {}, 12, [(-1, 1), (-1 / SQ5, 5), (1 / SQ5, 5)]),
    ("polygon", {"n": 7}, 7, [(math.cos(2 * math.pi * k / 7), 2) for k in (3, 2, 1)]),
]
SIZES = [size for *_, size, _ in TARGETS]
LABELS = np.repeat(np.arange(len(TARGETS)), SIZES)
SEEDS = 3


def random_start(key):
    x = af.random_tokens(key, len(LABELS), 3)
    planar = jnp.asarray(LABELS == len(TARGETS) - 1)[:, None]
    return af.normalize(jnp.where(planar, x * jnp.array([[1.0, 1.0, 0.0]]), x))


@pytest.fixture(scope="module")
def repelled():
    bias = np.where(LABELS[:, None] == LABELS[None, :], 0.0, -np.inf)
    field = af.PositionalAttention(1.0, bias, V=-jnp.eye(3))
    x0 = jax.vmap(random_start)(jr.split(jr.key(0), SEEDS))

    @jax.jit
    @jax.vmap
    def run(x):
        sol = af.solve(field, x, 4000.0, rtol=1e-8, atol=1e-10, max_steps=2000, throw=False)
        return sol.ys[-1], sol.result == diffrax.RESULTS.successful

    xs, ok = run(x0)
    assert bool(jnp.all(ok)), "every solve must finish within max_steps"
    return np.asarray(xs)


@pytest.mark.parametrize("index", range(len(TARGETS)))
def test_repulsive_sa_reaches_the_optimum(repelled, index):
    name, kwargs, _, spectrum = TARGETS[index]
    constructed = theory.optimal_configuration(name, **kwargs)
    optimum = float(af.InteractionEnergy(1.0)(constructed))
    for x in repelled:
        block = x[LABELS == index]
        energy = float(af.InteractionEnergy(1.0)(jnp.asarray(block)))
        assert abs(energy - optimum) <= 1e-8 * optimum
        values, mult = theory.inner_product_spectrum(block, tol=1e-4)
        np.testing.assert_allclose(values, [v for v, _ in spectrum], atol=1e-5)
        np.testing.assert_allclose(mult, [m for _, m in spectrum])


def test_gradient_descent_reaches_the_cross_polytope_in_r4():
    """The repulsive USA written as a gradient flow: GradientFlow(E_β, W2, descent=True)."""
    flow = af.GradientFlow(af.InteractionEnergy(1.0), af.WassersteinMetric(), descent=True)
    x0 = af.random_tokens(jr.key(3), 8, 4, batch_shape=(2,))
    run = jax.jit(
        jax.vmap(lambda x: af.solve(flow, x, 1000.0, rtol=1e-8, atol=1e-10, max_steps=1000).ys[-1])
    )
    optimum = float(theory.optimal_energy("cross-polytope", 1.0, d=4))
    for x in np.asarray(run(x0)):
        energy = float(af.InteractionEnergy(1.0)(jnp.asarray(x)))
        assert abs(energy - optimum) <= 1e-8 * optimum
        values, mult = theory.inner_product_spectrum(x, tol=1e-4)
        np.testing.assert_allclose(values, [-1, 0], atol=1e-5)
        np.testing.assert_allclose(mult, [1, 6])


def test_repulsion_notebook_runs_quick(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parents[1] / "notebooks" / "repulsion.py"
    namespace = runpy.run_path(os.fspath(path), run_name="__main__")
    assert abs(namespace["final_gap"]) < 1e-10
