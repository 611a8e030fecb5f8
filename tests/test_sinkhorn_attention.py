"""Sinkhorn attention (Sinkformers, GLPR Rem. 3.5): doubly stochastic, equal to ott-jax's entropic
transport plan, and the Wasserstein gradient of ½ OT_{1/β}(μ, μ) checked against ott-jax's
implicitly differentiated cost (an independent implementation)."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from ott.geometry import geometry
from ott.problems.linear import linear_problem
from ott.solvers.linear import sinkhorn

import attnflow as af


@jax.jit
def ott_plan_and_cost(x, W, beta, weights):
    """OT_ε(μ, μ) for the cost −⟨W x_i, x_j⟩, ε = 1/β, with ott-jax (implicit differentiation)."""
    # ott-jax relies on implicit rank promotion, and on implicit dtype promotion (its Sinkhorn
    # raises the marginal error to the integer array norm_error=(1,)).
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        geom = geometry.Geometry(cost_matrix=-(x @ W @ x.T), epsilon=1.0 / beta)
        problem = linear_problem.LinearProblem(geom, a=weights, b=weights)
        out = sinkhorn.Sinkhorn(threshold=1e-14, max_iterations=20000)(problem)
        return out.matrix, out.reg_ot_cost


@jax.jit
def ott_cost_gradient(x, W, beta, weights):
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        return jax.grad(lambda y: ott_plan_and_cost(y, W, beta, weights)[1])(x)


N = 6
UNIFORM = jnp.full((N,), 1.0 / N)


def random_symmetric(key, d):
    g = jr.normal(key, (d, d))
    return (g + g.T) / (2 * np.sqrt(d))


@pytest.mark.parametrize("beta", [0.5, 5.0, 50.0])
def test_doubly_stochastic_for_general_query_key(beta):
    x = af.random_tokens(jr.key(0), N, 4)
    Q, K = jr.normal(jr.key(1), (2, 3, 4)) / 2
    A = af.SinkhornAttention(beta, Q, K).attention_matrix(x)
    assert float(jnp.abs(A.sum(0) - 1).max()) < 1e-12
    assert float(jnp.abs(A.sum(1) - 1).max()) < 1e-12
    assert bool(jnp.all(A >= 0))


def test_float32_large_beta_is_finite_and_doubly_stochastic():
    x = af.random_tokens(jr.key(2), N, 3, dtype=jnp.float32)
    A = af.SinkhornAttention(100.0, iterations=5000).attention_matrix(x)
    assert A.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(A)))
    assert float(jnp.abs(A.sum(1) - 1).max()) < 1e-4
    assert float(jnp.abs(A.sum(0) - 1).max()) < 1e-5


def test_plan_matches_ott():
    x = af.random_tokens(jr.key(3), N, 3)
    W = random_symmetric(jr.key(4), 3)
    A = af.SinkhornAttention(2.0, Q=W, K=jnp.eye(3)).attention_matrix(x)
    plan, _ = ott_plan_and_cost(x, W, 2.0, UNIFORM)
    np.testing.assert_allclose(A, N * plan, atol=1e-11)
    np.testing.assert_allclose(A, A.T, atol=1e-12)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_field_is_the_wasserstein_gradient_of_half_ot(sign):
    """V = ±W: ẋ_i = ∓ P^⊥_{x_i} ∇_{x_i} ½OT / w_i, with ∇ from ott-jax's implicit diff."""
    beta = 3.0
    x = af.random_tokens(jr.key(5), N, 3)
    W = random_symmetric(jr.key(6), 3)
    field = af.SinkhornAttention(beta, Q=W, K=jnp.eye(3), V=sign * W)
    grad = 0.5 * ott_cost_gradient(x, W, beta, UNIFORM)
    expected = -sign * af.tangent(x, grad) * N
    np.testing.assert_allclose(field(0.0, x), expected, atol=1e-9)


def test_energy_value_and_gradient_flow_identity():
    x = af.random_tokens(jr.key(7), N, 3)
    W = random_symmetric(jr.key(8), 3)
    weights = jnp.array([0.1, 0.2, 0.3, 0.15, 0.15, 0.1])
    energy = af.SinkhornEnergy(1.5, W)
    _, cost = ott_plan_and_cost(x, W, 1.5, weights)
    assert float(energy(x, weights)) == pytest.approx(0.5 * float(cost), abs=1e-11)
    flow = af.GradientFlow(energy, af.WassersteinMetric(), descent=True)
    field = af.SinkhornAttention(1.5, Q=W, K=jnp.eye(3), V=W)
    np.testing.assert_allclose(flow(0.0, x), field(0.0, x), atol=1e-12)


def test_energy_monotone_along_the_flow():
    """½OT decreases along V = W and increases along V = −W (one compilation for both)."""
    x0 = af.random_tokens(jr.key(9), N, 3)
    ts = jnp.linspace(0.0, 4.0, 9)
    energy = af.SinkhornEnergy(2.0)

    @jax.jit
    @jax.vmap
    def run(V):
        sol = af.solve(af.SinkhornAttention(2.0, V=V), x0, 4.0, ts=ts, rtol=1e-8, atol=1e-10)
        return jax.vmap(energy)(sol.ys)

    values = np.asarray(run(jnp.stack([jnp.eye(3), -jnp.eye(3)])))
    assert np.all(np.diff(values[0]) < 0)
    assert np.all(np.diff(values[1]) > 0)


def test_equivariance_and_beta_zero():
    x = af.random_tokens(jr.key(10), N, 3)
    field = af.SinkhornAttention(4.0)
    perm = jnp.array([3, 0, 5, 1, 4, 2])  # N = 6
    np.testing.assert_allclose(field(0.0, x[perm]), field(0.0, x)[perm], atol=1e-13)
    rotation, _ = jnp.linalg.qr(jr.normal(jr.key(11), (3, 3)))
    np.testing.assert_allclose(field(0.0, x @ rotation.T), field(0.0, x) @ rotation.T, atol=1e-13)
    A0 = af.SinkhornAttention(0.0).attention_matrix(x)
    np.testing.assert_allclose(A0, jnp.full((N, N), 1 / N), atol=1e-15)


def test_fixed_iterations_and_derivatives():
    """tolerance=0 runs a fixed number of sweeps (forward mode works); the early-stopping loop
    differentiates in reverse mode; both agree with central differences."""
    x = af.random_tokens(jr.key(12), N, 3)
    direction = af.tangent(x, jr.normal(jr.key(13), (N, 3)))
    probe = jr.normal(jr.key(14), (N, 3))

    def objective(field, s):
        y = af.normalize(x + s * direction)
        return jnp.sum(field.attention_output(y) * probe)

    fixed = af.SinkhornAttention(2.0, iterations=200, tolerance=0.0)
    adaptive = af.SinkhornAttention(2.0)
    h = 1e-5
    central = (objective(adaptive, h) - objective(adaptive, -h)) / (2 * h)
    forward = jax.jit(jax.jvp, static_argnums=0)(lambda s: objective(fixed, s), (0.0,), (1.0,))[1]
    reverse = jax.jit(jax.grad(lambda s: objective(adaptive, s)))(0.0)
    assert float(forward) == pytest.approx(float(central), rel=1e-7)
    assert float(reverse) == pytest.approx(float(central), rel=1e-7)


def test_reverse_mode_through_newton_steps_matches_finite_differences():
    """β = 10 (where the Newton steps do the work): reverse mode through the loop agrees with a
    Richardson-extrapolated central difference (error O(h⁴))."""
    x = af.random_tokens(jr.key(0), N, 3)
    direction = af.tangent(x, jr.normal(jr.key(19), (N, 3)))
    probe = jr.normal(jr.key(20), (N, 3))
    field = af.SinkhornAttention(10.0)

    @jax.jit
    def objective(s):
        return jnp.sum(field.attention_output(af.normalize(x + s * direction)) * probe)

    def central(h):
        return (objective(h) - objective(-h)) / (2 * h)

    fd = float((4 * central(5e-4) - central(1e-3)) / 3)
    assert abs(fd) > 1e-3
    assert float(jax.jit(jax.grad(objective))(0.0)) == pytest.approx(fd, rel=1e-7)


def test_bad_inputs():
    with pytest.raises(ValueError, match="iterations: expected a positive"):
        af.SinkhornAttention(1.0, iterations=0)
    with pytest.raises(ValueError, match="tolerance: expected a marginal tolerance >= 0"):
        af.SinkhornAttention(1.0, tolerance=-1.0)
    with pytest.raises(ValueError, match="A: must be symmetric"):
        af.SinkhornEnergy(1.0, jnp.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="beta: expected a finite value > 0"):
        af.SinkhornEnergy(0.0)
    with pytest.raises(ValueError, match="positive weights"):
        af.SinkhornEnergy(1.0)(af.orthogonal_tokens(2, 2), jnp.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="beta"):
        af.SinkhornAttention(-1.0)


def _marginal_errors(A):
    return float(jnp.abs(A.sum(1) - 1).max()), float(jnp.abs(A.sum(0) - 1).max())


def test_defaults_converge_where_plain_sinkhorn_stalls():
    """Regression: 6 tokens in S² at β = 10 (a plan near a permutation) left plain Sinkhorn at
    a row error ≈ 7e-7 after the default 10 000 sweeps, returned silently."""
    x = af.random_tokens(jr.key(0), N, 3)
    rows, cols = _marginal_errors(af.SinkhornAttention(10.0).attention_matrix(x))
    assert rows < 1e-13 and cols < 1e-13
    stalled = af.SinkhornAttention(10.0, iterations=10_000, tolerance=0.0).attention_matrix(x)
    assert _marginal_errors(stalled)[0] > 1e-8  # the plain sweeps this replaces


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_defaults_converge_over_the_beta_range(dtype):
    """32 tokens in S² (close pairs: the hard case) for β up to 1000: doubly stochastic to the
    rounding floor of the logits (a few eps·max|L|), nonnegative and finite."""
    x = af.random_tokens(jr.key(15), 32, 3, dtype=dtype)
    betas = jnp.asarray([0.0, 1.0, 10.0, 100.0, 300.0, 1000.0], dtype)
    A = jax.jit(jax.vmap(lambda b: af.SinkhornAttention(b).attention_matrix(x)))(betas)
    assert A.dtype == dtype and bool(jnp.all(jnp.isfinite(A)) and jnp.all(A >= 0))
    eps = float(jnp.finfo(dtype).eps)
    for beta, matrix in zip(np.asarray(betas), A, strict=True):
        rows, cols = _marginal_errors(matrix)
        bound = 10 * eps * max(10.0, float(beta))
        assert rows <= bound and cols <= bound, (beta, rows, cols)


def test_tolerance_bounds_the_returned_plan():
    """The stopping test is on the marginals of the plan that is returned."""
    for beta, key in [(1.0, 16), (10.0, 17), (40.0, 18)]:
        x = af.random_tokens(jr.key(key), 12, 3)
        rows, cols = _marginal_errors(
            af.SinkhornAttention(beta, tolerance=1e-6).attention_matrix(x)
        )
        assert rows <= 1e-6 and cols <= 1e-12


def test_iteration_cap_raises_instead_of_returning_an_unconverged_matrix():
    x = af.random_tokens(jr.key(0), N, 3)
    field = af.SinkhornAttention(10.0, iterations=1)
    message = (
        r"Sinkhorn attention did not converge: after iterations=1, .* tolerance=10·eps.*"
        r"Increase `iterations`, loosen `tolerance`, or lower `beta`"
    )
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        field.attention_matrix(x)
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        jax.jit(lambda y: field(0.0, y))(x)
    with pytest.raises(jax.errors.JaxRuntimeError, match="did not converge.*tolerance=1e-15"):
        af.SinkhornEnergy(10.0, iterations=1, tolerance=1e-15)(x)
