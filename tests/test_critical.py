"""Critical points: classification against closed forms and Lemma A.2, metric independence
(Remark B.1) through the linearised attention dynamics, and the Newton search."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af


def polygon(n):
    return af.landscape.circle_tokens(2 * jnp.pi * jnp.arange(n, dtype=float) / n)


def circulant_spectrum(n, beta):
    """Eigenvalues λ_k = (1/n²) Σ_m g(2πm/n)(cos(2πkm/n) − 1), k = 1..n−1, of the regular n-gon,
    with g(τ) = (cos τ − β sin²τ) e^{β cos τ} written out here (App. B; circulant Hessian)."""
    tau = 2 * np.pi * np.arange(n) / n
    g = (np.cos(tau) - beta * np.sin(tau) ** 2) * np.exp(beta * np.cos(tau))
    k = np.arange(1, n)[:, None]
    return np.sort((g[None, :] * (np.cos(k * tau[None, :]) - 1)).sum(axis=1) / n**2)


@pytest.mark.parametrize("d", [2, 3])
def test_synchronised_configuration_is_a_local_maximum_with_exactly_the_orbit_removed(d):
    n, beta = 5, 1.3
    x = jnp.tile(af.normalize(jnp.arange(1.0, d + 1)[None, :]), (n, 1))
    c = af.classify_critical_point(af.InteractionEnergy(beta), x)
    assert c.kind == "local maximum" and not c.is_paper_strict_saddle
    assert c.orbit_dimension == d - 1  # rotations moving the common point: so(d)/so(d−1)
    assert c.eigenvalues.shape == (n * (d - 1) - (d - 1),)
    assert (c.num_negative, c.num_positive, c.num_zero) == (c.eigenvalues.size, 0, 0)
    # E = 1/(2βn²) Σ e^{β⟨x_i,x_j⟩}: the transverse spectrum is −e^β/n, (n−1)(d−1) times
    np.testing.assert_allclose(c.eigenvalues, -np.exp(beta) / n, rtol=1e-12)


@pytest.mark.parametrize("beta", [0.25, 0.5, 1.0])
def test_equally_spaced_points_on_the_circle_are_paper_strict_saddles(beta):
    energy = af.InteractionEnergy(beta)
    for n in (3, 5):  # few shapes: each costs a compilation
        x = polygon(n)
        # critical: the (USA) velocity, written in closed form, vanishes
        np.testing.assert_allclose(
            af.SelfAttention(beta, normalization="n")(0.0, x), 0.0, atol=1e-14
        )
        c = af.classify_critical_point(energy, x)
        np.testing.assert_allclose(
            c.eigenvalues, circulant_spectrum(n, beta), rtol=1e-10, atol=1e-14
        )
        # every direction but the rotation ascends: a minimum of E, so a strict saddle in the
        # paper's sense (DESIGN.md), escaped by the ascent flow
        assert c.is_paper_strict_saddle and c.kind == "local minimum"
        assert c.orbit_dimension == 1 and c.num_positive == n - 1


def group_rotation(x, group, B, t):
    """Lemma A.2's perturbation: x_i ↦ e^{tB} x_i for i in the group, the others fixed.

    B is a plane rotation generator (B³ = −B), so e^{tB} = I + sin(t) B + (1 − cos(t)) B².
    """
    rotation = jnp.eye(B.shape[0]) + np.sin(t) * B + (1 - np.cos(t)) * B @ B
    return jnp.where(group[:, None], x @ rotation.T, x)


@pytest.mark.parametrize(("d", "sizes"), [(2, (2, 3)), (2, (1, 4)), (3, (2, 3)), (3, (4, 1))])
def test_two_antipodal_groups_are_strict_saddles_by_lemma_a2(d, sizes):
    beta = 0.8
    energy = af.InteractionEnergy(beta)
    e1 = jnp.eye(d)[0]
    group = jnp.arange(sum(sizes)) < sizes[0]
    x = jnp.where(group[:, None], e1, -e1)
    B = jnp.zeros((d, d)).at[0, 1].set(1.0).at[1, 0].set(-1.0)
    # E''(0) along the group rotation, from energies alone (central differences)
    h = 1e-3
    energies = [energy(group_rotation(x, group, B, t)) for t in (-h, 0.0, h)]
    second = (energies[0] - 2 * energies[1] + energies[2]) / h**2
    assert second > 0  # Lemma A.2 / (A.3): the group rotation ascends
    v = jnp.where(group[:, None], x @ B.T, 0.0)
    c_v = jnp.einsum("nkd,nd->nk", af.tangent_basis(x), v).ravel()
    np.testing.assert_allclose(c_v @ af.riemannian_hessian(energy, x) @ c_v, second, rtol=1e-5)
    c = af.classify_critical_point(energy, x)
    assert c.is_paper_strict_saddle and c.orbit_dimension == d - 1
    # spreading a group of two or more descends: both signs, a strict saddle in either sense
    assert c.kind == "strict saddle" and c.num_negative >= 1


def tangent_jacobian(field, x):
    """Linearisation of a vector field at x in tangent coordinates: Bᵀ DF(x) B."""
    n, d = x.shape
    # embed: column (i, k) is the basis vector b_ik placed in token i's slot of R^{n d}
    embed = jnp.einsum("ij,jkd->idjk", jnp.eye(n), af.tangent_basis(x)).reshape(n * d, -1)
    jac = jax.jacfwd(lambda y: field(0.0, y))(x).reshape(n * d, n * d)
    return embed.T @ jac @ embed


def signs(values, tol):
    return (int(np.sum(values > tol)), int(np.sum(values < -tol)))


def critical_points_for_metric_test(beta):
    saddle = af.find_critical_point(af.InteractionEnergy(beta), af.random_tokens(jr.key(3), 5, 3)).x
    antipodal = jnp.array([[1.0, 0, 0], [1.0, 0, 0], [-1.0, 0, 0], [-1.0, 0, 0], [-1.0, 0, 0]])
    return {
        "polygon": af.normalize(jnp.pad(polygon(5), ((0, 0), (0, 1)))),
        "antipodal": antipodal,
        "newton": saddle,
    }


def test_attention_metric_and_round_metric_classify_alike_remark_b1():
    # At a critical point the Hessian in the metric Σ_i g_i⟨a_i, b_i⟩ is G⁻¹ Hess (no Christoffel
    # term), and the linearisation of its gradient flow is that operator. (SA) is the gradient
    # flow of E_β for the AttentionMetric (§3.4) and (USA) for the round metric scaled by 1/n
    # (Lemma 3.6), so their Jacobians, from the closed-form attention fields, must carry the
    # same inertia as the Hessian, and USA's must be n·Hess exactly.
    beta = 1.5
    energy = af.InteractionEnergy(beta)
    for name, x in critical_points_for_metric_test(beta).items():
        n = x.shape[0]
        c = af.classify_critical_point(energy, x)
        hessian = af.riemannian_hessian(energy, x)
        usa = tangent_jacobian(af.SelfAttention(beta, normalization="n"), x)
        np.testing.assert_allclose(usa, n * hessian, atol=1e-10, err_msg=name)
        sa = tangent_jacobian(af.SelfAttention(beta), x)
        factors = jnp.repeat(af.AttentionMetric(beta).factors(x), x.shape[1] - 1)
        np.testing.assert_allclose(sa, hessian / factors[:, None], atol=1e-10, err_msg=name)
        sa_eigs = np.linalg.eigvals(np.asarray(sa))
        assert np.abs(sa_eigs.imag).max() < 1e-10  # similar to G^{-1/2} H G^{-1/2}
        tol = 1e-8 * np.abs(sa_eigs.real).max()
        expected = (c.num_positive, c.num_negative)
        assert signs(sa_eigs.real, tol) == expected, name
        assert int(np.sum(np.abs(sa_eigs.real) <= tol)) == c.orbit_dimension + c.num_zero


def test_search_converges_from_perturbed_saddles():
    beta = 2.0
    energy = af.InteractionEnergy(beta)
    for x_star in (polygon(5), jnp.array([[1.0, 0], [1.0, 0], [-1.0, 0], [-1.0, 0], [-1.0, 0]])):
        kind = af.classify_critical_point(energy, x_star).kind
        x0 = af.normalize(x_star + 0.05 * jr.normal(jr.key(0), x_star.shape))
        assert (
            float(jnp.linalg.norm(af.riemannian_gradient(energy, af.WassersteinMetric(), x0)))
            > 1e-3
        )
        result = af.find_critical_point(energy, x0)
        assert result.converged and float(result.grad_norm) < 1e-10
        assert "converged" in result.message
        np.testing.assert_allclose(
            af.landscape.configuration_signature(result.x),
            af.landscape.configuration_signature(x_star),
            atol=1e-8,
        )
        assert af.classify_critical_point(energy, result.x).kind == kind
    # a saddle on S² reached from a random start, verified by the closed-form (USA) field
    result = af.find_critical_point(energy, af.random_tokens(jr.key(1), 5, 3))
    assert float(jnp.abs(af.SelfAttention(beta, normalization="n")(0.0, result.x)).max()) < 1e-9


def test_search_reports_non_convergence():
    energy = af.InteractionEnergy(2.0)
    x0 = af.normalize(polygon(5) + 0.05 * jr.normal(jr.key(0), (5, 2)))
    result = af.find_critical_point(energy, x0, gtol=1e-30, throw=False)
    assert not result.converged and "did not converge" in result.message
    assert "stalled" in result.message and float(result.grad_norm) < 1e-12
    with pytest.raises(RuntimeError, match="did not converge"):
        af.find_critical_point(energy, x0, gtol=1e-30)
    short = af.find_critical_point(energy, x0, max_steps=1, throw=False)
    assert not short.converged and "max_steps = 1 reached" in short.message


def test_search_is_vmappable_and_works_in_float32():
    energy = af.InteractionEnergy(2.0)
    x0 = af.normalize(polygon(5)[None] + 0.05 * jr.normal(jr.key(2), (3, 5, 2)))
    batch = jax.vmap(lambda x: af.find_critical_point(energy, x, throw=False))(x0)
    assert batch.converged.shape == (3,) and bool(batch.converged.all())
    assert batch.message.count("converged:") == 3
    # traced (here batched) searches report failure through equinox's runtime errors
    with pytest.raises(eqx.EquinoxRuntimeError, match="did not converge"):
        jax.vmap(lambda x: af.find_critical_point(energy, x, gtol=1e-30).x)(x0)
    single = af.find_critical_point(energy, x0[0].astype(jnp.float32))
    assert single.x.dtype == jnp.float32 and float(single.grad_norm) <= 1e-5


def test_energies_without_full_rotation_symmetry_keep_the_orbit_directions():
    # E = 1/(2βn²) Σ exp(β x_iᵀ A x_j), A = diag(1, 0.5, 0.2): all tokens at e_1 are critical
    # (∇_i E ∥ A e_1 ∥ x_i), but rotating them together lowers x_iᵀ A x_j: no zero modes
    energy = af.InteractionEnergy(1.0, jnp.diag(jnp.array([1.0, 0.5, 0.2])))
    x = jnp.tile(jnp.array([[1.0, 0.0, 0.0]]), (5, 1))
    with pytest.raises(ValueError, match="not O\\(d\\)-invariant; pass remove_orbit=False"):
        af.classify_critical_point(energy, x)
    c = af.classify_critical_point(energy, x, remove_orbit=False)
    assert c.kind == "local maximum" and c.orbit_dimension == 0 and c.eigenvalues.size == 10


def test_bad_inputs_are_rejected_with_clear_messages():
    energy = af.InteractionEnergy(1.0)
    x = af.random_tokens(jr.key(4), 5, 2)
    with pytest.raises(ValueError, match="not a critical point"):
        af.classify_critical_point(energy, x)
    with pytest.raises(ValueError, match="n >= 2"):
        af.classify_critical_point(energy, x[:1])
    with pytest.raises(ValueError, match="x0: tokens must lie on the unit sphere"):
        af.find_critical_point(energy, 2 * x)
    with pytest.raises(ValueError, match="gtol"):
        af.find_critical_point(energy, x, gtol=-1.0)
    with pytest.raises(ValueError, match="max_steps"):
        af.find_critical_point(energy, x, max_steps=0)
    with pytest.raises(ValueError, match="energy: expected a callable"):
        af.classify_critical_point("E", x)


@pytest.mark.parametrize("d", [2, 3])
def test_synchronised_tokens_with_the_orbit_kept_are_degenerate(d):
    """Keeping the rotation orbit adds its d − 1 zero modes to the −e^β/n band:
    (zero, negative, positive) = (d − 1, (n − 1)(d − 1), 0), hence "degenerate"."""
    n, beta = 5, 1.3
    x = jnp.tile(af.normalize(jnp.arange(1.0, d + 1)[None, :]), (n, 1))
    c = af.classify_critical_point(af.InteractionEnergy(beta), x, remove_orbit=False)
    assert (c.num_zero, c.num_negative, c.num_positive) == (d - 1, (n - 1) * (d - 1), 0)
    assert c.kind == "degenerate"


def test_polygon_with_the_orbit_kept_is_degenerate_and_a_saddle_with_zeros_stays_a_saddle():
    """The other boundaries: zero modes with only positive eigenvalues are "degenerate";
    zero modes beside both signs are a "strict saddle"."""
    c = af.classify_critical_point(af.InteractionEnergy(1.0), polygon(5), remove_orbit=False)
    assert (c.num_zero, c.num_negative, c.num_positive) == (1, 0, 4)
    assert c.kind == "degenerate"
    # two antipodal groups (Lemma A.2) in d = 3: both signs, plus the kept orbit's zero modes
    x = jnp.concatenate(
        [
            jnp.tile(jnp.array([[0.0, 0.0, 1.0]]), (2, 1)),
            jnp.tile(jnp.array([[0.0, 0.0, -1.0]]), (3, 1)),
        ]
    )
    kept = af.classify_critical_point(af.InteractionEnergy(1.0), x, remove_orbit=False)
    removed = af.classify_critical_point(af.InteractionEnergy(1.0), x)
    assert removed.kind == "strict saddle" and removed.num_zero == 0
    assert kept.num_zero == 2 and kept.num_positive > 0 and kept.num_negative > 0
    assert kept.kind == "strict saddle"
