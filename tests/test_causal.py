"""Causal self-attention (KPR24, MATH.md §1.7): with V = I the first token never moves and every
token converges to x_1(0), for Q = K = I and for random Q, K; the circle form agrees with an
independent scipy integration; the Rényi-centres notebook runs."""

import os
import pathlib
import runpy

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.integrate

import attnflow as af

N, D, BETA = 6, 2, 1.0
TS = np.array([0.5, 2.0, 5.0, 60.0, 120.0])


@pytest.fixture(scope="module")
def causal_runs():
    """Three runs in one compilation: Q = K = I, and two random (Q, K) scaled by d^{-1/2}."""
    keys = jr.split(jr.key(7), 3)
    x0 = jax.vmap(lambda k: af.random_tokens(k, N, D))(keys)
    gaussian = jr.normal(jr.key(8), (2, 2, D, D)) / np.sqrt(D)
    Q = jnp.concatenate([jnp.eye(D)[None], gaussian[:, 0]])
    K = jnp.concatenate([jnp.eye(D)[None], gaussian[:, 1]])

    @jax.jit
    @jax.vmap
    def run(Q, K, x):
        field = af.SelfAttention(BETA, Q, K, causal=True)
        return af.solve(field, x, TS[-1], ts=TS, rtol=1e-10, atol=1e-12, max_steps=4000).ys

    return np.asarray(x0), np.asarray(run(Q, K, x0))


def test_first_token_is_fixed(causal_runs):
    x0, ys = causal_runs
    for run in range(len(x0)):
        assert np.abs(ys[run, :, 0] - x0[run, 0]).max() <= 4e-16  # to rounding


def test_all_tokens_converge_to_the_first(causal_runs):
    x0, ys = causal_runs
    for run in range(len(x0)):
        overlap = ys[run, -1] @ x0[run, 0]
        assert overlap.min() > 1 - 1e-9
        # Not trivially clustered at the start.
        assert (x0[run] @ x0[run, 0]).min() < 0.5


def test_circle_form_matches_scipy(causal_runs):
    """θ̇_k = Σ_{j<k} e^{β(cos(θ_j−θ_k)−1)} sin(θ_j − θ_k) / Z_k, Z_k = Σ_{j≤k} e^{β(cos−1)}."""
    x0, ys = causal_runs

    def rhs(t, theta):
        diff = theta[None, :] - theta[:, None]
        weights = np.tril(np.exp(BETA * (np.cos(diff) - 1)))
        return (weights * np.sin(diff)).sum(1) / weights.sum(1)

    theta0 = np.arctan2(x0[0, :, 1], x0[0, :, 0])
    ref = scipy.integrate.solve_ivp(
        rhs, (0, TS[2]), theta0, t_eval=TS[:3], rtol=1e-12, atol=1e-12, method="DOP853"
    )
    for k in range(3):
        expected = np.stack([np.cos(ref.y[:, k]), np.sin(ref.y[:, k])], axis=1)
        np.testing.assert_allclose(ys[0, k], expected, atol=1e-8)


def test_causal_rejects_unknown_normalization():
    with pytest.raises(ValueError, match="normalization"):
        af.SelfAttention(1.0, normalization="sinkhorn", causal=True)


def test_renyi_notebook_runs_quick(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parents[1] / "notebooks" / "causal_renyi.py"
    namespace = runpy.run_path(os.fspath(path), run_name="__main__")
    assert namespace["centre_motion"] < namespace["follower_motion"]
