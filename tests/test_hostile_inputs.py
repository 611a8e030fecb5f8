"""Issue 35's hostile inputs that the API walk (tests/test_api_walk.py) cannot reach by argument
name: methods, transformations, files, and the diagnoses of failed solves. Each test states the
independent fact it checks (a closed form, a timing bound, the file named)."""

import time

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
import attnflow.models as models
import attnflow.pretrained as pretrained
import attnflow.theory as theory

X = af.random_tokens(jr.key(0), 4, 3)


def _loss(beta):
    field = af.SelfAttention(beta)
    sol = af.solve(field, X, 0.5, adjoint=af.StoredStepAdjoint(steps=8))
    return jnp.sum(sol.ys[-1][0])


@pytest.mark.parametrize(
    "transform",
    [
        lambda: jax.jvp(_loss, (1.0,), (1.0,)),
        lambda: jax.jacfwd(_loss)(1.0),
        lambda: jax.hessian(_loss)(1.0),
        lambda: jax.grad(jax.grad(_loss))(1.0),
    ],
    ids=["jvp", "jacfwd", "hessian", "grad-of-grad"],
)
def test_stored_step_adjoint_refuses_forward_mode_at_once(transform):
    start = time.perf_counter()
    with pytest.raises(ValueError, match="adjoint: StoredStepAdjoint"):
        transform()
    # Refused at solve's entry, before the reverse pass is traced (was 40-60 s for a Hessian).
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("solver", "tsit5", "solver: expected an instance of diffrax.AbstractSolver"),
        ("adjoint", af.StoredStepAdjoint, "adjoint: .* the class attnflow.StoredStepAdjoint"),
        ("stepsize_controller", "pid", "stepsize_controller: expected an instance"),
        ("progress_meter", diffrax.TqdmProgressMeter, "progress_meter: .* itself"),
    ],
)
def test_solve_options_take_instances(option, value, expected):
    with pytest.raises(ValueError, match=expected):
        af.solve(af.SelfAttention(1.0), X, 1.0, **{option: value})


def test_field_with_the_wrong_signature_is_named():
    with pytest.raises(ValueError, match=r"field: .* signature \(x\)"):
        af.solve(lambda x: x, X, 1.0)


def test_stiff_usa_is_diagnosed_as_stiff_not_as_a_zero_row():
    # USA at β = 80 in float32: the rate e^80 ≈ 5.5e34 overflows the float32 Jacobian; the
    # solve cannot finish with an explicit solver, and the message must say why.
    x0 = af.random_tokens(jr.key(0), 8, 3, dtype=jnp.float32)
    with pytest.raises(eqx.EquinoxRuntimeError, match="stiff") as info:
        af.solve(af.SelfAttention(80.0, normalization="n"), x0, 10.0)
    assert "zero row" not in str(info.value)


def test_step_cap_is_still_diagnosed_as_the_step_cap():
    # SA at β = 1 contracts at rate ~1: 10^4 time units need ~3e3 steps, far below the budget,
    # so raising max_steps is the right advice.
    with pytest.raises(eqx.EquinoxRuntimeError, match="Raise max_steps"):
        af.solve(af.SelfAttention(1.0), X, 1e4, max_steps=100)


@pytest.mark.parametrize("bad", ["nan", "zero row"])
def test_fields_under_the_users_jit_refuse_nan_and_zero_rows(bad):
    # Issue 44 item 6: the field's own traced check (eqx.error_if), in the user's jit.
    x = X.at[1].set(jnp.nan if bad == "nan" else 0.0)
    fields = [af.SelfAttention(1.0), af.MultiHeadAttention.from_heads([af.SelfAttention(1.0)] * 2)]
    if bad == "nan":  # GradientFlow lives on the Euclidean extension: a zero row is in its domain
        fields.append(af.GradientFlow(af.InteractionEnergy(1.0), af.WassersteinMetric()))
    for field in fields:
        with pytest.raises(
            (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="x: tokens"
        ):
            jax.block_until_ready(eqx.filter_jit(lambda x, f=field: f(0.0, x))(x))
    with pytest.raises(ValueError, match="x: row 1 is zero|x: tokens contain NaN"):
        fields[0](0.0, x)  # eagerly too


def _callbacks(fn, *args):
    return str(jax.make_jaxpr(fn)(*args)).count("callback")


def test_engines_trace_the_fields_without_their_checks():
    # The engines checked x0 once at entry: tracing their loop adds no field check, so their
    # programs are those of an unchecked field computing the same values (counted work).
    field = af.SelfAttention(1.0)

    def plain(t, x, args):
        return af.project_tangent(x, field.attention_output(x))

    assert _callbacks(lambda x: field(0.0, x), X) > _callbacks(lambda x: plain(0.0, x, None), X)
    for engine in (
        lambda f: lambda x: af.solve(f, x, 1.0).ys,
        lambda f: lambda x: af.layers(f, x, 3, 0.1),
    ):
        assert _callbacks(engine(field), X) == _callbacks(engine(plain), X)


def test_normalize_rows_that_overflow_or_underflow_the_norm():
    # |(1e308, 1e308)| overflows float64; the direction is (1, 1)/√2.
    out = af.normalize(jnp.array([[1e308, 1e308], [3e-300, 4e-300]]))
    assert np.allclose(out, [[2**-0.5, 2**-0.5], [0.6, 0.8]], rtol=1e-15)
    with pytest.raises(ValueError, match="x: row 0 has only subnormal entries"):
        af.normalize(jnp.array([[1e-310, 0.0]]))


def test_geodesic_refuses_a_normal_direction():
    with pytest.raises(ValueError, match="v: expected tangent vectors"):
        af.geodesic(X, X, 1.0)


def test_hardmax_of_integer_logits_and_masked_rows():
    assert af.hardmax(jnp.array([[1, 3, 3]])).tolist() == [[0.0, 0.5, 0.5]]
    with pytest.raises(ValueError, match="logits: the row at index"):
        af.hardmax(jnp.array([[-jnp.inf, -jnp.inf]]))
    with pytest.raises(ValueError, match="logits: expected finite values"):
        af.hardmax(jnp.array([[jnp.nan, 1.0]]))


def test_pair_models_name_theta0_for_coincident_angles():
    for model in (models.collision_model, theory.staircase_plateaus):
        with pytest.raises(ValueError, match=r"theta0: expected distinct angles"):
            model(np.array([0.0, 2 * np.pi, 1.0, 2.0]), 4.0)


def test_ensemble_sample_checks_key_size_and_dtype():
    ensemble = af.GPT2_ENSEMBLE
    with pytest.raises(ValueError, match="key: expected a JAX PRNG key"):
        ensemble.sample(0, 4)
    with pytest.raises(ValueError, match="d: expected a request of at most"):
        ensemble.sample(jr.key(0), 10**5)  # 3e10 numbers: refused before allocating
    with pytest.raises(ValueError, match="dtype: expected a dtype among float32, float64"):
        ensemble.sample(jr.key(0), 4, dtype=jnp.float16)


def test_phase_diagram_refusals_come_before_compiling():
    common = dict(n=4, d=3, ts=[0.0, 1.0], realizations=2, progress=False)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="dtype: expected a dtype among"):
        af.phase_diagram(jr.key(0), betas=[1.0], dtype=jnp.float16, **common)
    # e^100 overflows float32 (max ≈ e^88.7): with Q = K = I the diagonal term is e^β exactly.
    with pytest.raises(ValueError, match=r"betas: expected β <= 88.7"):
        af.phase_diagram(jr.key(0), betas=[100.0], normalization="n", dtype=jnp.float32, **common)
    with pytest.raises(ValueError, match="family: expected a request of at most"):
        af.phase_diagram(jr.key(0), betas=[1.0], family=af.FieldFamily(period=1e-9), **common)
    assert time.perf_counter() - start < 5


def test_statistics_take_lists_and_refuse_a_string_beta():
    stat = af.Energy()
    assert np.isclose(stat(X.tolist(), 1.0), stat(X, 1.0))
    with pytest.raises(ValueError, match="beta: expected a real scalar"):
        stat(X, "1")


def test_corrupt_config_names_the_file(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"source: could not read the model config .*config\.json"):
        pretrained.load(tmp_path)


def test_layer_distances_name_sim_and_real_before_compiling():
    with pytest.raises(ValueError, match=r"real \(rows of all layers\): tokens must lie"):
        pretrained.layer_distances(jr.key(0), X[None], 2 * X[None])
