"""Random deep multi-head attention: determinism, shapes, and the stated depth scalings."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.integrate
import scipy.stats

import attnflow as af


def _assert_mean_within(samples, expected, num_se=4.0):
    samples = np.asarray(samples)
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    assert abs(samples.mean() - expected) <= num_se * se, (samples.mean(), expected, se)


def test_deterministic_given_key_and_shapes():
    make = lambda key: af.random_multihead_attention(key, 4, num_layers=6, num_heads=3, k=2)
    f, g, h = make(jr.key(0)), make(jr.key(0)), make(jr.key(1))
    assert f.field.Q.shape == f.field.K.shape == (6, 3, 2, 4)
    assert f.field.V.shape == (6, 3, 4, 4)
    assert f.num_pieces == 6
    np.testing.assert_allclose(f.switch_times, np.arange(1, 6) / 6, rtol=1e-15)
    assert all(
        np.array_equal(a, b) for a, b in zip(jax.tree.leaves(f), jax.tree.leaves(g), strict=True)
    )
    assert not np.array_equal(f.field.V, h.field.V)
    # every (layer, head) is a fresh draw
    V = np.asarray(f.field.V).reshape(18, 16)
    assert np.linalg.matrix_rank(V) == 16


def test_stacked_heads_equal_scaled_multihead_attention():
    rng = np.random.default_rng(0)
    H, k, d, n = 3, 2, 4, 5
    Q, K, V = rng.normal(size=(H, k, d)), rng.normal(size=(H, k, d)), rng.normal(size=(H, d, d))
    x = af.random_tokens(jr.key(0), n, d)
    stacked = af.MultiHeadAttention(beta=1.7, Q=Q, K=K, V=V, scale=0.3)(0.0, x)
    heads = af.MultiHeadAttention.from_heads(
        [af.SelfAttention(1.7, Q[h], K[h], V[h]) for h in range(H)]
    )
    np.testing.assert_allclose(stacked, 0.3 * heads(0.0, x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_layers_use_piece_l_at_layer_l(dtype):
    L, tau = 10, 0.1
    f = af.random_multihead_attention(
        jr.key(2), 3, num_layers=L, num_heads=2, t1=L * tau, dtype=dtype
    )
    x0 = af.random_tokens(jr.key(3), 4, 3, dtype=dtype)
    xs = af.layers(f, x0, L, tau)
    assert xs.dtype == dtype
    x = x0
    for layer in range(L):
        x = af.normalize(x + tau * f.piece(layer).attention_output(x))
        np.testing.assert_allclose(xs[layer + 1], x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("scaling", "num_heads", "t1"),
    [("diffusive", 1, 1.0), ("diffusive", 8, 0.25), ("ode", 1, 1.0), ("ode", 8, 0.25)],
)
def test_per_layer_increment_variance_matches_scaling(scaling, num_heads, t1):
    # β = 0: every head averages uniformly, Σ_j a_ij x_j = x̄, and V − μI = G/√d maps x̄ to
    # N(0, |x̄|²/d · I), whose tangent part at x_i has E|·|² = (d−1)/d |x̄|². Per layer,
    # "diffusive": E|Δx_i|² = τ (d−1)/d |x̄|² (independent of H);
    # "ode":       E|Δx_i|² = τ²/H (d−1)/d |x̄|².
    d, L = 3, 4000
    tau = t1 / L
    f = af.random_multihead_attention(
        jr.key(4), d, num_layers=L, num_heads=num_heads, t1=t1, beta=0.0, scaling=scaling
    )
    x = af.random_tokens(jr.key(5), 3, d)
    increments = jax.vmap(lambda layer: tau * f.piece(layer)(0.0, x))(jnp.arange(L))
    mean_sq = (d - 1) / d * float(jnp.sum(jnp.mean(x, axis=0) ** 2))
    expected = tau * mean_sq if scaling == "diffusive" else tau**2 / num_heads * mean_sq
    _assert_mean_within(jnp.sum(increments[:, 0] ** 2, axis=-1), expected)


def test_value_mean_gives_the_stated_drift():
    # E[Δx_i] = μ τ P^⊥_{x_i} x̄ in both scalings (β = 0).
    d, L, mu = 3, 4000, 20.0
    x = af.random_tokens(jr.key(6), 3, d)
    mean = jnp.mean(x, axis=0)
    drift_dir = mean - jnp.dot(x[1], mean) * x[1]
    for scaling, t1 in (("diffusive", 0.5), ("ode", 0.5)):
        tau = t1 / L
        f = af.random_multihead_attention(
            jr.key(7),
            d,
            num_layers=L,
            num_heads=2,
            t1=t1,
            beta=0.0,
            scaling=scaling,
            value_mean=mu,
        )
        increments = tau * jax.vmap(lambda layer, f=f: f.piece(layer)(0.0, x)[1])(jnp.arange(L))
        for c in range(d):
            _assert_mean_within(increments[:, c], mu * tau * float(drift_dir[c]))


def test_diffusive_depth_limit_is_brownian_motion_for_one_token():
    # One token: x_{l+1} = normalize(x_l + √τ u_l), u_l = P^⊥ ξ_l, ξ_l ~ N(0, I/d), so exactly
    # E⟨x_L, x_0⟩ = (E (1 + τ|P^⊥ξ|²)^{−1/2})^L with d|P^⊥ξ|² ~ χ²_{d−1}; as L → ∞ it tends to
    # e^{−(d−1)T/(2d)}: Brownian motion with generator Δ/(2d), a non-trivial limit.
    d, L, H, T, R = 3, 32, 4, 1.0, 4000
    tau = T / L
    x0 = jnp.eye(1, d)

    def final_overlap(key):
        f = af.random_multihead_attention(key, d, num_layers=L, num_heads=H, t1=T, beta=1.0)
        return af.layers(f, x0, L, tau)[-1, 0, 0]

    overlaps = jax.jit(jax.vmap(final_overlap))(jr.split(jr.key(8), R))
    one_step, _ = scipy.integrate.quad(
        lambda s: (1 + tau * s / d) ** -0.5 * scipy.stats.chi2.pdf(s, d - 1), 0, np.inf
    )
    exact = one_step**L
    _assert_mean_within(overlaps, exact)
    limit = np.exp(-(d - 1) * T / (2 * d))
    assert abs(exact - limit) < 0.01 and limit < 0.75  # close to a limit far from 1


def test_bad_inputs():
    key = jr.key(0)
    with pytest.raises(ValueError, match="scaling: expected 'diffusive' or 'ode'"):
        af.random_multihead_attention(key, 3, num_layers=2, num_heads=1, scaling="sqrt")
    with pytest.raises(ValueError, match="num_layers: expected a positive integer"):
        af.random_multihead_attention(key, 3, num_layers=0, num_heads=1)
    with pytest.raises(ValueError, match="num_heads: expected a positive integer"):
        af.random_multihead_attention(key, 3, num_layers=2, num_heads=0)
    with pytest.raises(ValueError, match="t1: expected a finite depth-time > 0"):
        af.random_multihead_attention(key, 3, num_layers=2, num_heads=1, t1=0.0)
    with pytest.raises(ValueError, match="beta: expected a finite value"):
        af.random_multihead_attention(key, 3, num_layers=2, num_heads=1, beta=float("nan"))
    with pytest.raises(ValueError, match=r"Q, K, V: expected the same number of heads H"):
        af.MultiHeadAttention(
            beta=1.0, Q=jnp.ones((2, 1, 3)), K=jnp.ones((2, 1, 3)), V=jnp.ones((2, 2, 2))
        )
    with pytest.raises(ValueError, match=r"V: expected square value matrices \(H, d, d\)"):
        af.MultiHeadAttention(
            beta=1.0, Q=jnp.ones((2, 1, 3)), K=jnp.ones((2, 1, 3)), V=jnp.ones((2, 2, 3))
        )
    with pytest.raises(ValueError, match="x: tokens have dimension d = 2"):
        f = af.MultiHeadAttention(
            beta=1.0, Q=jnp.ones((2, 1, 3)), K=jnp.ones((2, 1, 3)), V=jnp.ones((2, 3, 3))
        )
        f(0.0, jnp.ones((3, 2)) / np.sqrt(2))
