"""Negative β (survey arXiv:2512.01868 Remark 2; Polyanskiy–Rigollet–Yao arXiv:2507.22857).

On the circle the attention dynamics synchronise for β ≥ −0.16 and do not for β < −2/3. The
failure needs n = 3: the equilateral triangle has all pairwise angles 2π/3, its torus Hessian
is g(2π/3)·L/n² (L the graph Laplacian of K_3, g of App. B), and
g(2π/3) = e^{−β/2}(−1/2 − 3β/4) is negative, making the triangle a local maximum of the
energy (a stable state of the ascent), exactly when β < −2/3. At an equilibrium where every
Z_i is equal (the triangle, by symmetry) the Jacobian of (SA) is that of (USA) divided by
Z/n, so the statement holds for both.
"""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import sa_field_numpy
from scipy.integrate import solve_ivp

import attnflow as af
from attnflow._phase._distance import distance_rate

TRIANGLE = 2 * np.pi * np.arange(3) / 3
KICK = np.array([0.05, -0.03, 0.02])  # a perturbation of the triangle, rotation included


def _gram(x):
    return np.asarray(x @ x.T)


def test_negative_beta_is_accepted_and_nan_inf_zero_still_refused():
    x = af.random_tokens(jr.key(0), 5, 3)
    for field in (
        af.SelfAttention(-0.1),
        af.SelfAttention(-2.0, normalization="n"),
        af.MultiHeadAttention(beta=[-1.0, 2.0], Q=jnp.stack([jnp.eye(3)] * 2)),
        af.PositionalAttention(-1.0, jnp.zeros((5, 5))),
        af.random_multihead_attention(jr.key(1), 3, num_layers=2, num_heads=2, beta=-1.0),
    ):
        assert bool(jnp.all(jnp.isfinite(field(0.0, x))))
    assert float(af.InteractionEnergy(-1.0)(x)) < 0
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="beta: expected a finite value"):
            af.SelfAttention(bad)
        with pytest.raises(ValueError, match="beta: expected a finite value"):
            af.landscape.circle_field(jnp.asarray(TRIANGLE), bad)
    with pytest.raises(ValueError, match=r"beta: expected a finite value ≠ 0"):
        af.InteractionEnergy(0.0)
    with pytest.raises(ValueError, match=r"betas: expected finite values"):
        af.phase_diagram_from_tokens(x[None], betas=[-1.0, float("nan")], ts=[0.0])
    run = jax.jit(lambda b: af.SelfAttention(b)(0.0, x))
    assert bool(jnp.all(jnp.isfinite(run(-3.0))))
    with pytest.raises(Exception, match="beta: expected a finite value"):
        run(jnp.nan)


@pytest.mark.parametrize("beta", [-0.1, -7.0])
@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_fields_at_negative_beta_are_the_formula(beta, normalization):
    x = af.random_tokens(jr.key(2), 6, 3)
    np.testing.assert_allclose(
        af.SelfAttention(beta, normalization=normalization)(0.0, x),
        sa_field_numpy(x, beta, normalization=normalization),
        rtol=1e-12,
        atol=1e-13,
    )
    theta = jr.uniform(jr.key(3), (6,), minval=-np.pi, maxval=np.pi)
    field = af.SelfAttention(beta, normalization=normalization)(
        0.0, af.landscape.circle_tokens(theta)
    )
    tangent = jnp.stack([-jnp.sin(theta), jnp.cos(theta)], axis=1)
    np.testing.assert_allclose(
        af.landscape.circle_field(theta, beta, normalization),
        jnp.sum(field * tangent, axis=1),
        rtol=1e-12,
        atol=1e-13,
    )


@pytest.mark.parametrize("beta", [-1.3])
def test_gradient_flow_identities_hold_for_negative_beta(beta):
    """USA = Wasserstein gradient of E = 1/(2β) Σ w w e^{β⟨x, y⟩}, SA = its gradient in the
    attention metric (§3.3–3.4): autodiff of the energy against the attention kernel."""
    x = af.random_tokens(jr.key(4), 5, 3)
    energy = af.InteractionEnergy(beta)
    np.testing.assert_allclose(
        af.riemannian_gradient(energy, af.WassersteinMetric(), x),
        af.SelfAttention(beta, normalization="n")(0.0, x),
        rtol=1e-12,
        atol=1e-13,
    )
    np.testing.assert_allclose(
        af.riemannian_gradient(energy, af.AttentionMetric(beta), x),
        af.SelfAttention(beta)(0.0, x),
        rtol=1e-12,
        atol=1e-13,
    )
    theta = jnp.asarray(TRIANGLE + KICK)
    np.testing.assert_allclose(
        af.landscape.torus_hessian(theta, beta),
        jax.hessian(af.landscape.circle_energy)(theta, beta),
        rtol=1e-10,
        atol=1e-13,
    )
    np.testing.assert_allclose(
        af.landscape.circle_energy(theta, beta), energy(af.landscape.circle_tokens(theta))
    )


def test_the_triangle_is_stable_exactly_below_minus_two_thirds():
    g = af.theory.hessian_kernel(2 * np.pi / 3, beta=-2.0 / 3.0)
    assert abs(float(g)) < 1e-15
    # τ*_β (the zero of g in (π/2, π) for β < 0) passes 2π/3 at β = −2/3
    np.testing.assert_allclose(af.theory.tau_star(-2.0 / 3.0), 2 * np.pi / 3, rtol=1e-14)
    for beta, stable in ((-0.1, False), (-0.6, False), (-0.7, True), (-1.0, True)):
        h = np.linalg.eigvalsh(np.asarray(af.landscape.torus_hessian(TRIANGLE, beta)))
        assert (h[-1] < 1e-12) == stable, (beta, h)  # h[-1]: 0 (rotation) or positive


def test_the_landscape_survey_finds_the_triangle_below_minus_two_thirds():
    """Newton searches (the docstring example's settings) classify the critical points of E_β at
    n = 3 on the circle: a non-synchronised local maximum at β = −1, none at β = −0.5."""
    found = {}
    for beta in (-1.0, -0.5):
        survey = af.landscape.survey_critical_points(
            3, 2, beta, key=jr.key(0), num_random=4, num_flow=0
        )
        found[beta] = survey.counterexample
        if survey.counterexample:
            x = next(p.x for p in survey.points if p.is_counterexample)
            off = _gram(x)[~np.eye(3, dtype=bool)]
            np.testing.assert_allclose(off, -0.5, atol=1e-8)
    assert found == {-1.0: True, -0.5: False}


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_synchronisation_at_minus_point_one_and_its_failure_at_minus_one(normalization):
    """arXiv:2507.22857 on the circle (Q = K = V = I, n = 3): from the perturbed triangle,
    β = −0.1 synchronises and β = −1 returns to the triangle (a stable non-synchronised
    state); from random starts β = −0.1 synchronises too."""
    x0 = af.landscape.circle_tokens(jnp.asarray(TRIANGLE + KICK))
    randoms = af.random_tokens(jr.key(5), 3, 2, batch_shape=(3,))
    starts = jnp.concatenate([x0[None], randoms])

    @jax.jit
    def final(beta, x):
        field = af.SelfAttention(beta, normalization=normalization)
        return af.solve(field, x, 60.0, rtol=1e-10, atol=1e-12).ys[-1]

    synced = jax.vmap(final, in_axes=(None, 0))(jnp.asarray(-0.1), starts)
    for x in synced:
        assert np.min(_gram(x)) > 1 - 1e-8
    x = final(jnp.asarray(-1.0), x0)
    off = _gram(x)[~np.eye(3, dtype=bool)]
    np.testing.assert_allclose(off, -0.5, atol=1e-8)  # cos(2π/3): the triangle again


def test_phase_diagram_at_negative_beta():
    """The phase engine on the circle reproduces the two regimes, and its distance form's rate
    (the d ≥ 3 engines) is overflow-safe in float32 at negative β."""
    tri = af.landscape.circle_tokens(jnp.asarray(TRIANGLE + KICK))
    P = af.phase_diagram_from_tokens(tri[None], betas=[-0.1, -1.0], ts=[0.0, 60.0], delta=1e-3)
    np.testing.assert_allclose(P[:, -1], [1.0, 0.0])
    # Ḋ_ij = −(⟨ẋ_i, x_j⟩ + ⟨x_i, ẋ_j⟩) from the field, float64, against the float32 rate at
    # β = −60, where the unshifted e^{−βD} = e^{120} would overflow float32.
    x = af.random_tokens(jr.key(7), 5, 3)
    for normalization, beta in (("softmax", -60.0), ("n", -20.0)):
        v = af.SelfAttention(beta, normalization=normalization)(0.0, x)
        expected = -(v @ x.T + x @ v.T)
        D = (1 - x @ x.T).astype(jnp.float32) * (1 - jnp.eye(5, dtype=jnp.float32))
        rate = distance_rate(D, jnp.float32(beta), normalization)
        scale = float(jnp.max(jnp.abs(expected)))
        np.testing.assert_allclose(rate, expected, atol=2e-5 * scale)


@pytest.mark.parametrize(
    "dtype, normalization, beta", [(jnp.float32, "softmax", -60.0), (jnp.float64, "n", -20.0)]
)
def test_negative_beta_solve_stays_on_the_sphere(dtype, normalization, beta):
    """Weights up to e^{|β|} (e^{60} in SA before the row shift, e^{20} in USA): no overflow."""
    x0 = af.random_tokens(jr.key(8), 6, 3, dtype=dtype)
    for other in (jnp.float32, jnp.float64):  # the field in both precisions
        v = af.SelfAttention(beta, normalization=normalization)(0.0, x0.astype(other))
        assert v.dtype == other and bool(jnp.all(jnp.isfinite(v)))
    sol = af.solve(af.SelfAttention(beta, normalization=normalization), x0, 0.5)
    x = sol.ys[-1]
    assert x.dtype == dtype and bool(jnp.all(jnp.isfinite(x)))
    tol = 1e-5 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(jnp.linalg.norm(x, axis=1), 1.0, atol=tol)


def test_distance_engine_shifts_only_for_a_grid_with_negative_beta():
    """The d ≥ 3 engine's row shift is a static choice of the grid (issue 40): a grid with
    β ≥ 0 only runs without it, and its systems are bitwise those of a grid of the same shape
    with a negative β (run with the shift, exactly 0 for β ≥ 0): P and every step count. The
    negative β needs the shift: float32, β = −60, where e^{−βD} would reach e^{120}."""
    x0 = af.random_tokens(jr.key(9), 4, 3, batch_shape=(2,), dtype=jnp.float32)
    options = dict(ts=[0.0, 4.0, 30.0], rtol=1e-6, atol=1e-8, progress=False)
    plain = af.phase_diagram_from_tokens_result(x0, betas=[0.5, 0.5, 3.0], **options)
    mixed = af.phase_diagram_from_tokens_result(x0, betas=[-60.0, 0.5, 3.0], **options)
    for name in ("probability", "accepted", "rejected"):
        np.testing.assert_array_equal(getattr(mixed, name)[1:], getattr(plain, name)[1:])
    assert float(mixed.probability[1, -1]) == 1.0 and int(mixed.accepted[2, 0]) > 20
    # β = −60 against the token flow in NumPy (float64, SciPy's DOP853): each token is drawn
    # to its farthest neighbour, and here the four tokens still collapse.
    reference = []
    for x in np.asarray(x0, np.float64):
        flow = solve_ivp(
            lambda t, y: sa_field_numpy(y.reshape(4, 3), -60.0).ravel(),
            (0.0, 30.0),
            x.ravel(),
            t_eval=options["ts"],
            method="DOP853",
            rtol=1e-10,
            atol=1e-12,
        )
        xs = flow.y.T.reshape(-1, 4, 3)
        xs /= np.linalg.norm(xs, axis=-1, keepdims=True)
        close = np.einsum("tid,tjd->tij", xs, xs) >= 1 - 1e-3
        reference.append(close[:, ~np.eye(4, dtype=bool)].mean(axis=1))
    np.testing.assert_array_equal(mixed.probability[0], np.mean(reference, axis=0))
