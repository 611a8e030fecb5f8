"""Derivatives of solutions: autodiff through `solve` against finite differences and an
independent scalar ODE (paper (6.9)/(6.10)) solved with scipy."""

import functools
import pathlib
import runpy

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.integrate

import attnflow as af

# One shape everywhere so that each compiled function serves several tests (d >= n for the
# orthogonal start).
N, D = 4, 4
RTOL, ATOL = 1e-10, 1e-12
T1 = 1.0


def _random_params(seed):
    keys = jr.split(jr.key(seed), 4)
    eye = jnp.eye(D)
    return {
        "x0": af.random_tokens(keys[0], N, D),
        "beta": jnp.asarray(1.5, dtype=jnp.float64),
        "Q": eye + 0.3 * jr.normal(keys[1], (D, D)),
        "K": eye + 0.3 * jr.normal(keys[2], (D, D)),
        "V": eye + 0.3 * jr.normal(keys[3], (D, D)),
    }


def _weights(seed):
    kM, kW = jr.split(jr.key(seed))
    return jr.normal(kM, (N, N)), jr.normal(kW, (N, D))


def _phi(normalization, adjoint=None, differentiable_twice=False):
    """φ(x(t1)) = Σ_ij M_ij ⟨x_i, x_j⟩ + Σ W ⊙ x, a generic smooth functional of the final state."""

    def phi(params, M, W, t1):
        field = af.SelfAttention(
            params["beta"], params["Q"], params["K"], params["V"], normalization=normalization
        )
        sol = af.solve(
            field,
            params["x0"],
            t1,
            rtol=RTOL,
            atol=ATOL,
            adjoint=adjoint,
            differentiable_twice=differentiable_twice,
        )
        x = sol.ys[-1]
        return jnp.sum(M * (x @ x.T)) + jnp.sum(W * x)

    return phi


@functools.cache
def _value_and_grad(normalization):
    return jax.jit(jax.value_and_grad(_phi(normalization)))


def _value(normalization):
    # One compiled program per normalization serves values and gradients.
    return lambda *args: _value_and_grad(normalization)(*args)[0]


def _reverse(normalization):
    return lambda *args: _value_and_grad(normalization)(*args)[1]


@functools.cache
def _forward(normalization):
    phi = _phi(normalization, adjoint=diffrax.ForwardMode())
    return jax.jit(lambda p, dp, M, W, t1: jax.jvp(lambda q: phi(q, M, W, t1), (p,), (dp,))[1])


def _geodesic_rows(x, v, h):
    """Rows moved along great circles: x_i(h) = cos(h|v_i|) x_i + sin(h|v_i|) v_i/|v_i|."""
    speed = np.linalg.norm(v, axis=1, keepdims=True)
    return np.cos(h * speed) * x + np.sin(h * speed) * v / speed


def _perturbed(params, name, direction, h):
    p = dict(params)
    if name == "x0":
        p["x0"] = jnp.asarray(_geodesic_rows(np.asarray(params["x0"]), direction, h))
    else:
        p[name] = params[name] + h * jnp.asarray(direction, params[name].dtype)
    return p


def _directions(params, seed):
    keys = jr.split(jr.key(seed), 5)
    out = {}
    for key, (name, value) in zip(keys, params.items(), strict=True):
        v = np.asarray(jr.normal(key, jnp.shape(value)))
        if name == "x0":
            x = np.asarray(value)
            v = v - np.sum(v * x, axis=1, keepdims=True) * x
        out[name] = v / np.linalg.norm(v)
    return out


def _richardson_central_difference(f, h=1e-3):
    """f'(0) from central differences at h and h/2, extrapolated: error O(h⁴)."""

    def central(step):
        return (f(step) - f(-step)) / (2 * step)

    return (4 * central(h / 2) - central(h)) / 3


def _pairing(grad, direction):
    return sum(float(jnp.vdot(grad[k], direction[k])) for k in grad)


@pytest.mark.slow
@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_gradients_match_central_finite_differences(normalization):
    params = _random_params(0)
    M, W = _weights(1)
    grad = _reverse(normalization)(params, M, W, T1)
    value = _value(normalization)
    for name, direction in _directions(params, 2).items():
        fd = _richardson_central_difference(
            lambda h: float(value(_perturbed(params, name, direction, h), M, W, T1))  # noqa: B023
        )
        ad = float(jnp.vdot(grad[name], direction))
        assert np.isfinite(ad)
        assert abs(ad - fd) <= 1e-6 * abs(fd), (name, ad, fd)
        assert abs(fd) > 1e-3, name


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_reverse_and_forward_mode_agree(normalization):
    params = _random_params(3)
    M, W = _weights(4)
    direction = {k: jnp.asarray(v) for k, v in _directions(params, 5).items()}
    reverse = _pairing(_reverse(normalization)(params, M, W, T1), direction)
    forward = float(_forward(normalization)(params, direction, M, W, T1))
    assert abs(reverse - forward) <= 1e-9 * abs(forward), (reverse, forward)


def _gamma_scalar_ode(t, n, beta, normalization):
    """γ_β(t) from (6.9) (SA) or (6.10) (USA), integrated with scipy independently of attnflow."""

    def rhs(_, g):
        if normalization == "softmax":
            return 2 * (1 - g) * (1 + (n - 1) * g) / (np.exp(beta * (1 - g)) + n - 1)
        return 2 / n * np.exp(beta * g) * (1 - g) * ((n - 1) * g + 1)

    sol = scipy.integrate.solve_ivp(rhs, (0.0, t), [0.0], method="DOP853", rtol=1e-13, atol=1e-15)
    return sol.y[0, -1]


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_beta_derivative_of_orthogonal_inner_product_matches_scalar_ode(normalization):
    # Thm 6.8: from pairwise orthogonal tokens with Q = K = V = I every inner product equals γ_β(t).
    beta, t = 1.5, 1.2
    params = {
        "x0": af.orthogonal_tokens(N, D, key=jr.key(6)),
        "beta": jnp.asarray(beta, dtype=jnp.float64),
        "Q": jnp.eye(D),
        "K": jnp.eye(D),
        "V": jnp.eye(D),
    }
    M = jnp.zeros((N, N)).at[0, 1].set(1.0)
    W = jnp.zeros((N, D))
    gamma = float(_value(normalization)(params, M, W, t))
    dgamma = float(_reverse(normalization)(params, M, W, t)["beta"])
    fd = _richardson_central_difference(lambda h: _gamma_scalar_ode(t, N, beta + h, normalization))
    assert gamma == pytest.approx(_gamma_scalar_ode(t, N, beta, normalization), rel=1e-9)
    assert dgamma == pytest.approx(fd, rel=1e-6)
    assert abs(fd) > 1e-3


@pytest.mark.slow
def test_hessian_in_beta_matches_finite_differences_of_the_gradient():
    phi = _phi("softmax", differentiable_twice=True)
    params = _random_params(7)
    M, W = _weights(8)

    def of_beta(beta):
        return phi({**params, "beta": beta}, M, W, T1)

    hessian = float(jax.jit(jax.hessian(of_beta))(params["beta"]))
    grad = _reverse("softmax")
    fd = _richardson_central_difference(
        lambda h: float(grad({**params, "beta": params["beta"] + h}, M, W, T1)["beta"])
    )
    second_difference = (
        float(_value("softmax")({**params, "beta": params["beta"] + 1e-3}, M, W, T1))
        - 2 * float(_value("softmax")(params, M, W, T1))
        + float(_value("softmax")({**params, "beta": params["beta"] - 1e-3}, M, W, T1))
    ) / 1e-6
    assert hessian == pytest.approx(fd, rel=1e-6)
    assert hessian == pytest.approx(second_difference, rel=1e-4)
    assert abs(fd) > 1e-3


def test_vmap_over_initial_conditions_equals_a_python_loop():
    params = _random_params(9)
    M, W = _weights(10)
    batch = af.random_tokens(jr.key(11), N, D, batch_shape=(3,))
    grad = _reverse("softmax")

    def grad_x0(x0):
        return grad({**params, "x0": x0}, M, W, T1)["x0"]

    batched = jax.jit(jax.vmap(grad_x0))(batch)
    looped = jnp.stack([grad_x0(x0) for x0 in batch])
    assert bool(jnp.all(jnp.isfinite(batched)))
    np.testing.assert_allclose(batched, looped, rtol=1e-10, atol=1e-12)
    assert float(jnp.max(jnp.abs(looped[0] - looped[1]))) > 1e-3


def test_backsolve_adjoint_is_selectable_and_close_to_exact_reverse_mode():
    params = _random_params(12)
    M, W = _weights(13)
    exact = _reverse("softmax")(params, M, W, T1)
    backsolve = jax.jit(jax.grad(_phi("softmax", adjoint=diffrax.BacksolveAdjoint())))
    approx = backsolve(params, M, W, T1)
    for name in params:
        assert np.all(np.isfinite(exact[name])), name  # NaN == NaN would pass assert_allclose
        np.testing.assert_allclose(approx[name], exact[name], rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.slow
def test_training_notebook_reduces_its_loss_tenfold(monkeypatch, tmp_path):
    notebook = pathlib.Path(__file__).parents[1] / "notebooks" / "train_transport.py"
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    result = runpy.run_path(str(notebook))
    assert result["reduction"] >= 10, result["losses"]
    assert result["sinkhorn_after"] < result["sinkhorn_before"]
