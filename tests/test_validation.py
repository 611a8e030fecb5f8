"""Bad input raises a clear error naming the argument, what was expected and what came."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import pytest

import attnflow as af

X = af.random_tokens(jr.key(0), 4, 3)
# eqx.error_if surfaces as EquinoxRuntimeError, or wrapped in JaxRuntimeError by the CPU callback.
RUNTIME_ERRORS = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)
FIELD = af.SelfAttention(1.0)


@pytest.mark.parametrize(
    "bad, message",
    [
        (jnp.ones(3), r"x0: expected tokens of shape \(n, d\).*got an array of shape \(3,\)"),
        (jnp.ones((2, 4, 3)), r"x0: expected tokens of shape \(n, d\).*\(2, 4, 3\)"),
        (jnp.ones((4, 1)), r"x0: the sphere S\^\(d-1\) needs d >= 2, got d = 1"),
        (X.at[1, 2].set(jnp.nan), r"x0: tokens contain NaN or inf \(first at row 1, col 2\)"),
        (2 * X, r"x0: tokens must lie on the unit sphere.*\|x_\d\| - 1 = 1.00e\+00.*normalize"),
        (jnp.zeros((4, 3)), r"x0: tokens must lie on the unit sphere.*= -1.00e\+00 \(a zero row\)"),
    ],
)
def test_bad_tokens(bad, message):
    with pytest.raises(ValueError, match=message):
        af.solve(FIELD, bad, 1.0)
    with pytest.raises(ValueError, match=message):
        af.layers(FIELD, bad, 2, 0.1)


def test_bad_tokens_under_jit():
    run = jax.jit(lambda x: af.solve(FIELD, x, 1.0).ys)
    with pytest.raises(RUNTIME_ERRORS, match="x0: tokens must lie on the unit sphere"):
        run(2 * X)
    with pytest.raises(RUNTIME_ERRORS, match="x0: tokens contain NaN or inf"):
        run(X.at[0, 0].set(jnp.inf))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(beta=float("inf")), r"beta: expected a finite value \(of either sign\), got inf"),
        (dict(beta=float("nan")), r"beta: expected a finite value \(of either sign\), got nan"),
        (dict(beta=jnp.ones(2)), r"beta: expected a real scalar, got an array of shape \(2,\)"),
        (
            dict(beta=1.0, Q=jnp.ones((2, 3)), K=jnp.ones((3, 3))),
            r"Q, K: must have the same number of rows k.*Q \(2, 3\) and K \(3, 3\)",
        ),
        (
            dict(beta=1.0, Q=jnp.ones((2, 3)), K=jnp.ones((2, 4))),
            r"Q, K, V: their column counts must all equal the token dimension d",
        ),
        (dict(beta=1.0, V=jnp.ones((3, 4))), r"V: expected a square \(d, d\) value matrix"),
        (dict(beta=1.0, Q=jnp.ones((2, 3))), r"K: is missing \(identity\) so Q must be square"),
        (
            dict(beta=1.0, V=jnp.ones(3)),
            r"V: expected a matrix of shape \(d, d\), got shape \(3,\)",
        ),
        (dict(beta=1.0, normalization="sum"), r"normalization: expected 'softmax' \(SA\) or 'n'"),
    ],
)
def test_bad_attention_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        af.SelfAttention(**kwargs)


def test_dimension_mismatch_between_tokens_and_matrices():
    field = af.SelfAttention(1.0, V=jnp.eye(5))
    with pytest.raises(
        ValueError, match=r"x: tokens have dimension d = 3 but Q, K, V act on d = 5"
    ):
        field(0.0, X, None)


def test_bad_energy_and_metric_parameters():
    with pytest.raises(ValueError, match=r"beta: expected a finite value ≠ 0 .*, got 0.0"):
        af.InteractionEnergy(0.0)
    with pytest.raises(ValueError, match=r"beta: expected a finite value ≠ 0 .*, got nan"):
        af.AttentionMetric(float("nan"))
    with pytest.raises(ValueError, match="A: must be symmetric"):
        af.InteractionEnergy(1.0, jnp.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"A: expected shape \(3, 3\)"):
        af.InteractionEnergy(1.0, jnp.eye(2))(X)
    with pytest.raises(ValueError, match=r"weights: expected shape \(4,\)"):
        af.InteractionEnergy(1.0)(X, jnp.ones(3))
    with pytest.raises(ValueError, match="weights: expected finite non-negative weights"):
        af.InteractionEnergy(1.0)(X, -jnp.ones(4))
    with pytest.raises(ValueError, match="energy: expected an AbstractEnergy"):
        af.GradientFlow(lambda x: 0.0, af.WassersteinMetric())


def test_bad_heads_and_beta_under_jit():
    with pytest.raises(ValueError, match="heads: expected at least one"):
        af.MultiHeadAttention.from_heads([])
    with pytest.raises(ValueError, match="heads: all heads must act on the same d"):
        af.MultiHeadAttention.from_heads(
            [af.SelfAttention(1.0, V=jnp.eye(2)), af.SelfAttention(1.0, V=jnp.eye(3))]
        )
    field_of = jax.jit(lambda b: af.SelfAttention(b)(0.0, X, None))
    with pytest.raises(RUNTIME_ERRORS, match="beta: expected a finite value"):
        field_of(jnp.inf)


def test_bad_ts():
    with pytest.raises(ValueError, match=r"ts: expected a non-empty 1-d array of save times"):
        af.solve(FIELD, X, 1.0, ts=jnp.ones((2, 2)))


def test_keys_legacy_accepted_int_seed_refused():
    import jax.random as jr

    legacy, typed = jr.PRNGKey(3), jr.key(3)
    assert jnp.array_equal(af.random_tokens(legacy, 4, 3), af.random_tokens(typed, 4, 3))
    assert jnp.array_equal(af.orthogonal_tokens(2, 3, legacy), af.orthogonal_tokens(2, 3, typed))
    for call in (
        lambda: af.random_tokens(3, 4, 3),
        lambda: af.orthogonal_tokens(2, 3, 3),
        lambda: af.measures.von_mises_fisher(3, jnp.array([1.0, 0.0, 0.0]), 1.0, 4),
    ):
        with pytest.raises(
            ValueError, match=r"key: expected a JAX PRNG key, got 3 \(int\); make one"
        ):
            call()


def test_shape_diagnoses_name_the_mistake():
    x = af.random_tokens(__import__("jax").random.key(0), 4, 3)
    with pytest.raises(ValueError, match=r"x: expected tokens of shape \(n, d\), got \(T, n, d\)"):
        af.InteractionEnergy(1.0)(jnp.stack([x, x]))
    with pytest.raises(ValueError, match=r"x0: .*looks transposed \(pass x0.T\)"):
        af.solve(af.SelfAttention(1.0), x.T, 1.0)


def test_budgets_refuse_before_work():
    x = af.random_tokens(__import__("jax").random.key(0), 4, 3)
    with pytest.raises(
        ValueError, match=r"t1: expected a request of at most .* solver steps.*times"
    ):
        af.solve(af.SelfAttention(1.0), x, 1e12)
    with pytest.raises(ValueError, match=r"samples: expected a request of at most .* grid points"):
        af.measures.kde_mode_count([0.0, 1e6], 1e10)


def test_bools_and_dict_keys():
    x = af.random_tokens(__import__("jax").random.key(0), 4, 3)
    with pytest.raises(ValueError, match=r"args: unknown key\(s\) \['weight'\]"):
        af.SelfAttention(1.0)(0.0, x, {"weight": jnp.ones(4) / 4})
    with pytest.raises(
        ValueError, match=r"normalize: expected a bool \(True or False\), got 'False'"
    ):
        af.inner_product_histogram(x, normalize="False")
    with pytest.raises(ValueError, match=r"circular: expected a bool"):
        af.measures.kde_mode_count([0.0, 1.0], 4.0, circular="False")
    with pytest.raises(
        ValueError, match=r"weights: expected finite non-negative weights with a positive"
    ):
        af.cluster_masses(x, weights=jnp.zeros(4))


def test_real_values_refuse_strings_complex_nan_and_out_of_range():
    from attnflow._check import check_real_values

    assert float(check_real_values(0.5, "t", low=0)) == 0.5
    assert check_real_values([0.0, 1.0], "t").shape == (2,)
    for bad, message in [
        ("1.0", r"t: expected an array"),
        (True, r"t: expected real numbers"),
        (1.0 + 1.0j, r"t: expected real numbers"),
        (float("nan"), r"t: expected finite values"),
        (-1.0, r"t: expected finite values >= 0, got -1.0"),
        (jnp.array([0.5, 2.0]), r"t: expected finite values >= 0 and <= 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_real_values(bad, "t", low=0, high=1) if "<=" in message else check_real_values(
                bad, "t", low=0
            )
    with pytest.raises(RUNTIME_ERRORS, match="t: expected finite values >= 0"):
        jax.jit(lambda t: check_real_values(t, "t", low=0))(-1.0)
