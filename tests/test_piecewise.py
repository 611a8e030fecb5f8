"""PiecewiseConstant: piece selection, solves across switches, gradients in every piece."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

N, D = 4, 3
SWITCHES = (0.4, 0.8)
T1 = 1.2
RTOL, ATOL = 1e-10, 1e-12


def _matrices(seed, scale=0.5):
    keys = jr.split(jr.key(seed), 3)
    eye = jnp.eye(D)
    return [eye[None] + scale * jr.normal(k, (3, D, D)) for k in keys]


def _piecewise(beta, Q, K, V):
    return af.PiecewiseConstant.from_attention(beta, Q, K, V, switch_times=SWITCHES)


def test_piece_index_is_right_continuous_and_pieces_are_the_given_fields():
    Q, K, V = _matrices(0)
    f = _piecewise([1.0, 2.0, 3.0], Q, K, V)
    assert f.num_pieces == 3
    np.testing.assert_array_equal(f.jump_times, np.asarray(SWITCHES))
    for t, k in [(-1.0, 0), (0.0, 0), (0.4 - 1e-12, 0), (0.4, 1), (0.79, 1), (0.8, 2), (5.0, 2)]:
        assert int(f.piece_index(t)) == k, t
    x = af.random_tokens(jr.key(1), N, D)
    for t, k in [(0.1, 0), (0.5, 1), (1.0, 2)]:
        direct = af.SelfAttention(float(k + 1), Q[k], K[k], V[k])
        np.testing.assert_allclose(f(t, x), direct(t, x), rtol=1e-13, atol=1e-14)
        np.testing.assert_array_equal(f.piece(k).V, V[k])


def test_from_fields_stacks_multi_head_fields():
    heads = [
        af.MultiHeadAttention.from_heads(
            [af.SelfAttention(b), af.SelfAttention(2 * b, V=-jnp.eye(D))]
        )
        for b in (0.5, 1.5)
    ]
    f = af.PiecewiseConstant.from_fields(heads, switch_times=[1.0])
    x = af.random_tokens(jr.key(2), N, D)
    np.testing.assert_allclose(f(0.5, x), heads[0](0.5, x), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(f(1.5, x), heads[1](1.5, x), rtol=1e-13, atol=1e-14)


def test_vmap_over_a_batch_of_piecewise_fields_equals_a_loop():
    # Random per-layer weights for an ensemble: a batch of stacked fields.
    keys = jr.split(jr.key(3), 5)

    def make(key):
        V = jr.normal(key, (3, D, D))
        return af.PiecewiseConstant.from_attention(1.0, V=V, switch_times=jnp.asarray(SWITCHES))

    batch = eqx.filter_vmap(make)(keys)
    x = af.random_tokens(jr.key(4), N, D)
    # eqx.filter_vmap: a number β is a hyperparameter (not batched), as in any equinox module.
    batched = eqx.filter_vmap(lambda f: f(0.6, x))(batch)
    looped = jnp.stack([make(k)(0.6, x) for k in keys])
    np.testing.assert_allclose(batched, looped, rtol=1e-13, atol=1e-14)


@jax.jit
def _solve_piecewise(beta, Q, K, V, x0):
    return af.solve(_piecewise(beta, Q, K, V), x0, T1, rtol=RTOL, atol=ATOL).ys[-1]


@jax.jit
def _solve_constant(beta, Q, K, V, x0, t0, t1):
    return af.solve(af.SelfAttention(beta, Q, K, V), x0, t1, t0=t0, rtol=RTOL, atol=ATOL).ys[-1]


def test_solve_across_switches_equals_solving_piece_by_piece():
    Q, K, V = _matrices(5)
    beta = jnp.array([1.0, 2.0, 0.5])
    x0 = af.random_tokens(jr.key(6), N, D)
    np.testing.assert_allclose(
        _solve_piecewise(beta, Q, K, V, x0), _piece_by_piece(beta, Q, K, V, x0), atol=1e-10
    )


def _piece_by_piece(beta, Q, K, V, x0):
    x, bounds = x0, (0.0, *SWITCHES, T1)
    for k in range(3):
        x = _solve_constant(beta[k], Q[k], K[k], V[k], x, bounds[k], bounds[k + 1])
    return x


def test_solve_steps_to_the_switching_times_in_float32():
    # A field discontinuous in t: stepping exactly to the jumps (jump_ts) keeps the error at
    # the tolerance; letting the error estimate find them costs rejected steps and accuracy.
    # float32 tokens with float64 switching times also checks the dtype handed to diffrax.
    eye = jnp.eye(D)
    V = jnp.stack([eye, -eye, eye])
    f = af.PiecewiseConstant.from_attention(1.0, V=V, switch_times=SWITCHES)
    x0 = af.random_tokens(jr.key(7), N, D, dtype=jnp.float32)
    with_jumps = af.solve(f, x0, T1)
    plain = af.solve(f, x0, T1, stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-6))
    identity = jnp.stack([eye] * 3)
    reference = _piece_by_piece(jnp.ones(3), identity, identity, V, af.normalize(x0.astype(float)))
    assert with_jumps.ys.dtype == jnp.float32
    error_with_jumps = float(jnp.max(jnp.abs(with_jumps.ys[-1].astype(float) - reference)))
    error_plain = float(jnp.max(jnp.abs(plain.ys[-1].astype(float) - reference)))
    assert error_with_jumps < 1e-5 and error_with_jumps < error_plain / 10
    assert int(with_jumps.stats["num_rejected_steps"]) < int(plain.stats["num_rejected_steps"])


def _richardson_central_difference(f, h=1e-3):
    """f'(0) from central differences at h and h/2, extrapolated: error O(h⁴)."""

    def central(step):
        return (f(step) - f(-step)) / (2 * step)

    return (4 * central(h / 2) - central(h)) / 3


def test_gradients_in_every_piece_match_central_finite_differences():
    Q, K, V = _matrices(9)
    beta = jnp.array([1.5, 0.5, 2.0])
    x0 = af.random_tokens(jr.key(10), N, D)
    W = jr.normal(jr.key(11), (N, D))
    params = {"beta": beta, "Q": Q, "K": K, "V": V}

    def loss(p):
        return jnp.sum(W * _solve_piecewise(p["beta"], p["Q"], p["K"], p["V"], x0))

    value_and_grad = jax.jit(jax.value_and_grad(loss))
    grad = value_and_grad(params)[1]

    # The 48 values of the finite differences need no gradient: the compiled solve of
    # test_solve_across_switches (the same shapes) serves them.
    value = loss

    keys = iter(jr.split(jr.key(12), 12))
    for name in params:
        for k in range(3):
            direction = (
                jnp.zeros_like(params[name])
                .at[k]
                .set(jr.normal(next(keys), params[name].shape[1:]))
            )
            fd = _richardson_central_difference(
                lambda h: float(value({**params, name: params[name] + h * direction}))  # noqa: B023
            )
            ad = float(jnp.vdot(grad[name], direction))
            assert abs(fd) > 1e-4, (name, k)
            assert abs(ad - fd) <= 1e-6 * abs(fd), (name, k, ad, fd)


def test_bad_inputs_raise_clear_errors():
    Q, K, V = _matrices(13)
    with pytest.raises(ValueError, match="switch_times: expected strictly increasing"):
        af.PiecewiseConstant.from_attention(1.0, V=V, switch_times=[0.8, 0.4])
    with pytest.raises(ValueError, match="switch_times: expected a 1-d array"):
        af.PiecewiseConstant.from_attention(1.0, V=V, switch_times=0.4)
    with pytest.raises(ValueError, match=r"V: expected L = len\(switch_times\) \+ 1 = 3"):
        af.PiecewiseConstant.from_attention(1.0, V=V[:2], switch_times=SWITCHES)
    with pytest.raises(ValueError, match="beta: expected a scalar or L"):
        af.PiecewiseConstant.from_attention([1.0, 2.0], V=V, switch_times=SWITCHES)
    with pytest.raises(ValueError, match="piece 1: beta: expected a finite value"):
        af.PiecewiseConstant.from_attention([1.0, float("nan"), 1.0], switch_times=SWITCHES)
    with pytest.raises(ValueError, match="piece 1 differs from piece 0"):
        af.PiecewiseConstant.from_fields(
            [af.SelfAttention(1.0), af.SelfAttention(1.0, normalization="n")], switch_times=[1.0]
        )
    with pytest.raises(ValueError, match="piece 1 has array shapes"):
        af.PiecewiseConstant.from_fields(
            [af.SelfAttention(1.0, V=jnp.eye(2)), af.SelfAttention(1.0, V=jnp.eye(3))],
            switch_times=[1.0],
        )
    with pytest.raises(ValueError, match="fields: expected len"):
        af.PiecewiseConstant.from_fields([af.SelfAttention(1.0)], switch_times=[1.0])
    with pytest.raises(ValueError, match="leading axis of length L = .* = 3, got a leaf of shape"):
        # β as an array (a 0-d leaf): a number β would be a hyperparameter shared by the pieces
        af.PiecewiseConstant(af.SelfAttention(jnp.asarray(1.0), V=jnp.eye(D)), SWITCHES)
    with pytest.raises(ValueError, match="field: expected a stacked attnflow field"):
        af.PiecewiseConstant(lambda t, x, args: x, SWITCHES)


def _distinguishable(num_pieces):
    """Pieces V_k = (k + 1) I with β = 1: layer k's update reveals which piece it used."""
    return jnp.stack([(k + 1) * jnp.eye(D) for k in range(num_pieces)])


@pytest.mark.parametrize(
    ("switch_dtype", "step", "t0"),
    [
        (jnp.float32, np.float64(0.1), 0.0),  # float32 switches, a (non-weak) float64 step
        (jnp.float32, 0.1, np.float64(0.3)),  # … or a float64 start time
        (jnp.float64, np.float32(0.1), 0.0),  # float64 switches, float32 layer times
    ],
)
def test_layers_use_one_piece_per_layer_when_switch_dtype_differs(switch_dtype, step, t0):
    """Regression: switches on layer boundaries in another dtype made ``layers`` repeat a piece
    (a float64 t = 0.1 is below float32's 0.1). Reference: post-LN Euler with piece k by hand."""
    num_layers = 8
    V = _distinguishable(num_layers)
    switches = jnp.asarray([float(t0) + k * 0.1 for k in range(1, num_layers)], switch_dtype)
    f = af.PiecewiseConstant.from_attention(1.0, V=V, switch_times=switches)
    x0 = af.random_tokens(jr.key(20), N, D)
    xs = af.layers(f, x0, num_layers, step, t0=t0)
    x, expected = x0, [x0]
    for k in range(num_layers):
        # The discrete Transformer steps with the unprojected attention output.
        x = af.normalize(x + float(step) * af.SelfAttention(1.0, V=V[k]).attention_output(x))
        expected.append(x)
    np.testing.assert_allclose(xs, jnp.stack(expected), atol=1e-7)


def test_jump_times_of_float32_switches_are_their_float64_rounding_boundaries():
    """A jump time b is the least float64 that rounds to s in float32: b ↦ s, prevbefore(b) ↦
    below s; and the pieces on either side of it are the old and the new one."""
    s = jnp.asarray([0.1, 0.4, 0.7, 1.0, 3.0, 1e-3], jnp.float32)  # 1.0: mantissa even
    s = jnp.concatenate([s, jnp.nextafter(s, jnp.float32(jnp.inf))])  # … and odd neighbours
    s = jnp.sort(s)
    f = af.PiecewiseConstant.from_attention(1.0, V=jnp.ones((s.size + 1, D, D)), switch_times=s)
    b = f.jump_times
    assert b.dtype == jnp.float64
    before = jnp.nextafter(b, -jnp.inf)
    np.testing.assert_array_equal(b.astype(jnp.float32), s)
    assert bool(jnp.all(before.astype(jnp.float32) < s))
    pieces = jnp.arange(1, s.size + 1)
    np.testing.assert_array_equal(jax.vmap(f.piece_index)(b), pieces)
    np.testing.assert_array_equal(jax.vmap(f.piece_index)(before), pieces - 1)


def test_solve_with_float32_switches_and_float64_tokens_steps_as_with_float64_switches():
    """The solver steps to just before/after each jump_time: with float32 switches (compared
    in float32) it must see the old then the new piece there, or it rejects steps galore."""
    V = jnp.stack([jnp.eye(D), -jnp.eye(D), jnp.eye(D)])
    x0 = af.random_tokens(jr.key(21), N, D)
    switches32 = jnp.asarray(SWITCHES, jnp.float32)
    f32 = af.PiecewiseConstant.from_attention(1.0, V=V, switch_times=switches32)
    sol = af.solve(f32, x0, T1, rtol=RTOL, atol=ATOL)
    f64 = af.PiecewiseConstant.from_attention(1.0, V=V, switch_times=SWITCHES)
    reference = af.solve(f64, x0, T1, rtol=RTOL, atol=ATOL)
    # The switches moved by < 1 float32 ulp (3e-8): the end state moves by about as much.
    np.testing.assert_allclose(sol.ys, reference.ys, atol=1e-7)
    assert int(sol.stats["num_rejected_steps"]) == int(reference.stats["num_rejected_steps"])
