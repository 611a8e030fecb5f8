"""Issue 35's hostile inputs that the API walk (tests/test_api_walk.py) cannot reach by argument
name: methods, transformations, files, and the diagnoses of failed solves. Each test states the
independent fact it checks (a closed form, a timing bound, the file named)."""

import math
import re
import time

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.special

import attnflow as af
import attnflow.landscape as landscape
import attnflow.meanfield as meanfield
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


# ---------------------------------------------------------------------------------------------
# Issue 44: one generator per pattern of hostile calls to the survey and density tools. Each
# yields (label, call, pattern of the error): the call must raise ValueError or TypeError (or
# eqx's runtime error under jit) whose message starts with the argument's name, at once.


GRID = meanfield.CircleGrid(8)
UNIFORM = jnp.zeros(17).at[0].set(1.0)
SUBLAYER = af.AttentionSublayer(af.SelfAttention(1.0))


def _absurd_sizes():  # pattern 1 (and 10: refused before any work, so instantly)
    yield "CircleGrid modes", lambda: meanfield.CircleGrid(10**9), "modes: expected a request"
    yield "CircleGrid points", lambda: meanfield.CircleGrid(8, points=10**12), "points: expected"
    yield "SphereGrid degree", lambda: meanfield.SphereGrid(10**9), "degree: expected a request"
    yield "SphereGrid latitudes", lambda: meanfield.SphereGrid(4, latitudes=10**9), "latitudes:"
    yield "SphereGrid table", lambda: meanfield.SphereGrid(2000), "degree: expected a request"
    yield (
        "sample_density n",
        lambda: meanfield.sample_density(jr.key(0), GRID, UNIFORM, 10**8),
        "n: expected a request",
    )
    yield (
        "stationary κ grid",
        lambda: theory.stationary_order_parameter(jnp.full(10**6, 3.0)),
        "kappa: expected a request",
    )
    yield (
        "stationary d",
        lambda: theory.stationary_critical_kappa(1.0, 10**9, normalization="n"),
        "d: expected a request",
    )
    yield "branches d", lambda: theory.stationary_branches([1.0], d=10**12), "d: expected a req"
    yield (
        "sinkhorn iterations",
        lambda: af.sinkhorn_potentials(
            jnp.zeros((4, 4)), jnp.full(4, -math.log(4)), iterations=10**12, tolerance=None
        ),
        "iterations: expected a request",
    )


def _nan_in_grids():  # pattern 2
    nan = UNIFORM.at[3].set(jnp.nan)
    yield "to_values", lambda: GRID.to_values(nan), "coefficients: expected finite"
    yield "evaluate", lambda: GRID.evaluate(nan, af.normalize(X[:, :2])), "coefficients: exp"
    yield "velocity", lambda: GRID.velocity(nan, 1.0, "softmax"), "coefficients: expected fin"
    yield "kernel_multipliers", lambda: GRID.kernel_multipliers(jnp.nan), "beta: expected a f"
    yield "check_kernel", lambda: GRID.check_kernel(jnp.nan), "beta: expected a finite"
    yield "spectral_tail nan", lambda: meanfield.spectral_tail(GRID, nan), "coefficients: exp"
    yield "spectral_tail zero", lambda: meanfield.spectral_tail(GRID, 0 * UNIFORM), "coeffic"
    yield (
        "evaluate_by_quadrature",
        lambda: meanfield.evaluate_by_quadrature(GRID, nan, af.normalize(X[:, :2])),
        "coefficients: expected finite",
    )
    yield (
        "potential_by_quadrature",
        lambda: meanfield.interaction_potential_by_quadrature(GRID, nan, 1.0),
        "coefficients: expected finite",
    )
    sphere = meanfield.SphereGrid(4)
    yield "from_values shape", lambda: sphere.from_values(jnp.ones(10)), "values: expected"
    values = jnp.ones(GRID.points, jnp.complex128)
    yield "from_values complex", lambda: GRID.from_values(values), "values: expected real"
    yield "wrong length", lambda: meanfield.spectral_tail(GRID, jnp.ones(5)), "coefficients: e"


def _scheme_parameters():  # pattern 3
    for bad in ("1", True, jnp.inf, None):
        yield f"NGPT({bad!r})", lambda bad=bad: af.NGPT(bad), "rate: expected"
    for bad in (jnp.nan, -1.0):
        yield (
            f"traced MixLN({bad})",
            lambda bad=bad: eqx.filter_jit(lambda a: af.MixLN(a).layers(SUBLAYER, X, 2, 0.1))(
                jnp.asarray(bad)
            ),
            "switch_time: expected",
        )
    yield (
        "traced SqrtScaling offset",
        lambda: eqx.filter_jit(lambda a: af.SqrtScaling(a).layers(SUBLAYER, X, 2, 0.1))(
            jnp.asarray(-2.0)
        ),
        "offset: expected",
    )
    scheme = af.SqrtScaling()
    yield "SqrtScaling t0", lambda: scheme.layers(SUBLAYER, X, 2, 0.1, t0=-5.0), "t0: expected"
    yield "SqrtScaling step", lambda: scheme.layers(SUBLAYER, X, 3, -1.0), "step: expected"
    yield "SqrtScaling solve", lambda: scheme.solve(SUBLAYER, X, 1.0, t0=-5.0), "t0: expected"
    yield "SqrtScaling speed", lambda: scheme.speed_factor(-2.0, X, X), "t: expected"
    yield (
        "normalized_equiangular_rhs",
        lambda: theory.normalized_equiangular_rhs(
            -2.0, 0.5, 1.0, scheme="sqrt-scaling", beta=1.0, n=4
        ),
        "t: expected",
    )
    yield "speed_factor rows", lambda: af.PreLN().speed_factor(0.0, X, X[:1]), "output: expect"
    yield "speed_factor dim", lambda: af.PreLN().speed_factor(0.0, X, X[:, :2]), "output: exp"


def _silent_values():  # pattern 5 (the refusals; the values are tested below)
    yield (
        "unresolved quadrature",
        lambda: meanfield.interaction_potential_by_quadrature(GRID, UNIFORM, 1e4),
        "beta: expected a kernel",
    )
    yield "long_context_beta", lambda: theory.long_context_beta(1e308, 10**10), "gamma: expect"
    yield (
        "pairing T_pair underflow",
        lambda: models.pairing_phase(X, jnp.full(4, 0.25), 1e4, normalization="n"),
        "beta: expected a β whose predicted merge time",
    )
    yield (  # pattern 11: an equilibrium, refused before a solve to an infinite horizon
        "pairing antipodal",
        lambda: models.pairing_phase(
            jnp.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]), jnp.array([0.5, 0.5]), 4.0
        ),
        "centers: expected a closest pair that is not antipodal",
    )
    yield (
        "potential outside [-1, 1]",
        lambda: theory.stationary_state(4.0).potential(2.0),
        "u: expected",
    )


def _domains():  # pattern 7
    yield (
        "cone_collapse_bound t < t0",
        lambda: theory.cone_collapse_bound(0.0, beta=1.0, n=4, t0=1.0),
        "t: expected",
    )
    yield "num_pieces", lambda: af.FieldFamily(period=1.0).num_pieces(-1.0), "t_end: expected"
    yield (
        "homogenized β < 0",
        lambda: theory.homogenized_antipodal_rate(-1.0, 4),
        "beta: expected",
    )


def _regressions():  # pattern 8 (valid calls that were refused) are tested below; 9: shapes
    yield "n = 10**400", lambda: theory.equiangular_time(0.9, beta=0.5, n=10**400), "n: expect"
    yield "empty κ grid", lambda: theory.stationary_branches([]), "kappa: expected at least"
    yield (
        "traced delta",
        lambda: jax.jit(lambda d: theory.equiangular_time(0.5, beta=1.0, n=4, delta=d))(0.01),
        "delta: expected a concrete number",
    )
    yield (
        "traced resolution_tol",
        lambda: jax.jit(
            lambda tol: meanfield.solve_density(GRID, UNIFORM, 1.0, beta=1.0, resolution_tol=tol)
        )(1e-6),
        "resolution_tol: expected a concrete number",
    )


PATTERNS = {
    "1 absurd sizes": _absurd_sizes,
    "2 NaN in the density grids": _nan_in_grids,
    "3 scheme parameters": _scheme_parameters,
    "5 silent values": _silent_values,
    "7 domains": _domains,
    "9 shapes": _regressions,
}
CASES = [(p, label, call, match) for p, gen in PATTERNS.items() for label, call, match in gen()]


@pytest.mark.parametrize(
    "pattern, label, call, match", CASES, ids=[f"{c[0][:1]}-{c[1]}" for c in CASES]
)
def test_issue_44_hostile_calls_are_refused_at_once(pattern, label, call, match):
    start = time.perf_counter()
    with pytest.raises(
        (ValueError, TypeError, eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)
    ) as info:
        call()
    assert re.search(match, str(info.value)), str(info.value)[:300]
    # Sizes are refused before any work (pattern 10: instantly, whatever the load).
    if pattern.startswith("1"):
        assert time.perf_counter() - start < 2.0


def test_circle_tools_are_finite_where_their_values_are():  # pattern 4, against mpmath
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    theta = [0.0, 2 * math.pi / 3, 4 * math.pi / 3]
    beta = -800.0
    exact = sum(mpmath.exp(beta * mpmath.cos(a - b)) for a in theta for b in theta) / (2 * beta * 9)
    energy = float(landscape.circle_energy(jnp.array(theta), beta))
    assert energy == pytest.approx(float(exact), rel=1e-12)  # −2.1756e170, was −inf
    hessian = np.asarray(landscape.torus_hessian(jnp.array(theta), beta))

    def g(t):
        return mpmath.exp(beta * mpmath.cos(t)) * (mpmath.cos(t) - beta * mpmath.sin(t) ** 2)

    off = float(g(theta[0] - theta[1])) / 9
    assert hessian[0, 1] == pytest.approx(off, rel=1e-12) and np.all(np.isfinite(hessian))
    for b in (800.0, -800.0):  # USA velocities of two tokens 0.4 apart: finite, against mpmath
        pair = [0.0, 0.4]
        v = np.asarray(landscape.circle_field(jnp.array(pair), b, "n"))
        exact = -mpmath.exp(b * mpmath.cos(-0.4)) * mpmath.sin(-0.4) / 2
        if abs(exact) < 1e300:
            assert v[0] == pytest.approx(float(exact), rel=1e-12)
        assert np.all(~np.isnan(v))


def test_issue_44_regressions_are_valid_calls_again():  # pattern 8
    # jit(solve_sde) with a traced σ and with a traced dt (was TracerBoolConversionError)
    out = jax.jit(
        lambda s: (
            af.solve_sde(
                af.SelfAttention(1.0),
                X,
                0.2,
                sigma=s,
                key=jr.key(0),
                dt=0.1,
                form="ito",
                brownian="fast",
            ).ys
        )
    )(0.1)
    assert out.shape == (1, 4, 3) and np.all(np.isfinite(out))
    # one piece needs nothing stacked: the field itself (was "no array leaves")
    one = af.PiecewiseConstant.from_fields([af.SelfAttention(1.0)], [])
    np.testing.assert_array_equal(one(0.0, X), af.SelfAttention(1.0)(0.0, X))
    # n is a number in the formula: κ(β, n) ≈ e^{β²}/n while n ≫ e^{β²} (was refused)
    kappa = theory.attention_concentration(0.5, 10**9)
    assert kappa * 10**9 == pytest.approx(math.exp(0.25), rel=1e-6)
    # density_energy takes β < 0 as InteractionEnergy does: uniform ρ on S¹, E = I₀(β)/(2β)
    energy = float(meanfield.density_energy(GRID, UNIFORM, -2.0))
    assert energy == pytest.approx(scipy.special.iv(0, -2.0) / (2 * -2.0), rel=1e-12)
