"""Losses between empirical measures: MMD and Sinkhorn divergence against independent numpy
implementations, their invariances, and finite-difference gradients."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy.special import logsumexp

import attnflow as af


def _clouds(seed, n=5, m=6, d=3):
    kx, ky, ka, kb = jr.split(jr.key(seed), 4)
    a = jr.uniform(ka, (n,)) + 0.1
    b = jr.uniform(kb, (m,)) + 0.1
    return af.random_tokens(kx, n, d), af.random_tokens(ky, m, d), a / a.sum(), b / b.sum()


def _mmd_loops(x, a, y, b, kappa):
    x, a, y, b = map(np.asarray, (x, a, y, b))

    def k(u, v):
        return np.exp(kappa * (float(u @ v) - 1))

    total = 0.0
    for i in range(len(x)):
        for j in range(len(x)):
            total += a[i] * a[j] * k(x[i], x[j])
    for i in range(len(y)):
        for j in range(len(y)):
            total += b[i] * b[j] * k(y[i], y[j])
    for i in range(len(x)):
        for j in range(len(y)):
            total -= 2 * a[i] * b[j] * k(x[i], y[j])
    return total


def _sinkhorn_fixed_point(update, size):
    f = np.zeros(size)
    for _ in range(20_000):
        f_next = update(f)
        if np.max(np.abs(f_next - f)) < 1e-13:
            return f_next
        f = f_next
    raise AssertionError("the reference Sinkhorn did not converge")


def _entropic_ot(x, a, y, b, eps):
    """OT_ε = ⟨a, f⟩ + ⟨b, g⟩ at the fixed point of log-domain Sinkhorn (squared chordal cost).

    μ against itself uses the averaged symmetric update f ← (f + T f)/2 (Feydy et al. 2019), as
    plain alternating updates oscillate there and converge slowly.
    """
    symmetric = x is y
    x, a, y, b = map(np.asarray, (x, a, y, b))
    cost = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)

    def softmin(potential, weights, axis):
        shape = (1, -1) if axis == 1 else (-1, 1)
        return -eps * logsumexp(
            (potential.reshape(shape) - cost) / eps, b=weights.reshape(shape), axis=axis
        )

    if symmetric:
        f = _sinkhorn_fixed_point(lambda f: 0.5 * (f + softmin(f, a, 1)), len(a))
        return 2 * a @ f
    g = _sinkhorn_fixed_point(lambda g: softmin(softmin(g, b, 1), a, 0), len(b))
    return a @ softmin(g, b, 1) + b @ g


def _richardson_central_difference(f, h=1e-3):
    def central(step):
        return (f(step) - f(-step)) / (2 * step)

    return (4 * central(h / 2) - central(h)) / 3


@pytest.mark.parametrize("kappa", [0.5, 4.0, 60.0])
def test_squared_mmd_matches_a_double_loop(kappa):
    x, y, a, b = _clouds(0)
    value = float(af.measures.squared_mmd(x, y, kappa=kappa, x_weights=a, y_weights=b))
    assert value == pytest.approx(_mmd_loops(x, a, y, b, kappa), rel=1e-12)
    uniform = float(af.measures.squared_mmd(x, y, kappa=kappa))
    assert uniform == pytest.approx(
        _mmd_loops(x, np.full(5, 0.2), y, np.full(6, 1 / 6), kappa), rel=1e-12
    )


def test_squared_mmd_is_the_interaction_energy_distance():
    # MMD²_κ = 2κ e^{−κ} (E_κ[μ] + E_κ[ν] − 2 E_κ(μ, ν)), cross term from the joint system.
    x, y, a, b = _clouds(1)
    kappa = 3.0
    energy = af.InteractionEnergy(kappa)
    joint = energy(jnp.concatenate([x, y]), jnp.concatenate([a, b]))
    expected = 2 * kappa * np.exp(-kappa) * (2 * energy(x, a) + 2 * energy(y, b) - joint)
    value = af.measures.squared_mmd(x, y, kappa=kappa, x_weights=a, y_weights=b)
    assert float(value) == pytest.approx(float(expected), rel=1e-12)


def test_squared_mmd_depends_only_on_the_measure():
    x, y, a, _ = _clouds(2)
    perm = jnp.array([3, 0, 4, 1, 2])
    assert abs(float(af.measures.squared_mmd(x, x[perm], x_weights=a, y_weights=a[perm]))) < 1e-15
    split = jnp.concatenate([x, x[:1]])
    weights = jnp.concatenate([a.at[0].multiply(0.3), a[:1] * 0.7])
    same = af.measures.squared_mmd(split, y, x_weights=weights)
    assert float(same) == pytest.approx(
        float(af.measures.squared_mmd(x, y, x_weights=a)), rel=1e-13
    )
    assert float(af.measures.squared_mmd(x, y, x_weights=7 * a)) == pytest.approx(
        float(af.measures.squared_mmd(x, y, x_weights=a)), rel=1e-13
    )
    assert float(af.measures.squared_mmd(x, y)) > 1e-3


def test_squared_mmd_gradients_match_finite_differences():
    x, y, a, b = _clouds(3)
    v = jr.normal(jr.key(4), x.shape)
    v = v - jnp.sum(v * x, axis=1, keepdims=True) * x

    def along(h):
        moved = af.normalize(x + h * v)
        return float(af.measures.squared_mmd(moved, y, kappa=2.0, x_weights=a, y_weights=b))

    grad = jax.grad(af.measures.squared_mmd)(x, y, kappa=2.0, x_weights=a, y_weights=b)
    fd = _richardson_central_difference(along)
    assert float(jnp.vdot(grad, v)) == pytest.approx(fd, rel=1e-8)


@pytest.mark.parametrize("epsilon", [0.05, 0.5])
def test_sinkhorn_divergence_matches_a_numpy_sinkhorn(epsilon):
    x, y, a, b = _clouds(5)
    expected = (
        _entropic_ot(x, a, y, b, epsilon)
        - 0.5 * _entropic_ot(x, a, x, a, epsilon)
        - 0.5 * _entropic_ot(y, b, y, b, epsilon)
    )
    value = af.measures.sinkhorn_divergence(
        x, y, epsilon=epsilon, x_weights=a, y_weights=b, threshold=1e-10, max_iterations=20000
    )
    assert float(value) == pytest.approx(expected, rel=1e-7)


def test_sinkhorn_divergence_between_diracs_is_the_cost():
    x, y = af.random_tokens(jr.key(6), 2, 4)
    value = af.measures.sinkhorn_divergence(x[None], y[None], epsilon=0.3)
    assert float(value) == pytest.approx(float(jnp.sum((x - y) ** 2)), rel=1e-12)
    same = af.measures.sinkhorn_divergence(x[None].repeat(3, 0), x[None], epsilon=0.3)
    assert abs(float(same)) < 1e-12


def test_sinkhorn_divergence_gradient_matches_finite_differences():
    x, y, a, b = _clouds(7)
    v = jr.normal(jr.key(8), x.shape)
    v = v - jnp.sum(v * x, axis=1, keepdims=True) * x
    divergence = jax.jit(
        lambda x: af.measures.sinkhorn_divergence(
            x, y, epsilon=0.1, x_weights=a, y_weights=b, threshold=1e-12, max_iterations=20000
        )
    )
    grad = jax.jit(jax.grad(divergence))(x)
    fd = _richardson_central_difference(lambda h: float(divergence(af.normalize(x + h * v))))
    assert float(jnp.vdot(grad, v)) == pytest.approx(fd, rel=1e-6)


def test_losses_in_float32_are_finite_with_finite_gradients():
    x, y, a, b = (c.astype(jnp.float32) for c in _clouds(9))
    for loss in (af.measures.squared_mmd, af.measures.sinkhorn_divergence):
        value, grad = jax.jit(jax.value_and_grad(loss))(x, y, x_weights=a, y_weights=b)
        assert value.dtype == jnp.float32
        assert bool(jnp.isfinite(value)) and bool(jnp.all(jnp.isfinite(grad)))


def test_bad_inputs_raise_clear_errors():
    x, y, a, _ = _clouds(10)
    with pytest.raises(ValueError, match=r"y: expected tokens of the same dimension as x \(d = 3"):
        af.measures.squared_mmd(x, af.random_tokens(jr.key(0), 4, 5))
    with pytest.raises(ValueError, match=r"x_weights: expected shape \(5,\)"):
        af.measures.squared_mmd(x, y, x_weights=a[:3])
    with pytest.raises(ValueError, match="y_weights: expected finite non-negative weights"):
        af.measures.sinkhorn_divergence(x, y, y_weights=-jnp.ones(6))
    with pytest.raises(ValueError, match="x: tokens must lie on the unit sphere"):
        af.measures.squared_mmd(2 * x, y)
    with pytest.raises(ValueError, match="epsilon: expected a finite value > 0, got 0.0"):
        af.measures.sinkhorn_divergence(x, y, epsilon=0.0)
    with pytest.raises(ValueError, match="kappa: expected a real scalar"):
        af.measures.squared_mmd(x, y, kappa=jnp.ones(2))
    with pytest.raises(ValueError, match="kappa: expected a finite value > 0, got -1.0"):
        af.measures.squared_mmd(x, y, kappa=-1.0)
    with pytest.raises(Exception, match="Sinkhorn did not reach threshold"):
        af.measures.sinkhorn_divergence(x, y, epsilon=1e-3, max_iterations=10)
