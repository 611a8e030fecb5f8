"""``attnflow figure normalization`` (the survey's Fig. 4, arXiv:2512.01868 §6.2): it writes its
picture and data with the model stated; one curve is recomputed by an independent NumPy loop of
the post-LN Transformer; the survey's model (Q, K, V i.i.d. N(0, 1/d), d = 512, n = 64) is held
against the curves digitised off the published figure."""

import json

import jax
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
from attnflow.cli import main
from attnflow.figures import _survey_fig4 as survey, normalization as fig

pytestmark = pytest.mark.slow  # one command-line run and one d = 512 run, ~30 s on two cores


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    folder = tmp_path_factory.mktemp("figures")
    assert main(["figure", "normalization", "--quick", "--compare", "--out", str(folder)]) == 0
    return folder


def test_quick_writes_picture_and_data_with_its_model(out):
    assert (out / "normalization.png").stat().st_size > 10_000
    record = json.loads((out / "normalization.json").read_text())
    params = fig.PRESETS["quick"]
    assert record["params"]["beta"] == pytest.approx(np.sqrt(params["d"]))
    model = record["params"]["model"]
    # Issue 43 item 5: the law of Q, K, V, n, d, β and h are stated, in the JSON and the npz.
    for part in ("Q, K, V i.i.d. N(0, 1/d)", "d = 16", "n = 8", "β = √d = 4", "h = 0.1"):
        assert part in model, (part, model)
    with np.load(out / "normalization.npz") as data:
        assert str(data["model"]) == model
        layers = round(params["t1"] / params["step"])
        assert data["cosine"].shape == (6, params["realisations"], layers + 1)
        assert list(data["names"]) == list(fig.NAMES)
        np.testing.assert_allclose(data["t"][-1], params["t1"])
        assert np.all(np.abs(data["cosine"]) <= 1 + 1e-12)
        assert sorted(record["params"]["order"]) == sorted(fig.NAMES)
    # --compare: the deviation from the digitised survey at its times within the run (t ≤ 4).
    assert sorted(record["params"]["minus_survey"]) == sorted(fig.NAMES)
    assert list(record["params"]["minus_survey"]["nGPT"]) == [
        str(t) for t in survey.TIMES if t <= params["t1"]
    ]


def test_options_refused_for_other_figures(tmp_path, capsys):
    assert main(["figure", "fig3", "--compare", "--out", str(tmp_path / "x")]) == 2
    assert "normalization figure only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="weights: expected one of"):
        fig.draw(jr.key(0), 3, 4, weights="kaiming")


def test_post_ln_curve_is_the_numpy_transformer(out):
    """Realisation 0 of post-LN, x ← normalize(x + h softmax(β QX (KX)ᵀ) X Vᵀ), in NumPy."""
    params = fig.PRESETS["quick"]
    d, n, h = params["d"], params["n"], params["step"]
    key = jr.split(jr.key(0), params["realisations"])[0]
    Q, K, V, x = (np.asarray(a) for a in fig.draw(key, n, d))
    beta = np.sqrt(d)
    curve = []
    for _ in range(round(params["t1"] / h) + 1):
        gram = x @ x.T
        curve.append((gram.sum() - n) / (n * (n - 1)))
        logits = beta * (x @ Q.T) @ (x @ K.T).T
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        x = x + h * a @ x @ V.T
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    with np.load(out / "normalization.npz") as data:
        np.testing.assert_allclose(data["cosine"][0, 0], curve, atol=1e-12)


def test_weight_laws():
    """The survey's law: N(0, 1/d) entries for Q, K, V (sample variance of 3 × 64² entries);
    the former model (``identity-value``) keeps its Q, K and tokens and has V = I."""
    Q, K, V, x = fig.draw(jr.key(3), 5, 64)
    entries = np.concatenate([np.ravel(Q), np.ravel(K), np.ravel(V)])
    assert np.var(entries) * 64 == pytest.approx(1.0, abs=0.05)  # 12288 entries: sd 0.013
    Q0, K0, V0, x0 = fig.draw(jr.key(3), 5, 64, weights="identity-value")
    assert V0 is None
    kq, kk, kx = jr.split(jr.key(3), 3)
    np.testing.assert_array_equal(Q0, jr.normal(kq, (64, 64)) / 8.0)
    np.testing.assert_array_equal(K0, jr.normal(kk, (64, 64)) / 8.0)


# The survey's scale (d = 512, n = 64, T = 10: Mix-LN switches at 2.5) at a reduced cost:
# 2 realisations and step 0.1 (the full figure: 32 and 0.05).
SURVEY_SIZE = {"d": 512, "n": 64, "realisations": 2, "t1": 10.0, "step": 0.1}
# The times of issue 41 and the stated tolerance on the mean. The full figure's means lie within
# 0.09 of the survey's (Pre-LN at t = 4; benchmarks/RESULTS.md), this reduced run within 0.08;
# the laws the survey rules out miss by 0.24 or more (V = I: Post-LN +0.29 at t = 3;
# N(0, 2/d): nGPT -0.24 at t = 1; U(±1/√d): Post-LN -0.41 at t = 3).
TIMES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
TOLERANCE = 0.1


@pytest.fixture(scope="module")
def survey_size():
    data = fig.compute(SURVEY_SIZE, seed=0, progress=False)
    return fig.survey_deviation(data)


def test_survey_model_follows_the_published_means(survey_size):
    """Post-LN, Pre-LN, Mix-LN, Peri-LN and nGPT at the eight times, and sqrt-scaling up to
    t = 4, lie within TOLERANCE of the digitised survey means."""
    for name in fig.NAMES:
        for t in TIMES:
            if name == "sqrt-scaling" and t > 4:
                continue
            deviation = survey_size[name][t]
            assert abs(deviation) < TOLERANCE, (name, t, deviation)


def test_sqrt_scaling_falls_below_the_survey_after_t_4(survey_size):
    """The known gap (docs/survey.md §6.2): with 1/√(t + 1) sqrt-scaling is a time change of
    pre-LN, τ = 2(√(t + 1) − 1), too slow after t ≈ 4 (the survey's needs τ ≈ 0.65 t)."""
    assert survey_size["sqrt-scaling"][6.0] < -0.1
    assert survey_size["sqrt-scaling"][10.0] < -0.1


def _numpy_unit_step(Q, K, V, x, peri: bool, layers: int):
    """Post-LN x ← N(x + A(x)) or Peri-LN z ← z + N(A(N(z))) with h = 1, A(x)_i = Σ_j a_ij V x_j,
    a = softmax(β ⟨Q x_i, K x_j⟩), β = √d, in NumPy: the mean cosine at layers 0..layers."""
    n, d = x.shape
    beta, z, curve = np.sqrt(d), x, []
    for _ in range(layers + 1):
        theta = z / np.linalg.norm(z, axis=1, keepdims=True)
        curve.append(((theta @ theta.T).sum() - n) / (n * (n - 1)))
        logits = beta * (theta @ Q.T) @ (theta @ K.T).T
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        out = (a / a.sum(axis=1, keepdims=True)) @ theta @ V.T
        if peri:
            z = z + out / np.linalg.norm(out, axis=1, keepdims=True)
        else:
            z = (z + out) / np.linalg.norm(z + out, axis=1, keepdims=True)
    return np.array(curve)


def test_unit_step_reading_of_h1_misses_the_survey():
    """The file name's "h1" read as the step h = 1 (T = 10 layers, plotted at the layer index;
    docs/survey.md §6.2): with the survey's law (Q, K, V N(0, 1/d), β = √d, d = 512, n = 64)
    Post-LN and Peri-LN lie far below the published means (32 realisations in
    benchmarks/fig4_h1.py: 0.45 against 0.89 at t = 4, 0.47 against 0.75 at t = 2); attnflow's
    layer maps at h = 1 are an independent NumPy transcription's to 1e-10 (2 realisations; over 32,
    one realisation ranges over 0.36–0.54 at t = 4 and 0.43–0.51 at t = 2)."""
    keys = jr.split(jr.key(0), 2)
    survey_at = dict(zip(survey.TIMES, zip(*survey.MEANS.values(), strict=True), strict=True))
    names = list(survey.MEANS)
    for scheme, peri, layer in ((af.PostLN(), False, 4), (af.PeriLN(), True, 2)):
        name = "Peri-LN" if peri else "Post-LN"

        @jax.jit
        def run(Q, K, V, x, scheme=scheme):
            sublayer = af.AttentionSublayer(af.SelfAttention(np.sqrt(512.0), Q, K, V))
            return fig.mean_cosine(scheme.layers(sublayer, x, 10, 1.0))

        ours, numpy = [], []
        for key in keys:
            Q, K, V, x = fig.draw(key, 64, 512)
            ours.append(np.asarray(run(Q, K, V, x))[: layer + 1])
            arrays = (np.asarray(a) for a in (Q, K, V, x))
            numpy.append(_numpy_unit_step(*arrays, peri=peri, layers=layer))
        np.testing.assert_allclose(ours, numpy, atol=1e-10)
        mean = np.mean(numpy, axis=0)[layer]
        published = survey_at[float(layer)][names.index(name)]
        assert mean < published - 0.2, (name, layer, mean, published)
