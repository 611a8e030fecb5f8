"""Noisy attention on the sphere (MATH.md §1.10): Monte Carlo against the heat semigroup on S^{d-1}.

Without interaction each token is Brownian motion on S^{d-1} with generator σΔ, and x ↦ ⟨x, e⟩
is an eigenfunction of Δ with eigenvalue −(d−1): E⟨x(t), e_1⟩ = e^{−σ(d−1)t} from x(0) = e_1.
Tokens with independent noise are independent paths, so one solve gives a whole sample.
"""

import functools

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import sa_field_numpy

import attnflow as af

SIGMA, D, T = 0.5, 3, 1.0
TS = jnp.array([0.5, 1.0])
PATHS = 1000
# The Monte Carlo runs are bound by run time, not compile time: XLA's default optimisation
# (conftest.py lowers it for the rest of the suite) runs them about three times faster.
RUN_TIME_BOUND = {"xla_backend_optimization_level": 2}


# Pass form and brownian at every call: jit keys its cache on the static arguments given, so a
# call relying on the defaults would compile the same program again.
@functools.partial(jax.jit, static_argnames=("form", "brownian"), compiler_options=RUN_TIME_BOUND)
def _brownian(key, x0, dt, *, form, brownian):
    sol = af.solve_sde(
        None,
        x0,
        T,
        sigma=SIGMA,
        key=key,
        dt=dt,
        ts=TS,
        form=form,
        brownian=brownian,
        max_steps=int(T / 0.005) + 1,
        normalize=False,  # the solver's raw state: its norm measures the scheme's error
    )
    return sol.ys


def _stratonovich_tree(key, x0, dt):
    return _brownian(key, x0, dt, form="stratonovich", brownian="tree")


def _ito_tree(key, x0, dt):
    return _brownian(key, x0, dt, form="ito", brownian="tree")


def _from_e1(n):
    return jnp.zeros((n, D)).at[:, 0].set(1.0)


def _assert_mean_within(samples, expected, num_se=4.0):
    samples = np.asarray(samples)
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(samples.mean() - expected) <= num_se * se, (samples.mean(), expected, se)


@pytest.mark.parametrize(("form", "brownian"), [("stratonovich", "tree"), ("ito", "fast")])
def test_mean_of_first_coordinate_decays_like_heat_semigroup(form, brownian):
    ys = _brownian(jr.key(0), _from_e1(PATHS), 0.02, form=form, brownian=brownian)
    assert float(jnp.abs(ys[-1, 0] - ys[-1, 1]).max()) > 0.1  # independent paths
    for t, y in zip(np.asarray(TS), ys, strict=True):
        _assert_mean_within(y[:, 0], np.exp(-SIGMA * (D - 1) * t))


def test_stratonovich_stays_on_the_sphere_pathwise():
    # |x_i| is an exact invariant of the Stratonovich SDE: the numerical drift is the solver's
    # error, and it shrinks faster than dt along the same Brownian paths.
    x0 = _from_e1(PATHS)
    deviations = [
        float(jnp.abs(jnp.linalg.norm(_stratonovich_tree(jr.key(1), x0, dt), axis=-1) - 1).max())
        for dt in (1 / 32, 1 / 64)  # save times on the step grid: no interpolation
    ]
    assert deviations[0] < 1e-2
    assert deviations[0] / deviations[1] > 2.5, deviations


def test_ito_euler_norm_follows_its_exact_mean_recursion():
    # Euler–Maruyama on the Itô form with F = 0: y' = (1 − c) y + |y| √(2σ) P_y ΔW, c = σ(d−1)dt,
    # so E|y'|² = ((1 − c)² + 2c) E|y|² = (1 + c²) E|y|² exactly (E|P_y ΔW|² = (d−1)dt).
    # Without the Itô correction it would grow like (1 + 2c)^k.
    dt = 0.02
    c = SIGMA * (D - 1) * dt
    ys = _ito_tree(jr.key(2), _from_e1(PATHS), dt)
    for t, y in zip(np.asarray(TS), ys, strict=True):
        m = 1.0
        for _ in range(round(t / dt)):
            m = (1 - c) ** 2 * m + 2 * c
        _assert_mean_within(jnp.sum(y * y, axis=-1), m)
        # |y| is an exact invariant of the SDE: E|y|² drifts by c·σ(d−1)t = O(dt) only.
        assert 0 < m - 1 < 1.1 * c * SIGMA * (D - 1) * t
    # Pathwise, |x_i| wanders by O(√(σ dt)) (strong order 1/2) on the same Brownian paths.
    x0 = _from_e1(PATHS)
    spread = [
        float(jnp.std(jnp.linalg.norm(_ito_tree(jr.key(3), x0, dt)[-1], axis=-1)))
        for dt in (0.02, 0.005)
    ]
    assert 1.6 < spread[0] / spread[1] < 2.5, spread


def test_common_noise_moves_tokens_together():
    # Tokens 0 and 1 start together: common noise keeps them together, and each token is still
    # Brownian motion on the sphere (checked on token 2 over independent keys).
    x0 = jnp.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    paths = jax.jit(
        jax.vmap(
            lambda k: af.solve_sde(
                None, x0, T, sigma=SIGMA, key=k, dt=0.02, form="ito", common_noise=True
            ).ys[-1]
        ),
        compiler_options=RUN_TIME_BOUND,
    )(jr.split(jr.key(5), 1000))
    np.testing.assert_array_equal(paths[:, 0], paths[:, 1])
    _assert_mean_within(paths[:, 2, 1], np.exp(-SIGMA * (D - 1) * T))
    _assert_mean_within(paths[:, 0, 0], np.exp(-SIGMA * (D - 1) * T))


def _rk4_numpy(x, beta, t1, steps):
    def f(y):
        y = y / np.linalg.norm(y, axis=1, keepdims=True)
        return sa_field_numpy(y, beta)

    h = t1 / steps
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + h / 2 * k1)
        k3 = f(x + h / 2 * k2)
        k4 = f(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def test_differentiable_pathwise_and_drift_is_the_field():
    x0 = af.random_tokens(jr.key(6), 4, D)

    def loss(sigma, beta):
        sol = af.solve_sde(
            af.SelfAttention(beta),
            x0,
            0.5,
            sigma=sigma,
            key=jr.key(7),
            dt=0.05,
            solver=diffrax.Heun(),
        )
        return jnp.sum(sol.ys[-1][:, 0]), sol.ys[-1]

    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))
    (_, x_sde), grads = value_and_grad(0.3, 1.5)
    assert float(jnp.abs(x_sde - x0).max()) > 0.05
    eps = 1e-6
    fd_sigma = (value_and_grad(0.3 + eps, 1.5)[0][0] - value_and_grad(0.3 - eps, 1.5)[0][0]) / (
        2 * eps
    )
    fd_beta = (value_and_grad(0.3, 1.5 + eps)[0][0] - value_and_grad(0.3, 1.5 - eps)[0][0]) / (
        2 * eps
    )
    np.testing.assert_allclose(grads, (fd_sigma, fd_beta), rtol=1e-5)
    # With σ = 0 the SDE is the deterministic attention flow (Heun: second order in dt).
    (_, x_ode), _ = value_and_grad(0.0, 1.5)
    np.testing.assert_allclose(x_ode, _rk4_numpy(np.asarray(x0), 1.5, 0.5, 200), atol=1e-3)


def test_float32():
    x0 = af.random_tokens(jr.key(8), 3, D, dtype=jnp.float32)
    ys = af.solve_sde(None, x0, 0.2, sigma=0.1, key=jr.key(9), dt=0.05, form="ito").ys
    assert ys.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(ys)))


def test_bad_inputs():
    x0 = _from_e1(2)
    key = jr.key(0)
    with pytest.raises(ValueError, match="brownian: expected 'tree' or 'fast'"):
        af.solve_sde(None, x0, 1.0, sigma=0.1, key=key, brownian="unsafe")
    with pytest.raises(ValueError, match="form: expected 'stratonovich' or 'ito'"):
        af.solve_sde(None, x0, 1.0, sigma=0.1, key=key, form="milstein")
    with pytest.raises(ValueError, match="sigma: expected a finite value >= 0"):
        af.solve_sde(None, x0, 1.0, sigma=-0.1, key=key)
    with pytest.raises(ValueError, match="dt: expected a finite step > 0"):
        af.solve_sde(None, x0, 1.0, sigma=0.1, key=key, dt=0.0)
    with pytest.raises(ValueError, match="x0: tokens must lie on the unit sphere"):
        af.solve_sde(None, 2 * x0, 1.0, sigma=0.1, key=key)
    with pytest.raises(ValueError, match="field: expected a vector field or None"):
        af.solve_sde(3.0, x0, 1.0, sigma=0.1, key=key)
