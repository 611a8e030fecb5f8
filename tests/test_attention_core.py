"""The attention kernel's derivative rule, the discrete Transformer, and CausalALiBiAttention.

References are written here from the formulas: the plain attention expression differentiated
by JAX, a NumPy transcription of the authors' layer update, and a NumPy RK4 of the θ equation
of the lost-in-the-middle model.
"""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from helpers import loglog_slope

import attnflow as af
import attnflow._fields._kernel as kernel_module


def _plain(q, k, v, w, b, mask, normalization, offset=0):
    """Σ_j a_ij v_j as one plain expression, differentiated by JAX itself."""
    s = q @ k.T + (0.0 if b is None else b)
    n, m = s.shape
    i = jnp.arange(n)[:, None] + offset
    j = jnp.arange(m)[None, :]
    if mask == "causal":
        s = jnp.where(j <= i, s, -jnp.inf)
    elif mask == "strict":
        s = jnp.where(j < i, s, -jnp.inf)
    e = jnp.exp(s) * w[None, :]
    if normalization == "softmax":
        total = jnp.sum(e, axis=1, keepdims=True)
        return jnp.where(total > 0, e / jnp.where(total > 0, total, 1.0), 0.0) @ v
    return e @ v


N, K, E = 9, 3, 4
_keys = jr.split(jr.key(0), 6)
Q_ = jr.normal(_keys[0], (N, K))
K_ = jr.normal(_keys[1], (N, K))
V_ = jr.normal(_keys[2], (N, E))
W_ = jr.uniform(_keys[3], (N,)) + 0.1
B_ = jr.normal(_keys[4], (N, N))
COT = jr.normal(_keys[5], (N, E))

CONFIGS = [
    ("softmax", None, False),  # SA
    ("sum", None, False),  # USA
    ("softmax", "causal", False),
    ("sum", "strict", True),
    ("softmax", None, True),  # biased
]


@pytest.mark.parametrize("path", ["dense", "tiles", "blocked"])
@pytest.mark.parametrize("normalization, mask, biased", CONFIGS)
def test_kernel_gradients_match_autodiff_of_the_plain_expression(
    monkeypatch, path, normalization, mask, biased
):
    """Reverse mode of every input (q, k, v, weights, bias) to 1e-12 in float64, on the dense
    path, the dense path in row tiles (4 rows: 9 = 2·4 + 1) and the blocked path."""
    if path == "tiles":
        monkeypatch.setattr(kernel_module, "DENSE_TILE", 4 * N)
    block = 4 if path == "blocked" else None
    bias = B_ if biased else None

    def kernel(q, k, v, w, b):
        out = af.attention(
            q, k, v, weights=w, bias=b, mask=mask, normalization=normalization, block_size=block
        )
        return jnp.sum(out * COT)

    def plain(q, k, v, w, b):
        return jnp.sum(_plain(q, k, v, w, b, mask, normalization) * COT)

    args = (Q_, K_, V_, W_, bias)
    np.testing.assert_allclose(kernel(*args), plain(*args), rtol=1e-13)
    argnums = (0, 1, 2, 3, 4) if biased else (0, 1, 2, 3)
    for got, want in zip(
        jax.grad(kernel, argnums)(*args), jax.grad(plain, argnums)(*args), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    tangents = tuple(jr.normal(jr.key(10 + i), a.shape) for i, a in enumerate(args[:4]))
    _, jvp_kernel = jax.jvp(lambda *a: kernel(*a, bias), args[:4], tangents)
    _, jvp_plain = jax.jvp(lambda *a: plain(*a, bias), args[:4], tangents)
    np.testing.assert_allclose(jvp_kernel, jvp_plain, rtol=1e-12)


def test_second_derivatives_of_the_kernel():
    """Forward over reverse (a Hessian-vector product in q, v and the weights) of the kernel
    equals that of the plain expression, on the dense and the blocked path. jax.hessian through
    solve(differentiable_twice=True) is tested in test_grad.py."""
    direction = tuple(jr.normal(jr.key(20 + i), a.shape) for i, a in enumerate((Q_, V_, W_)))
    for block in (None, 4):

        def kernel(q, v, w, block=block):
            return jnp.sum(af.attention(q, K_, v, weights=w, block_size=block) * COT)

        def plain(q, v, w):
            return jnp.sum(_plain(q, K_, v, w, None, None, "softmax") * COT)

        hvp_kernel = jax.jvp(jax.grad(kernel, (0, 1, 2)), (Q_, V_, W_), direction)[1]
        hvp_plain = jax.jvp(jax.grad(plain, (0, 1, 2)), (Q_, V_, W_), direction)[1]
        for got, want in zip(hvp_kernel, hvp_plain, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_field_gradients_in_beta_Q_K_V_and_weights_match_the_plain_field():
    """Gradients of a scalar of the SelfAttention field in every parameter, against the field
    written as one plain expression."""
    x = af.random_tokens(jr.key(1), 8, 3)
    rng = np.random.default_rng(1)
    Q, K, V = (jnp.asarray(rng.normal(size=(3, 3))) for _ in range(3))
    w = jnp.asarray(rng.uniform(0.2, 1.0, 8))

    def with_kernel(beta, Q, K, V, w, x):
        field = af.SelfAttention(beta, Q, K, V, causal=True)
        return jnp.sum(field(0.0, x, w) * x[::-1])

    def plain(beta, Q, K, V, w, x):
        out = _plain(beta * x @ Q.T, x @ K.T, x @ V.T, w, None, "causal", "softmax")
        # The fields' projection off the sphere: P_x v = v − ⟨x, v⟩ x / |x|².
        v = out - jnp.sum(out * x, axis=1, keepdims=True) / jnp.sum(x * x, 1, keepdims=True) * x
        return jnp.sum(v * x[::-1])

    args = (jnp.asarray(1.7), Q, K, V, w, x)
    for got, want in zip(
        jax.grad(with_kernel, range(6))(*args), jax.grad(plain, range(6))(*args), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_blocked_reverse_mode_never_stores_n_by_n():
    """XLA's temporaries for the gradient of the blocked field stay far below one n × n array."""
    n, d = 2048, 8
    x = af.random_tokens(jr.key(4), n, d, dtype=jnp.float32)
    field = af.SelfAttention(2.0, block_size=256)
    grad = jax.jit(jax.grad(lambda y: jnp.sum(field(0.0, y) ** 2)))
    memory = grad.lower(x).compile().memory_analysis()
    one_matrix = n * n * 4
    assert memory.temp_size_in_bytes < one_matrix / 8, memory.temp_size_in_bytes


def _authors_layers(x, beta, eta, num_layers, V_rows=None):
    """The authors' scheme, transcribed: X ← X + η A X V_r, then rows normalised, with
    A = softmax(β X Xᵀ) and the value matrix V_r applied to the rows from the right."""
    out = [x]
    for _ in range(num_layers):
        logits = beta * x @ x.T
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        values = a @ x if V_rows is None else a @ x @ V_rows
        x = x + eta * values
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        out.append(x)
    return np.stack(out)


@pytest.mark.parametrize("with_V", [False, True])
def test_layers_is_the_authors_discrete_transformer(with_V):
    """300 layers (n = 32, d = 3, β = 4, step 0.1) against the transcription, to 1e-12."""
    x0 = af.random_tokens(jr.key(5), 32, 3)
    V_rows = np.random.default_rng(2).normal(size=(3, 3)) / 2 if with_V else None
    # Column-vector convention: V = V_rᵀ maps x_j to V x_j = (x_jᵀ V_r)ᵀ.
    field = af.SelfAttention(4.0, V=None if V_rows is None else V_rows.T)
    xs = af.layers(field, x0, 300, 0.1)
    np.testing.assert_allclose(
        xs, _authors_layers(np.asarray(x0), 4.0, 0.1, 300, V_rows), atol=1e-12
    )
    projected = af.layers(field, x0, 10, 0.1, projected=True)
    assert float(jnp.abs(projected[-1] - xs[10]).max()) > 1e-3  # a different scheme


@pytest.mark.parametrize("projected", [False, True])
def test_both_layer_schemes_converge_to_solve_at_order_one(projected):
    x0 = af.random_tokens(jr.key(6), 6, 3)
    field = af.SelfAttention(2.0)
    exact = af.solve(field, x0, 1.0, rtol=1e-12, atol=1e-12).ys[-1]
    steps = np.array([0.1, 0.05, 0.025])
    errors = [
        float(jnp.abs(af.layers(field, x0, round(1 / h), h, projected=projected)[-1] - exact).max())
        for h in steps
    ]
    assert 0.85 < loglog_slope(steps, errors) < 1.15


def test_every_layer_scheme_shares_one_iterator():
    """layers, Lie–Trotter, residual layers and the normalisation schemes run one loop: each
    scheme's jaxpr contains exactly one scan (the iterator) for a field with no inner loops."""
    x0 = af.random_tokens(jr.key(7), 5, 3)
    sa = af.SelfAttention(1.0)
    ff = af.FeedForward(jnp.eye(3), jnp.eye(3), jnp.zeros(3), jnp.tanh)
    runs = {
        "layers": lambda x: af.layers(sa, x, 3, 0.1),
        "lie_trotter": lambda x: af.lie_trotter_layers(sa, ff, x, 3, 0.1),
        "residual": lambda x: af.residual_layers(af.PureSelfAttention(1.0), x, 3, 0.1),
        "pre_ln": lambda x: af.PreLN().layers(af.AttentionSublayer(sa), x, 3, 0.1),
    }
    for name, run in runs.items():
        assert str(jax.make_jaxpr(run)(x0)).count("scan[") == 1, name


def _theta_rk4(theta0, beta, lam, t1, steps):
    n = len(theta0)

    def rhs(theta):
        out = np.zeros(n)
        for j in range(1, n):
            k = np.arange(j)
            w = np.exp(-lam * (j - k) / n)
            w /= w.sum()
            diff = theta[j] - theta[k]
            out[j] = np.sum(w * (-beta * np.sin(diff) * np.exp(beta * np.cos(diff))))
        return out

    theta, h = np.array(theta0, float), t1 / steps
    for _ in range(steps):
        k1 = rhs(theta)
        k2 = rhs(theta + h / 2 * k1)
        k3 = rhs(theta + h / 2 * k2)
        k4 = rhs(theta + h * k3)
        theta = theta + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return theta


def test_causal_alibi_matches_rk4_of_the_theta_equation():
    """On the circle: solve of CausalALiBiAttention against a NumPy RK4 of
    θ̇_j = Σ_{k<j} w_jk (−β sin(θ_j − θ_k) e^{β cos(θ_j − θ_k)}), to 1e-7."""
    theta0 = np.random.default_rng(3).uniform(0, 2 * np.pi, 8)
    beta, lam, t1 = 1.5, 2.0, 1.0
    x0 = jnp.stack([jnp.cos(theta0), jnp.sin(theta0)], axis=1)
    sol = af.solve(af.CausalALiBiAttention(beta, lam), x0, t1, rtol=1e-12, atol=1e-12)
    x1 = np.asarray(sol.ys[-1])
    theta1 = _theta_rk4(theta0, beta, lam, t1, 2000)
    np.testing.assert_allclose(x1, np.stack([np.cos(theta1), np.sin(theta1)], 1), atol=1e-7)
    np.testing.assert_allclose(x1[0], x0[0], atol=1e-14)  # token 1 does not move


def test_field_input_and_parameter_errors():
    x = af.random_tokens(jr.key(9), 4, 3)
    with pytest.raises(ValueError, match="causal: expected True or False, got 'no'"):
        af.SelfAttention(1.0, causal="no")
    with pytest.raises(ValueError, match="Q: expected a real floating-point matrix"):
        af.SelfAttention(1.0, Q=jnp.eye(3, dtype=complex) * (1 + 1j))
    with pytest.raises(ValueError, match="x: tokens contain NaN or inf"):
        af.SelfAttention(1.0)(0.0, x.at[1, 0].set(jnp.nan))
    with pytest.raises(ValueError, match="x: row 2 is zero"):
        af.SelfAttention(1.0)(0.0, x.at[2].set(0.0))
    with pytest.raises(ValueError, match="overflows float32 for β > 88"):
        af.SelfAttention(100.0, normalization="n")(0.0, x.astype(jnp.float32))
    with pytest.raises(ValueError, match=r"weights\): expected finite non-negative weights"):
        af.SelfAttention(1.0)(0.0, x, jnp.zeros(4))
    with pytest.raises(ValueError, match="rtol: expected a finite tolerance > 0"):
        af.sharded_solve(af.SelfAttention(1.0), x, 1.0, rtol=-1.0)
    with pytest.raises(ValueError, match="lam: expected a finite value >= 0"):
        af.CausalALiBiAttention(1.0, -1.0)
    with pytest.raises(ValueError, match="mask: expected None, 'causal'"):
        af.attention(x, x, x, mask="upper")
    with pytest.raises(ValueError, match="bias: expected shape"):
        af.attention(x, x, x, bias=jnp.zeros((3, 3)))


@pytest.mark.parametrize("normalization", ["softmax", "n"])
def test_uniform_weights_tangents_of_the_field_match_the_plain_field(normalization):
    """The path every SelfAttention takes (weights None, 1/n inside the kernel): forward and
    reverse derivatives in x, β, Q, K, V against the plain expression with w_j = 1/n."""
    x = af.random_tokens(jr.key(7), 8, 3)
    rng = np.random.default_rng(7)
    Q, K, V = (jnp.asarray(rng.normal(size=(3, 3))) for _ in range(3))
    uniform = jnp.full(8, 1.0 / 8)
    plain_norm = "softmax" if normalization == "softmax" else "sum"

    def with_kernel(beta, Q, K, V, x):
        field = af.SelfAttention(beta, Q, K, V, normalization=normalization)
        return field.attention_output(x)

    def plain(beta, Q, K, V, x):
        return _plain(beta * x @ Q.T, x @ K.T, x @ V.T, uniform, None, None, plain_norm)

    args = (jnp.asarray(0.9), Q, K, V, x)
    tangents = (jnp.asarray(0.3), *(jnp.asarray(rng.normal(size=a.shape)) for a in args[1:]))
    np.testing.assert_allclose(with_kernel(*args), plain(*args), rtol=1e-12, atol=1e-13)
    got = jax.jvp(with_kernel, args, tangents)[1]
    np.testing.assert_allclose(got, jax.jvp(plain, args, tangents)[1], rtol=1e-11, atol=1e-12)
    probe = jnp.asarray(rng.normal(size=(8, 3)))
    grads = jax.grad(lambda *a: jnp.sum(with_kernel(*a) * probe), range(5))(*args)
    wants = jax.grad(lambda *a: jnp.sum(plain(*a) * probe), range(5))(*args)
    for g, w in zip(grads, wants, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-12)


def test_usa_field_values_against_numpy():
    """USA, ẋ_i = P_{x_i} (1/n) Σ_j e^{β⟨Qx_i, Kx_j⟩} V x_j, written out in NumPy loops."""
    x = np.asarray(af.random_tokens(jr.key(8), 6, 3))
    rng = np.random.default_rng(8)
    Q, K, V = (rng.normal(size=(3, 3)) for _ in range(3))
    beta, n = 1.4, 6
    want = np.zeros_like(x)
    for i in range(n):
        out = sum(np.exp(beta * (Q @ x[i]) @ (K @ x[j])) * (V @ x[j]) for j in range(n)) / n
        want[i] = out - (out @ x[i]) * x[i]
    got = af.SelfAttention(beta, Q, K, V, normalization="n")(0.0, jnp.asarray(x))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("causal", [False, True])
def test_logits_finite_exactly_where_admissible_and_equal_to_beta_qk(causal):
    """AbstractAttention.logits: β⟨Qx_i, Kx_j⟩ where j ≤ i (everywhere without a mask), −∞
    exactly elsewhere; per head for the multi-head fields."""
    x = np.asarray(af.random_tokens(jr.key(9), 5, 3))
    rng = np.random.default_rng(9)
    Q, K = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    beta = 0.7
    want = beta * np.einsum("ik,jk->ij", x @ Q.T, x @ K.T)
    admissible = np.tril(np.ones((5, 5), bool)) if causal else np.ones((5, 5), bool)
    logits = np.asarray(af.SelfAttention(beta, Q, K, causal=causal).logits(jnp.asarray(x)))
    np.testing.assert_array_equal(np.isfinite(logits), admissible)
    np.testing.assert_allclose(logits[admissible], want[admissible], rtol=1e-13)
    assert np.all(logits[~admissible] == -np.inf)
    heads = af.MultiHeadAttention.from_heads(
        [af.SelfAttention(beta, Q, K, causal=causal), af.SelfAttention(2.0, causal=False)]
    ).logits(jnp.asarray(x))
    assert heads.shape == (2, 5, 5)
    np.testing.assert_array_equal(np.isfinite(heads[0]), admissible)
    np.testing.assert_allclose(heads[0][admissible], want[admissible], rtol=1e-13)
    np.testing.assert_allclose(heads[1], 2.0 * x @ x.T, rtol=1e-13)
