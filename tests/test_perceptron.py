"""The perceptron field on R^d: exact flow map against diffrax, log-determinant against the
autodiff Jacobian, the gradient structure w_k = c_k a_k, and input validation."""

import os
import pathlib
import runpy

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attnflow as af

W = jnp.array([[1.0, 0.5], [-0.3, 1.0], [0.8, -0.6]])
A = jnp.array([[0.6, 0.8], [1.0, -0.2], [-0.5, 0.9]])
B = jnp.array([0.2, -0.4, 0.1])
SWITCHES = jnp.array([0.4, 0.9])
X0 = jnp.asarray(np.random.default_rng(0).normal(size=(12, 2)))


def test_flow_map_matches_diffrax():
    field = af.Perceptron(W, A, B, SWITCHES)
    assert field.num_pieces == 3 and field.width == 1
    y, _ = field.flow_map(X0, 1.5)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5(),
        0.0,
        1.5,
        0.01,
        X0,
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12, jump_ts=field.jump_times),
        max_steps=10_000,
    )
    assert np.abs(np.asarray(sol.ys[0]) - np.asarray(y)).max() < 1e-9
    # some points are active in some piece and inactive in another
    s = np.asarray(X0) @ np.asarray(A).T + np.asarray(B)
    assert np.any(s > 0) and np.any(s <= 0)


def test_logdet_matches_autodiff_jacobian():
    field = af.Perceptron(W, A, B, SWITCHES)
    _, logdet = field.flow_map(X0, 1.5)

    def one(x):
        return field.flow_map(x[None], 1.5)[0][0]

    jac = jax.vmap(jax.jacfwd(one))(X0)
    sign, ref = jnp.linalg.slogdet(jac)
    assert np.all(np.asarray(sign) > 0)
    assert np.allclose(np.asarray(logdet), np.asarray(ref), atol=1e-12)
    # the single-piece closed form: det = e^{ct} on the active side, 1 on the inactive side
    f1 = af.Perceptron(W[0], A[0], B[0])
    c = float(W[0] @ A[0])
    active = np.asarray(X0 @ A[0] + B[0]) > 0
    assert np.allclose(np.asarray(f1.flow_map(X0, 0.7)[1]), np.where(active, c * 0.7, 0.0))


def test_zero_rate_limit_and_time_window():
    w, a = jnp.array([1.0, -1.0]), jnp.array([1.0, 1.0])  # c = aᵀw = 0: s is constant
    f = af.Perceptron(w, a, 0.5)
    y, logdet = f.flow_map(X0, 2.0)
    s = np.maximum(np.asarray(X0 @ a + 0.5), 0)
    assert np.allclose(np.asarray(y), np.asarray(X0) + 2.0 * s[:, None] * np.asarray(w))
    assert np.allclose(np.asarray(logdet), 0.0)
    # composing [0, 0.6] then [0.6, 1.5] gives [0, 1.5]
    field = af.Perceptron(W, A, B, SWITCHES)
    mid, l1 = field.flow_map(X0, 0.6)
    end, l2 = field.flow_map(mid, 1.5, t0=0.6)
    full, lf = field.flow_map(X0, 1.5)
    assert np.allclose(end, full, atol=1e-13) and np.allclose(l1 + l2, lf, atol=1e-13)


def test_gradient_structure():
    c = jnp.array([0.7, -1.2, 0.4])
    field = af.Perceptron(c[:, None] * A, A, B)  # width 3, one piece, w_k = c_k a_k
    grad = jax.vmap(jax.grad(lambda x: field.potential(x[None])[0]))(X0)
    assert np.allclose(np.asarray(field(0.0, X0)), np.asarray(grad), atol=1e-13)
    with pytest.raises(ValueError, match="w: the field is a gradient only when"):
        af.Perceptron(W, A, B).potential(X0)


def test_float32_and_errors():
    f = af.Perceptron(
        W.astype(jnp.float32),
        A.astype(jnp.float32),
        B.astype(jnp.float32),
        SWITCHES.astype(jnp.float32),
    )
    y, logdet = f.flow_map(X0.astype(jnp.float32), 1.5)
    y64, logdet64 = af.Perceptron(W, A, B, SWITCHES).flow_map(X0, 1.5)
    assert y.dtype == jnp.float32 and np.allclose(y, y64, atol=1e-5)
    with pytest.raises(ValueError, match="w, a: expected equal shapes"):
        af.Perceptron(W, A[:2], B, SWITCHES)
    with pytest.raises(ValueError, match="b: expected shape"):
        af.Perceptron(W, A, B[:2], SWITCHES)
    with pytest.raises(ValueError, match="switch_times: expected L - 1 = 2"):
        af.Perceptron(W, A, B, jnp.array([1.0]))
    with pytest.raises(ValueError, match="switch_times: expected strictly increasing"):
        af.Perceptron(W, A, B, jnp.array([1.0, 0.5]))
    with pytest.raises(ValueError, match="width 1"):
        af.Perceptron(W, A, B).flow_map(X0, 1.0)
    with pytest.raises(ValueError, match=r"x: expected points of shape \(n, 2\)"):
        af.Perceptron(W, A, B, SWITCHES)(0.0, jnp.ones((3, 3)))
    with pytest.raises(ValueError, match="t1: expected t1 >= t0"):
        af.Perceptron(W, A, B, SWITCHES).flow_map(X0, -1.0)


def test_transport_notebook_runs_quick(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parents[1] / "notebooks" / "perceptron_transport.py"
    ns = runpy.run_path(os.fspath(path), run_name="__main__")
    assert ns["kl_final"] < 0.3 * ns["kl_initial"] and ns["mmd_final"] < ns["mmd_initial"]
