"""Solving the flow: Theorem 6.8, energy identities (Lemma 3.7, (3.6)), orders of convergence."""

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import loglog_slope
from scipy.integrate import solve_ivp

import attnflow as af

TIGHT = dict(rtol=1e-11, atol=1e-13, max_steps=20000)
# Most tests below solve 6 tokens on S^2 with SA written with an explicit value matrix (V = ±I)
# and β as an array (a Python-float β is static: each value would compile its own solve), saved
# at 41 times with TIGHT's step cap: one compiled solve serves them all (tolerances, times and
# β are traced).
N, D = 6, 3
SAVES = 41


def _sa(beta, V=None):
    """(SA) with V = I (or the given V) and an array β."""
    return af.SelfAttention(jnp.asarray(beta, jnp.float64), V=jnp.eye(D) if V is None else V)


def _final(field, x0, t1, **kwargs):
    """x(t1), solved with the save times of the shared program."""
    return af.solve(field, x0, t1, ts=jnp.linspace(0.0, t1, SAVES), **kwargs).ys[-1]


def _gamma_ode(n, beta, normalization):
    """(6.9) for SA and (6.10) for USA, written from MATH.md §4."""
    if normalization == "softmax":
        return lambda t, g: (
            2
            * np.exp(beta * g)
            * (1 - g)
            * ((n - 1) * g + 1)
            / (np.exp(beta) + (n - 1) * np.exp(beta * g))
        )
    return lambda t, g: 2 / n * np.exp(beta * g) * (1 - g) * ((n - 1) * g + 1)


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_theorem_6_8_orthogonal_start(normalization):
    n, d, beta = 4, 6, 1.3
    x0 = af.orthogonal_tokens(n, d, key=jr.key(0))
    ts = jnp.linspace(0.0, 3.0, 7)
    sol = af.solve(af.SelfAttention(beta, normalization=normalization), x0, 3.0, ts=ts, **TIGHT)
    ref = solve_ivp(
        _gamma_ode(n, beta, normalization),
        (0, 3),
        [0.0],
        t_eval=np.asarray(ts),
        rtol=1e-12,
        atol=1e-14,
        method="DOP853",
    ).y[0]
    off_diagonal = ~np.eye(n, dtype=bool)
    for k in range(len(ts)):
        g = np.asarray(af.gram(sol.ys[k]))[off_diagonal]
        np.testing.assert_allclose(g, ref[k], atol=1e-8)


def _energy_rate_check(field, weights_rate, x0, t1, monotone):
    """E(x(t)) is monotone and dE/dt (central differences in time) matches the identity."""
    energy = af.InteractionEnergy(field.beta)
    ts = jnp.linspace(0.0, t1, SAVES)
    ys = af.solve(field, x0, t1, ts=ts, **TIGHT).ys
    es = np.array([float(energy(y)) for y in ys])
    assert np.all(monotone * np.diff(es) >= -1e-13)
    h = 1e-3
    for k in (5, 20, 35):
        # the field is autonomous: restart from ys[k] and difference E at 0, h, 2h (2nd order)
        e0, e1, e2 = (
            float(energy(y))
            for y in af.solve(field, ys[k], 2 * h, ts=jnp.array([0.0, h, 2 * h]), **TIGHT).ys
        )
        rate_fd = (-3 * e0 + 4 * e1 - e2) / (2 * h)
        np.testing.assert_allclose(rate_fd, weights_rate(ys[k]), rtol=1e-5, atol=1e-9)


def test_usa_energy_rate_lemma_3_7():
    beta, n = 1.5, N
    x0 = af.random_tokens(jr.key(1), n, D)
    field = af.SelfAttention(beta, normalization="n")
    rate = lambda x: float(jnp.sum(field(0.0, x, None) ** 2) / n)  # (1/n) Σ |ẋ_i|²
    _energy_rate_check(field, rate, x0, 4.0, monotone=+1)


def test_sa_energy_rate_3_6():
    beta, n = 1.5, N
    x0 = af.random_tokens(jr.key(2), n, D)
    field = _sa(beta)

    def rate(x):  # (1/n²) Σ_i Z_i |ẋ_i|², Z_i = Σ_j exp(β⟨x_i, x_j⟩)
        Z = jnp.exp(beta * x @ x.T).sum(axis=1)
        return float(jnp.sum(Z * jnp.sum(field(0.0, x, None) ** 2, axis=1)) / n**2)

    _energy_rate_check(field, rate, x0, 4.0, monotone=+1)


def test_repulsive_energy_decreases_and_stays_on_sphere():
    beta, n = 1.0, N
    x0 = af.random_tokens(jr.key(3), n, D)
    field = _sa(beta, V=-jnp.eye(D))

    def rate(x):
        Z = jnp.exp(beta * x @ x.T).sum(axis=1)
        return -float(jnp.sum(Z * jnp.sum(field(0.0, x, None) ** 2, axis=1)) / n**2)

    _energy_rate_check(field, rate, x0, 4.0, monotone=-1)
    # Long repulsive run (MATH.md §1.12): the raw state must not drift off the sphere either.
    ts = jnp.linspace(0.0, 200.0, SAVES)
    sol = af.solve(field, x0, 200.0, ts=ts, rtol=1e-8, atol=1e-10, max_steps=TIGHT["max_steps"])
    np.testing.assert_allclose(jnp.linalg.norm(sol.ys, axis=-1), 1.0, atol=1e-14)
    # n = 6 = 2d in d = 3: the minimiser is the octahedron, energy (6e^β + 24 + 6e^{-β})/(2β·36).
    octahedron = (6 * np.e + 24 + 6 / np.e) / (2 * 36)
    np.testing.assert_allclose(float(af.InteractionEnergy(beta)(sol.ys[-1])), octahedron, rtol=1e-7)


def test_layers_converge_to_flow_with_order_one():
    x0 = af.random_tokens(jr.key(4), N, D)
    field = _sa(2.0)
    t1 = 2.0
    exact = _final(field, x0, t1, **TIGHT)
    hs = [0.1, 0.05, 0.025, 0.0125]
    errors = [
        float(jnp.max(jnp.abs(af.layers(field, x0, round(t1 / h), h)[-1] - exact))) for h in hs
    ]
    slope = loglog_slope(hs, errors)
    assert 0.9 < slope < 1.15, (slope, errors)


def test_solver_orders_with_fixed_steps():
    x0 = af.random_tokens(jr.key(5), N, D)
    field = _sa(3.0)
    exact = _final(field, x0, 3.0, rtol=1e-13, atol=1e-15, max_steps=TIGHT["max_steps"])
    for solver, order, dts in (
        (diffrax.Heun(), 2, [0.1, 0.05, 0.025]),
        (diffrax.Tsit5(), 5, [0.15, 0.075, 0.0375]),
    ):
        errors = []
        for dt in dts:
            y = af.solve(
                field,
                x0,
                3.0,
                solver=solver,
                dt0=dt,
                stepsize_controller=diffrax.ConstantStepSize(),
            ).ys[-1]
            errors.append(float(jnp.max(jnp.abs(y - exact))))
        slope = loglog_slope(dts, errors)
        assert order - 0.3 < slope < order + 0.4, (type(solver).__name__, slope, errors)


def test_adaptive_error_tracks_tolerance():
    x0 = af.random_tokens(jr.key(6), N, D)
    field = _sa(1.0)
    exact = _final(field, x0, 3.0, **TIGHT)
    tols = [1e-4, 1e-6, 1e-8]
    # The same max_steps as TIGHT: the tolerances are traced, so all four solves share one compile.
    loose = [_final(field, x0, 3.0, rtol=tol, atol=tol, max_steps=20000) for tol in tols]
    errors = [float(jnp.max(jnp.abs(final - exact))) for final in loose]
    assert errors[0] > errors[1] > errors[2]
    assert all(e < 100 * tol for e, tol in zip(errors, tols, strict=True))
    assert 0.6 < loglog_slope(tols, errors) < 1.3


def test_ts_saving_jit_and_vmap():
    x0 = af.random_tokens(jr.key(7), N, D, batch_shape=(3,))
    field = _sa(1.0)
    ts = jnp.linspace(0.5, 2.0, SAVES)
    steps = TIGHT["max_steps"]
    run = jax.jit(
        jax.vmap(lambda x: af.solve(field, x, 2.0, ts=ts, max_steps=steps, throw=False).ys)
    )
    batched = run(x0)
    assert batched.shape == (3, SAVES, N, D)
    loop = jnp.stack([af.solve(field, x, 2.0, ts=ts, max_steps=steps).ys for x in x0])
    np.testing.assert_allclose(batched, loop, atol=1e-12)
    np.testing.assert_allclose(jnp.linalg.norm(batched, axis=-1), 1.0, atol=1e-14)
