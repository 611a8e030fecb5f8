"""solve and solve_sde: no silent wrong answer. Every bad setting raises an error naming the
argument, eagerly and under jit / vmap; a field that is not finite is reported as such, not as
"maximum number of steps"."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
from attnflow._solve import auto_max_steps

X = af.random_tokens(jr.key(0), 4, 3)
FIELD = af.SelfAttention(1.0)
# Under jit, eqx.error_if surfaces as EquinoxRuntimeError, or wrapped by the CPU callback in
# JaxRuntimeError (ValueError on jit's C++ fast path, after a first successful call); the messages
# matched below are the traced ones, which differ from the eager ValueErrors.
RUNTIME_ERRORS = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)
NAN = float("nan")

# One compiled solve for every traced scalar setting, one for traced save times and dt0.
_traced = jax.jit(lambda t1, t0, rtol, atol: af.solve(FIELD, X, t1, t0=t0, rtol=rtol, atol=atol).ys)
_traced_ts = jax.jit(lambda ts, dt0: af.solve(FIELD, X, 1.0, ts=ts, dt0=dt0).ys)


def traced(t1=1.0, t0=0.0, rtol=1e-6, atol=1e-9):
    return _traced(t1, t0, rtol, atol)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(t1=NAN), r"t1: expected a finite value, got nan"),
        (dict(t1=float("inf")), r"t1: expected a finite value, got inf"),
        (dict(t1=1.0, t0=NAN), r"t0: expected a finite value, got nan"),
        (dict(t1=jnp.ones(2)), r"t1: expected a real scalar"),
        (dict(t1=1.0, rtol=-1.0), r"rtol: expected a finite tolerance > 0, got -1.0"),
        (dict(t1=1.0, rtol=0.0), r"rtol: expected a finite tolerance > 0, got 0.0"),
        (dict(t1=1.0, rtol=NAN), r"rtol: expected a finite tolerance > 0, got nan"),
        (dict(t1=1.0, atol=-1e-9), r"atol: expected a finite tolerance > 0, got -1e-09"),
        (dict(t1=1.0, dt0=0.0), r"dt0: expected a finite initial step with the sign of t1 - t0"),
        (dict(t1=1.0, dt0=NAN), r"dt0: expected a finite value, got nan"),
        (dict(t1=1.0, dt0=-0.1), r"dt0: .*got dt0 = -0.1 for t0 = 0.0, t1 = 1.0"),
        (dict(t1=1.0, max_steps=0), r"max_steps: expected a positive integer or None, got 0"),
        (dict(t1=1.0, max_steps=-5), r"max_steps: expected a positive integer or None, got -5"),
        (dict(t1=1.0, max_steps=100.0), r"max_steps: expected a positive integer or None"),
        (dict(t1=1.0, max_steps=True), r"max_steps: expected a positive integer or None"),
        (dict(t1=1.0, ts=[0.0, NAN, 1.0]), r"ts: expected finite save times.*ts\[1\] = nan"),
        (dict(t1=1.0, ts=[0.0, 2.0]), r"ts: .*ts\[1\] = 2.0 is outside \[0.0, 1.0\]"),
        (dict(t1=1.0, ts=[0.5, 0.2]), r"ts: .*must be non-decreasing, but ts\[0\] = 0.5"),
        (dict(t1=1.0, ts=jnp.ones((2, 2))), r"ts: expected a non-empty 1-d array"),
        (
            dict(t1=1.0, ts=[]),
            r"ts: expected a non-empty 1-d array of save times, got shape \(0,\)",
        ),
    ],
)
def test_bad_settings_raise_before_solving(kwargs, message):
    with pytest.raises(ValueError, match=message):
        af.solve(FIELD, X, **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(t1=NAN), "t1: expected a finite value"),
        (dict(t0=NAN), "t0: expected a finite value"),
        (dict(rtol=NAN), "rtol: expected a finite tolerance > 0"),
        (dict(atol=-1.0), "atol: expected a finite tolerance > 0"),
    ],
)
def test_bad_traced_settings_raise_under_jit(kwargs, message):
    with pytest.raises(RUNTIME_ERRORS, match=message):
        traced(**kwargs)


def test_bad_traced_save_times_and_dt0_raise_under_jit():
    assert _traced_ts(jnp.array([0.0, 0.5, 1.0]), 0.1).shape == (3, 4, 3)
    with pytest.raises(RUNTIME_ERRORS, match="ts: expected finite save times"):
        _traced_ts(jnp.array([0.0, NAN, 1.0]), 0.1)
    with pytest.raises(RUNTIME_ERRORS, match="ts: expected finite save times"):
        _traced_ts(jnp.array([0.0, 0.7, 0.5]), 0.1)
    with pytest.raises(RUNTIME_ERRORS, match="dt0: expected a finite initial step"):
        _traced_ts(jnp.array([0.0, 0.5, 1.0]), 0.0)


def test_nan_time_raises_under_vmap_and_in_sharded_solve():
    batched = jax.vmap(lambda t1: af.solve(FIELD, X, t1).ys)
    with pytest.raises(RUNTIME_ERRORS, match="t1: expected a finite value"):
        batched(jnp.array([1.0, NAN]))
    # sharded_solve checks t1 before compiling its program: a ValueError, not a runtime error.
    with pytest.raises(ValueError, match="t1: expected a finite value, got nan"):
        af.sharded_solve(FIELD, X, NAN)
    with pytest.raises(ValueError, match="t0: expected a finite value, got nan"):
        af.sharded_solve(FIELD, X, 1.0, t0=NAN)


def test_backwards_in_time_returns_to_the_start():
    # t1 < t0 is allowed and documented: the flow is reversible over a short horizon.
    forward = af.solve(FIELD, X, 1.0, ts=[0.0, 0.5, 1.0])
    back = af.solve(FIELD, forward.ys[-1], 0.0, t0=1.0, ts=[1.0, 0.5, 0.0])
    assert float(jnp.abs(forward.ys[-1] - X).max()) > 1e-2
    np.testing.assert_allclose(back.ys[-1], X, atol=1e-6)
    np.testing.assert_allclose(back.ys[0], forward.ys[-1], atol=1e-12)
    with pytest.raises(ValueError, match=r"ts: .*non-increasing \(t1 < t0\)"):
        af.solve(FIELD, X, 0.0, t0=1.0, ts=[0.0, 1.0])


def test_python_lists_are_tokens_and_half_precision_is_rejected():
    np.testing.assert_array_equal(af.solve(FIELD, X.tolist(), 1.0).ys, af.solve(FIELD, X, 1.0).ys)
    for dtype in (jnp.float16, jnp.bfloat16):
        with pytest.raises(
            ValueError, match=r"x0: supported dtypes are float32 and float64, got (b?float16)"
        ):
            af.solve(FIELD, X.astype(dtype), 1.0)
    with pytest.raises(ValueError, match=r"x0: expected a floating-point array .* got dtype c"):
        af.solve(FIELD, X.astype(jnp.complex64), 1.0)
    with pytest.raises(ValueError, match=r"x0: expected a floating-point array .* got dtype int"):
        af.solve(FIELD, jnp.eye(2, dtype=int), 1.0)


def test_unit_norm_error_prints_the_deviation():
    off = X.at[3].multiply(1 + 6e-8)
    with pytest.raises(ValueError, match=r"<= 1\.5e-08 in float64\), but \|x_3\| - 1 = 6\.00e-08"):
        af.solve(FIELD, off, 1.0)


def test_field_not_finite_is_reported_as_such():
    usa = af.SelfAttention(100.0, normalization="n")  # exp(100) overflows float32
    # Eagerly the field's own check may speak first (a ValueError naming the overflow).
    with pytest.raises((eqx.EquinoxRuntimeError, ValueError), match="not finite"):
        af.solve(usa, X.astype(jnp.float32), 1.0)
    solve_with = jax.jit(lambda Q: af.solve(af.SelfAttention(1.0, Q=Q, K=jnp.eye(3)), X, 1.0).ys)
    with pytest.raises(RUNTIME_ERRORS, match="not finite at the initial state.*Q, K, V"):
        solve_with(jnp.full((3, 3), NAN))


def test_max_steps_error_names_the_cap_and_the_steps_taken():
    with pytest.raises(
        eqx.EquinoxRuntimeError,
        match=r"reached max_steps = 10 \(\d+ accepted, \d+ rejected\) before t1 = 100\. Raise",
    ):
        af.solve(FIELD, X, 100.0, max_steps=10)
    with pytest.raises(RUNTIME_ERRORS, match=r"reached max_steps = 10 before t1\. Raise max_steps"):
        jax.jit(lambda x: af.solve(FIELD, x, 100.0, max_steps=10).ys)(X)
    sol = af.solve(FIELD, X, 100.0, max_steps=10, throw=False)
    assert sol.result == diffrax.RESULTS.max_steps_reached


def test_default_max_steps_scales_with_the_horizon():
    assert auto_max_steps(0.0, 1.0) == auto_max_steps(0.0, 1024.0) == 4096
    assert auto_max_steps(0.0, 1e5) == 2**19 >= 4 * 1e5
    assert auto_max_steps(1e5, 0.0) == 2**19
    # An already clustered system at t1 = 1e5: explicit steps are capped by stability at about
    # 3.5 time units, about 29 000 steps, more than the old fixed 4096.
    clustered = af.normalize(jnp.ones((4, 3)) + 1e-3 * jr.normal(jr.key(1), (4, 3)))
    sol = af.solve(FIELD, clustered, 1e5)
    assert int(sol.stats["num_steps"]) > 4096
    np.testing.assert_allclose(sol.ys[-1] @ sol.ys[-1].T, 1.0, atol=1e-9)


def test_solve_sde_stays_on_the_sphere_or_says_why():
    # σ·dt far too large: the raw state leaves the sphere, the saved directions do not; when the
    # raw state overflows float32 the solve says so.
    x0 = af.random_tokens(jr.key(2), 5, 3, dtype=jnp.float32)

    def run(sigma, normalize=True):
        kwargs = dict(sigma=sigma, key=jr.key(3), dt=0.01, form="ito", brownian="fast")
        return af.solve_sde(None, x0, 0.1, normalize=normalize, **kwargs).ys

    ys, raw = run(100.0), run(100.0, normalize=False)
    assert float(jnp.abs(jnp.linalg.norm(raw, axis=-1) - 1).max()) > 0.1
    np.testing.assert_allclose(jnp.linalg.norm(ys, axis=-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(ys, af.normalize(raw), atol=1e-6)
    with pytest.raises(eqx.EquinoxRuntimeError, match="solve_sde: the solver's state overflowed"):
        run(1e7)
