"""Normalisation as speed regulation (arXiv:2510.22026; arXiv:2512.01868 §6.2, eq. (7)).

- Each scheme's ``speed_factor`` is what its own flow does to the tokens: θ̇ computed from
  ``vector_field`` (polar form) equals (1/s) P^⊥_θ A.
- Mix-LN and sqrt-scaling layers converge to their (time-dependent) flows at order 1, against
  scipy's DOP853.
- The equiangular (ρ, r) equations of ``attnflow.theory`` match the full particle flow of each
  scheme started from equiangular tokens (a Cholesky factor of (1 − ρ)I + ρ11ᵀ), to 1e-8.
- The survey's asymptotics as slopes: log(1 − ρ) against t has slope −2 for post-LN, against
  log t slope −2 for pre-LN (and −1 for sqrt-scaling).
"""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.integrate

import attnflow as af

N, D = 5, 3
Q, K, V = jr.normal(jr.key(0), (3, D, D)) / np.sqrt(D)
SUBLAYER = af.AttentionSublayer(af.SelfAttention(1.2, Q, K, V + jnp.eye(D)))
FF = af.FeedForward(
    jr.normal(jr.key(5), (D, 4)), jr.normal(jr.key(6), (4, D)), jnp.zeros(4), jnp.tanh
)

# (scheme, t, whether A is read at the stream z rather than at the tokens θ)
CASES = {
    "post-LN": (af.PostLN(), 0.3, False),
    "pre-LN": (af.PreLN(), 0.3, False),
    "peri-LN": (af.PeriLN(), 0.3, False),
    "nGPT": (af.NGPT(0.7), 0.3, False),
    "residual": (af.ResidualOnly(), 0.3, True),
    "Mix-LN before": (af.MixLN(0.5), 0.3, False),
    "Mix-LN after": (af.MixLN(0.5), 0.7, False),
    "sqrt-scaling": (af.SqrtScaling(), 1.7, False),
}


def _stream(on_sphere):
    x = af.random_tokens(jr.key(1), N, D)
    radii = 1.0 if on_sphere else jnp.linspace(0.7, 2.5, N)[:, None]
    return x * radii


def _tangent(theta, v):
    return v - theta * jnp.sum(theta * v, axis=-1, keepdims=True)


@pytest.mark.parametrize("name", list(CASES))
def test_speed_factor_is_what_the_flow_does_to_the_tokens(name):
    scheme, t, at_stream = CASES[name]
    z = _stream(scheme.on_sphere and not isinstance(scheme, af.MixLN))
    if isinstance(scheme, af.MixLN) and t < scheme.switch_time:
        z = _stream(False)  # the post-LN phase keeps any radius: s = 1 all the same
    r = jnp.linalg.norm(z, axis=-1, keepdims=True)
    theta = z / r
    zdot = scheme.vector_field(SUBLAYER, t, z)
    theta_dot = _tangent(theta, zdot) / r  # polar form of ż
    A = SUBLAYER(t, z if at_stream else theta)
    s = scheme.speed_factor(t, z, A)
    assert s.shape == (N,)
    np.testing.assert_allclose(theta_dot, _tangent(theta, A) / s[:, None], atol=1e-13)


def test_speed_factor_of_the_lie_trotter_splitting_is_one():
    x = af.random_tokens(jr.key(2), N, D)
    parts = (SUBLAYER, lambda t, z, a: FF.residual(t, z, a))
    A = sum(g(0.0, x, None) for g in parts)
    s = af.LieTrotter().speed_factor(0.0, x, A)
    np.testing.assert_allclose(
        af.LieTrotter().vector_field(parts, 0.0, x), _tangent(x, A) / s[:, None], atol=1e-14
    )


def test_named_values_of_the_speed_factors():
    x = af.random_tokens(jr.key(3), N, D)
    z = 3.0 * x
    A = SUBLAYER(0.0, x)
    norm_A = np.linalg.norm(A, axis=-1)
    np.testing.assert_allclose(af.PreLN().speed_factor(0.0, z, A), 3.0, rtol=1e-14)
    np.testing.assert_allclose(af.PeriLN().speed_factor(0.0, z, A), 3.0 * norm_A, rtol=1e-14)
    np.testing.assert_allclose(af.NGPT(2.0).speed_factor(0.0, x, A), norm_A / 2.0, rtol=1e-14)
    np.testing.assert_allclose(af.SqrtScaling().speed_factor(3.0, z, A), 3.0 * 2.0, rtol=1e-14)
    np.testing.assert_allclose(af.MixLN(1.0).speed_factor(0.5, z, A), 1.0)
    np.testing.assert_allclose(af.MixLN(1.0).speed_factor(1.0, z, A), 3.0, rtol=1e-14)
    with pytest.raises(ValueError, match="rate: expected a scalar rate"):
        af.NGPT(jnp.ones(D)).speed_factor(0.0, x, A)


def test_new_schemes_check_their_parameters():
    with pytest.raises(ValueError, match="switch_time: expected a time"):
        af.MixLN(-1.0)
    with pytest.raises(ValueError, match="switch_time: expected a finite value"):
        af.MixLN(float("nan"))
    with pytest.raises(ValueError, match="offset: expected a finite layer offset > 0"):
        af.SqrtScaling(0.0)
    x0 = af.random_tokens(jr.key(4), N, D)
    assert af.layers(af.SelfAttention(1.0), x0, 3, 0.1, scheme="Mix-LN").shape == (4, N, D)
    assert af.layers(af.SelfAttention(1.0), x0, 3, 0.1, scheme="sqrt-scaling").shape == (4, N, D)


@pytest.mark.parametrize("scheme", [af.MixLN(0.5), af.SqrtScaling(0.5)], ids=["Mix", "sqrt"])
def test_time_dependent_layers_converge_to_their_flow_at_order_one(scheme):
    """Against scipy's DOP853 on the scheme's vector field (t passed through); the Mix-LN switch
    lies on every grid and the reference integrates each side of it separately."""
    x0 = af.random_tokens(jr.key(1), N, D)
    t1 = 1.0
    field = jax.jit(lambda t, z: scheme.vector_field(SUBLAYER, t, z))
    rhs = lambda t, z: np.asarray(field(t, jnp.asarray(z.reshape(N, D)))).ravel()
    y, pieces = np.asarray(x0).ravel(), [(0.0, 0.5 - 1e-13), (0.5, t1)]
    for a, b in pieces if isinstance(scheme, af.MixLN) else [(0.0, t1)]:
        y = scipy.integrate.solve_ivp(rhs, (a, b), y, rtol=1e-12, atol=1e-12, method="DOP853")
        y = y.y[:, -1]
    reference = y.reshape(N, D)
    steps = [1 / 8, 1 / 16, 1 / 32, 1 / 64]
    errors = [
        float(jnp.abs(scheme.layers(SUBLAYER, x0, round(t1 / h), h)[-1] - reference).max())
        for h in steps
    ]
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert 0.85 < slope < 1.15, f"slope {slope:.3f}, errors {errors}"


# -- the equiangular reduction -------------------------------------------------------------


def equiangular_tokens(rho, n, d):
    """n unit vectors in R^d with pairwise inner products ρ: rows of a Cholesky factor of the
    Gram matrix (1 − ρ)I + ρ11ᵀ, padded with zeros to dimension d."""
    L = np.linalg.cholesky((1 - rho) * np.eye(n) + rho * np.ones((n, n)))
    return jnp.asarray(np.pad(L, ((0, 0), (0, d - n))))


def _reduced(name, t1, ts, rho0, r0, **kw):
    """The equiangular equations integrated by scipy's DOP853 (their right-hand side jitted)."""
    rhs = jax.jit(
        lambda t, y: jnp.stack(
            af.theory.normalized_equiangular_rhs(t, y[0], y[1], scheme=name, **kw)
        )
    )
    sol = scipy.integrate.solve_ivp(
        lambda t, y: np.asarray(rhs(t, jnp.asarray(y))),
        (0.0, t1),
        np.array([rho0, r0]),
        t_eval=np.asarray(ts),
        rtol=1e-12,
        atol=1e-13,
        method="DOP853",
    )
    assert sol.success
    return sol.y[0], sol.y[1]


def _full(scheme, z0, t1, ts, beta):
    sublayer = af.AttentionSublayer(af.SelfAttention(beta))
    zs = scheme.solve(sublayer, z0, t1, ts=ts, rtol=1e-12, atol=1e-13, max_steps=100_000).ys
    zs = np.asarray(zs)
    r = np.linalg.norm(zs, axis=-1)
    theta = zs / r[..., None]
    gram = np.einsum("tid,tjd->tij", theta, theta)
    return gram, r


REDUCED = {
    "post-LN": (af.PostLN(), 1.0, {}),
    "pre-LN": (af.PreLN(), 1.5, {}),
    "peri-LN": (af.PeriLN(), 1.5, {}),
    "nGPT": (af.NGPT(0.7), 1.0, {"rate": 0.7}),
    "Mix-LN": (af.MixLN(0.7), 1.5, {"switch_time": 0.7}),
    "sqrt-scaling": (af.SqrtScaling(0.5), 1.5, {"offset": 0.5}),
    "residual": (af.ResidualOnly(), 1.2, {}),
}


@pytest.mark.parametrize("name", list(REDUCED))
def test_equiangular_equations_match_the_particle_flow(name):
    scheme, r0, kw = REDUCED[name]
    n, d, beta, rho0, t1 = 4, 5, 1.5, 0.2, 2.0
    if name == "residual":
        beta, t1 = 0.5, 1.0  # the effective β r² grows like e^{2t}
    ts = jnp.linspace(0.0, t1, 9)
    z0 = r0 * equiangular_tokens(rho0, n, d)
    gram, r = _full(scheme, z0, t1, ts, beta)
    rho, radius = _reduced(name, t1, ts, rho0, r0, beta=beta, n=n, **kw)
    off = ~np.eye(n, dtype=bool)
    # Mix-LN's flow jumps at t*: both solvers find it by step rejection (error ~ tolerance).
    tol = 1e-7 if name == "Mix-LN" else 1e-9
    np.testing.assert_allclose(gram[:, off], np.repeat(rho[:, None], off.sum(), 1), atol=tol)
    np.testing.assert_allclose(r, np.repeat(radius[:, None], n, 1), atol=tol, rtol=tol)
    assert rho[-1] > rho0 + 0.05  # the tokens did move


def test_equiangular_rhs_checks_its_arguments():
    rhs = af.theory.normalized_equiangular_rhs
    with pytest.raises(ValueError, match="scheme: expected one of"):
        rhs(0.0, 0.5, 1.0, scheme="LN", beta=1.0, n=3)
    with pytest.raises(ValueError, match="rho: expected finite values >= -0.5"):
        rhs(0.0, -0.6, 1.0, beta=1.0, n=3)
    with pytest.raises(ValueError, match="r: expected radii r > 0"):
        rhs(0.0, 0.5, 0.0, scheme="pre-LN", beta=1.0, n=3)
    with pytest.raises(ValueError, match="n: expected"):
        rhs(0.0, 0.5, 1.0, beta=1.0, n=1)
    # Large β: the weights are divided by e^β, so nothing overflows; ρ̇ ∝ e^{β(ρ − 1)} → 0.
    drho, _ = rhs(0.0, 0.5, 1.0, beta=1e4, n=3)
    assert np.isfinite(float(drho)) and float(drho) == 0.0


def _slope(x, y):
    return float(np.polyfit(x, y, 1)[0])


def test_post_ln_contracts_like_exp_minus_two_t():
    """log(1 − ρ) is linear in t with slope −2 (arXiv:2512.01868 §6.2): on the reduced equation
    over t ∈ [6, 12] to 1e-3 (the correction is O(1 − ρ) ≈ e^{−12}), and on the particle flow
    over t ∈ [4, 8] to 1e-2."""
    ts = jnp.linspace(6.0, 12.0, 13)
    rho, _ = _reduced("post-LN", 12.0, ts, 0.0, 1.0, beta=1.0, n=8)
    assert abs(_slope(ts, np.log1p(-rho)) + 2) < 1e-3
    ts = jnp.linspace(4.0, 8.0, 9)
    gram, _ = _full(af.PostLN(), equiangular_tokens(0.0, 4, 4), 8.0, ts, 1.0)
    assert abs(_slope(ts, np.log(1 - gram[:, 0, 1])) + 2) < 1e-2


def test_pre_ln_contracts_like_one_over_t_squared():
    """log(1 − ρ) is linear in log t with slope −2 (r grows like t, so s = r slows the
    tokens): on the reduced equation over t ∈ [10³, 10⁴] to 1e-2 (finite-t correction
    ≈ 2C/t with r ≈ t + C), on the particle flow over t ∈ [100, 400] to 5e-2. sqrt-scaling,
    s = r√(t + 1) ~ 2t, gives slope −1 on the reduced equation, to 5e-2 (its correction,
    r ≈ 2√t + C, decays only like t^{−1/2}: measured −1.026 over [10³, 10⁴])."""
    ts = jnp.geomspace(1e3, 1e4, 9)
    rho, r = _reduced("pre-LN", 1e4, ts, 0.0, 1.0, beta=1.0, n=8)
    assert abs(_slope(np.log(ts), np.log1p(-rho)) + 2) < 1e-2
    np.testing.assert_allclose(r / ts, 1.0, atol=1e-2)  # ṙ = c → 1
    rho, _ = _reduced("sqrt-scaling", 1e4, ts, 0.0, 1.0, beta=1.0, n=8)
    assert abs(_slope(np.log(ts), np.log1p(-rho)) + 1) < 5e-2
    ts = jnp.geomspace(100.0, 400.0, 7)
    gram, _ = _full(af.PreLN(), equiangular_tokens(0.0, 4, 4), 400.0, ts, 1.0)
    assert abs(_slope(np.log(ts), np.log(1 - gram[:, 0, 1])) + 2) < 5e-2
