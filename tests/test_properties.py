"""Property-based tests (hypothesis) of the core invariants of self-attention dynamics, over
random n, d, β, Q, K, V, normalisation and dtype:

- the field is tangent: ⟨ẋ_i, x_i⟩ = 0;
- solve and layers stay on the sphere;
- permutation equivariance: field(Πx) = Π field(x) (no mask);
- rotation equivariance for Q = K = V = I: field(x Rᵀ) = field(x) Rᵀ, R ∈ O(d);
- bad tokens always raise a ValueError that names the argument.

Shapes are drawn from a few sizes, and β is passed as an array (a Python-float β is a static
hyperparameter: every drawn value would compile anew), so that compiled programs are shared
between examples; the examples are derandomised so that the suite is reproducible."""

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import attnflow as af

SHAPES = [(2, 2), (5, 4)]
DTYPES = [jnp.float32, jnp.float64]
EPS = {jnp.float32: 1e-5, jnp.float64: 1e-13}

PROPERTY = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

shapes = st.sampled_from(SHAPES)
dtypes = st.sampled_from(DTYPES)
betas = st.floats(0.0, 4.0, allow_nan=False)
seeds = st.integers(0, 2**16)
normalizations = st.sampled_from(["softmax", "n"])


def _system(seed, shape, dtype, identity=False):
    n, d = shape
    keys = jr.split(jr.key(seed), 4)
    x = af.random_tokens(keys[0], n, d, dtype=dtype)
    if identity:
        return x, None, None, None
    Q, K, V = (jr.normal(k, (d, d), dtype) / np.sqrt(d, dtype=dtype) for k in keys[1:])
    return x, Q, K, V


def _beta(beta, dtype):
    """β as an array of the tokens' dtype: one compiled program serves every drawn value."""
    return jnp.asarray(beta, dtype)


def _rotation(seed, d):
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q * np.sign(np.diag(r))  # Haar on O(d), reflections included


@eqx.filter_jit
def _evaluate(field, x):
    return field(0.0, x, None)


@eqx.filter_jit
def _layers(field, x):
    return af.layers(field, x, 4, 0.3)


def _scale(out):
    return 1.0 + float(np.abs(np.asarray(out, np.float64)).max())


@PROPERTY
@given(shapes, dtypes, betas, seeds, normalizations)
def test_field_is_tangent(shape, dtype, beta, seed, normalization):
    x, Q, K, V = _system(seed, shape, dtype)
    out = _evaluate(af.SelfAttention(_beta(beta, dtype), Q, K, V, normalization=normalization), x)
    assert out.dtype == dtype and out.shape == shape
    radial = np.abs(np.sum(np.asarray(out, np.float64) * np.asarray(x, np.float64), axis=1))
    assert radial.max() <= 10 * EPS[dtype] * _scale(out)


@PROPERTY
@given(shapes, dtypes, betas, seeds, normalizations)
def test_permutation_equivariance(shape, dtype, beta, seed, normalization):
    x, Q, K, V = _system(seed, shape, dtype)
    perm = np.random.default_rng(seed).permutation(shape[0])
    field = af.SelfAttention(_beta(beta, dtype), Q, K, V, normalization=normalization)
    out, permuted = _evaluate(field, x), _evaluate(field, x[perm])
    np.testing.assert_allclose(permuted, out[perm], atol=20 * EPS[dtype] * _scale(out))


@PROPERTY
@given(shapes, dtypes, betas, seeds, normalizations)
def test_rotation_equivariance_for_identity_weights(shape, dtype, beta, seed, normalization):
    """With Q = K = V = I the logits ⟨x_i, x_j⟩ are O(d)-invariant and the values rotate."""
    x, *_ = _system(seed, shape, dtype, identity=True)
    R = jnp.asarray(_rotation(seed, shape[1]), dtype)
    eye = jnp.eye(shape[1], dtype=dtype)  # as arrays: the compiled fields of the tests above
    field = af.SelfAttention(_beta(beta, dtype), eye, eye, eye, normalization=normalization)
    out, rotated = _evaluate(field, x), _evaluate(field, af.normalize(x @ R.T))
    np.testing.assert_allclose(rotated, out @ R.T, atol=20 * EPS[dtype] * _scale(out))


@PROPERTY
@given(shapes, dtypes, betas, seeds)
def test_layers_stay_on_the_sphere_and_rotate_with_the_tokens(shape, dtype, beta, seed):
    x, *_ = _system(seed, shape, dtype, identity=True)
    R = jnp.asarray(_rotation(seed, shape[1]), dtype)
    field = af.SelfAttention(_beta(beta, dtype))
    xs = _layers(field, x)
    assert xs.dtype == dtype
    np.testing.assert_allclose(jnp.linalg.norm(xs, axis=-1), 1.0, atol=10 * EPS[dtype])
    rotated = _layers(field, af.normalize(x @ R.T))
    np.testing.assert_allclose(rotated, xs @ R.T, atol=50 * EPS[dtype])


@settings(PROPERTY, max_examples=6)
@given(betas, seeds)
def test_solve_stays_on_the_sphere_and_is_permutation_equivariant(beta, seed):
    """One shape and dtype (one compilation; float32 solves are tested in test_solve.py);
    β, Q, K, V random each time."""
    dtype = jnp.float64
    x, Q, K, V = _system(seed, (3, 3), dtype)
    field = af.SelfAttention(_beta(beta, dtype), Q, K, V)
    ts = jnp.linspace(0.0, 1.0, 4)
    ys = af.solve(field, x, 1.0, ts=ts, rtol=1e-8, atol=1e-8).ys
    assert ys.dtype == dtype and ys.shape == (4, 3, 3)
    np.testing.assert_allclose(jnp.linalg.norm(ys, axis=-1), 1.0, atol=10 * EPS[dtype])
    perm = np.array([2, 0, 1])
    permuted = af.solve(field, x[perm], 1.0, ts=ts, rtol=1e-8, atol=1e-8).ys
    np.testing.assert_allclose(permuted, ys[:, perm], atol=1e-7)


def _corrupt(x, kind, row, amount):
    x = np.array(x)
    if kind == "nan":
        x[row, row % x.shape[1]] = np.nan
    elif kind == "inf":
        x[row, 0] = -np.inf
    elif kind == "zero":
        x[row] = 0.0
    elif kind == "off-sphere":
        x[row] *= amount
    return x


@PROPERTY
@given(
    shapes,
    dtypes,
    seeds,
    st.sampled_from(["nan", "inf", "zero", "off-sphere"]),
    st.integers(0, 10),
    st.one_of(st.floats(0.0, 0.99), st.floats(1.01, 1e6)),
    st.sampled_from(["solve", "layers"]),
)
def test_bad_tokens_always_raise_a_clear_error(shape, dtype, seed, kind, row, amount, entry):
    x, *_ = _system(seed, shape, dtype, identity=True)
    bad = jnp.asarray(_corrupt(x, kind, row % shape[0], amount), dtype)
    field = af.SelfAttention(1.0)
    with pytest.raises(ValueError, match=r"^x0: "):
        if entry == "solve":
            af.solve(field, bad, 1.0)
        else:
            af.layers(field, bad, 2, 0.1)


@PROPERTY
@given(
    st.sampled_from([(3,), (2, 3, 3), (3, 1), (0, 3)]),
    st.sampled_from(["solve", "layers"]),
)
def test_bad_shapes_always_raise_a_clear_error(shape, entry):
    x = jnp.ones(shape) / np.sqrt(shape[-1]) if shape[-1] else jnp.ones(shape)
    field = af.SelfAttention(1.0)
    with pytest.raises(ValueError, match=r"^x0: .*shape"):
        if entry == "solve":
            af.solve(field, x, 1.0)
        else:
            af.layers(field, x, 2, 0.1)


@PROPERTY
@given(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
def test_bad_beta_always_raises_a_clear_error(beta):
    # β < 0 is a model (docs/conventions.md, "Negative β"): only non-finite values are refused.
    with pytest.raises(ValueError, match=r"^beta: "):
        af.SelfAttention(beta)


def test_solve_under_jit_with_a_python_dt0():
    """Regression: a Python-float dt0 with traced tokens ('No arrays to thread error on to')."""
    import diffrax
    import jax

    x0 = af.random_tokens(jr.key(0), 3, 3)
    solve = jax.jit(
        lambda x: (
            af.solve(
                af.SelfAttention(1.0),
                x,
                1.0,
                dt0=0.25,
                stepsize_controller=diffrax.ConstantStepSize(),
            ).ys
        )
    )
    np.testing.assert_allclose(jnp.linalg.norm(solve(x0), axis=-1), 1.0, atol=1e-12)
