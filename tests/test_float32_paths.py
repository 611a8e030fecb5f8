"""Float32 paths against float64: the same inputs (rounded to float32 once, then used in both
precisions) must give the same answer to float32 accuracy, not merely a finite float32 array.

The tolerances are stated relative to the size of the result; each is a small multiple of what
float32 rounding (eps = 1.2e-7) amplified by the problem's conditioning allows, and far below
what a float32-specific bug (a clamp, a wrong cast, a truncated constant) would produce."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import attnflow as af

F32, F64 = jnp.float32, jnp.float64


def _inputs(seed, n=6, d=3, scale=1.0):
    """Tokens and (Q, K, V) representable exactly in float32, as (float32, float64) pairs."""
    keys = jr.split(jr.key(seed), 4)
    x = np.asarray(af.random_tokens(keys[0], n, d, dtype=F32))
    normals = [jr.normal(k, (d, d), F32).astype(F64) for k in keys[1:]]
    mats = [np.asarray(scale * z / np.sqrt(d)) for z in normals]
    as32 = [jnp.asarray(a, F32) for a in (x, *mats)]
    as64 = [jnp.asarray(a, F64) for a in (x, *mats)]
    as64[0] = af.normalize(as64[0])  # unit norm to float64 accuracy (moves x by ~6e-8)
    return as32, as64


def _assert_close(lo, hi, rtol, what=""):
    assert lo.dtype == F32, f"{what}: expected float32, got {lo.dtype}"
    assert hi.dtype == F64
    lo64 = np.asarray(lo, np.float64)
    hi = np.asarray(hi)
    scale = max(1.0, float(np.abs(hi).max()))
    err = float(np.abs(lo64 - hi).max())
    assert err <= rtol * scale, f"{what}: float32 differs from float64 by {err:.2e}"


def _both(fn, args32, args64):
    """fn compiled once per precision (cheaper than op-by-op dispatch of many small ops)."""
    compiled = jax.jit(fn)
    return compiled(*args32), compiled(*args64)


def test_pure_and_rescaled_attention():
    def outputs(x, Q, K, V):
        t = jnp.asarray(0.5, x.dtype)
        return {
            "PureSelfAttention": af.PureSelfAttention(1.0, Q, K, V)(t, x),
            "RescaledSelfAttention": af.RescaledSelfAttention(1.0, Q, K, V)(t, x),
            "rescale": af.rescale(x, t, V),
            "residual_layers": af.residual_layers(af.PureSelfAttention(1.0, Q, K, V), x, 5, 0.1),
        }

    lo, hi = _both(outputs, *_inputs(0))
    for name in lo:
        _assert_close(lo[name], hi[name], 1e-5, name)


def test_hardmax_attention():
    """Random weights have no ties: both precisions select the same keys, so the outputs agree
    to rounding (the top-two logit gaps are checked to exceed float32 rounding by far)."""
    args32, args64 = _inputs(1, n=7)
    x64, Q64, K64, _ = args64
    logits = np.asarray((x64 @ Q64.T) @ (x64 @ K64.T).T)
    top2 = np.sort(logits, axis=1)[:, -2:]
    assert np.min(top2[:, 1] - top2[:, 0]) > 1e-4

    def outputs(x, Q, K, V):
        return {
            "HardmaxSelfAttention": af.HardmaxSelfAttention(Q, K, V)(0.0, x),
            "HardmaxRescaledAttention": af.HardmaxRescaledAttention(Q, K, V)(0.0, x),
        }

    lo, hi = _both(outputs, args32, args64)
    for name in lo:
        _assert_close(lo[name], hi[name], 1e-6, name)


def test_positional_attention_at_large_beta():
    """β = 100 multiplies the float32 rounding of the logits (1e-7 · β): 1e-4 relative. The
    tokens lie in a cap of radius ~0.05, so that many weights are non-negligible."""
    g = np.asarray(jr.normal(jr.key(2), (6, 3), F64))
    x = np.asarray(af.normalize(jnp.asarray(g * 0.05 + np.array([0.0, 0.0, 1.0]))), np.float32)
    x32, x64 = jnp.asarray(x), af.normalize(jnp.asarray(x, F64))
    lo, hi = _both(
        lambda x: af.PositionalAttention(100.0, af.alibi_bias(6, 0.5, dtype=x.dtype))(0.0, x),
        [x32],
        [x64],
    )
    _assert_close(lo, hi, 1e-4, "PositionalAttention")
    assert float(jnp.abs(hi).max()) > 1e-3  # not a vanishing field


def test_normalization_schemes_layers():
    (x32, *_), (x64, *_) = _inputs(3, n=5)
    schemes = [af.PostLN(), af.PreLN(), af.PeriLN(), af.NGPT(jnp.array([0.5, 1.0, 2.0]))]
    sublayer = af.AttentionSublayer(af.SelfAttention(5.0))
    lo, hi = _both(lambda x: [s.layers(sublayer, x, 5, 0.1) for s in schemes], [x32], [x64])
    for scheme, a, b in zip(schemes, lo, hi, strict=True):
        _assert_close(a, b, 2e-5, type(scheme).__name__)


def test_noise_brownian_statistics():
    """The float32 SDE path (Itô, Euler–Maruyama): without interaction each token is Brownian
    motion on S^2, so E⟨x(t), x(0)⟩ = e^{−σ(d−1)t}, checked on 2000 independent tokens within 4
    standard errors (float32 and float64 draw different Brownian paths from one key, so paths
    are not compared; the drift is the field, compared above and in the solve tests)."""
    n, sigma, t1 = 2000, 0.5, 0.5
    x0 = af.random_tokens(jr.key(5), n, 3, dtype=F32)
    ys = af.solve_sde(
        None, x0, t1, sigma=sigma, key=jr.key(6), dt=0.05, brownian="fast", form="ito"
    ).ys
    assert ys.dtype == F32
    np.testing.assert_allclose(np.linalg.norm(np.asarray(ys), axis=-1), 1.0, atol=1e-6)
    cosines = np.sum(np.asarray(ys[-1], np.float64) * np.asarray(x0, np.float64), axis=1)
    stderr = cosines.std() / np.sqrt(n)
    assert abs(cosines.mean() - np.exp(-sigma * 2 * t1)) < 4 * stderr + 3e-3


def test_mmd_and_its_gradient():
    """MMD value and gradient (the Sinkhorn divergence's float32 path is ott-jax's own)."""
    keys = jr.split(jr.key(7), 4)
    x = np.asarray(af.random_tokens(keys[0], 5, 3, dtype=F32))
    y = np.asarray(af.random_tokens(keys[1], 6, 3, dtype=F32))
    a = np.asarray(jr.uniform(keys[2], (5,), F32) + 0.1)
    b = np.asarray(jr.uniform(keys[3], (6,), F32) + 0.1)
    a, b = a / a.sum(), b / b.sum()
    args = {
        F32: [jnp.asarray(v, F32) for v in (x, y, a, b)],
        F64: [af.normalize(jnp.asarray(x, F64)), af.normalize(jnp.asarray(y, F64))]
        + [jnp.asarray(v, F64) for v in (a, b)],
    }
    mmd = jax.jit(
        jax.value_and_grad(
            lambda x_, y_, a_, b_: af.measures.squared_mmd(x_, y_, x_weights=a_, y_weights=b_)
        )
    )
    (v32, g32), (v64, g64) = mmd(*args[F32]), mmd(*args[F64])
    assert v32.dtype == F32 and abs(float(v32) - float(v64)) <= 1e-5 * abs(float(v64))
    _assert_close(g32, g64, 1e-5, "grad squared_mmd")
