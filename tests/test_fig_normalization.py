"""``attnflow figure normalization --quick`` (the survey's Fig. 4, arXiv:2512.01868 §6.2): it
writes its picture and data; one curve is recomputed by an independent NumPy loop of the
post-LN Transformer; the curves are ordered as the speed factors of eq. (7) say."""

import json

import jax.random as jr
import numpy as np
import pytest

from attnflow.cli import main
from attnflow.figures import normalization as fig

pytestmark = pytest.mark.slow  # one command-line run, ~15 s on two cores (six compilations)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    folder = tmp_path_factory.mktemp("figures")
    assert main(["figure", "normalization", "--quick", "--out", str(folder)]) == 0
    return folder


def test_quick_writes_picture_and_data(out):
    assert (out / "normalization.png").stat().st_size > 10_000
    record = json.loads((out / "normalization.json").read_text())
    params = fig.PRESETS["quick"]
    assert record["params"]["beta"] == pytest.approx(np.sqrt(params["d"]))
    with np.load(out / "normalization.npz") as data:
        layers = round(params["t1"] / params["step"])
        assert data["cosine"].shape == (6, params["realisations"], layers + 1)
        assert list(data["names"]) == list(fig.NAMES)
        np.testing.assert_allclose(data["t"][-1], params["t1"])
        assert np.all(np.abs(data["cosine"]) <= 1 + 1e-12)
        assert sorted(record["params"]["order"]) == sorted(fig.NAMES)


def test_post_ln_curve_is_the_numpy_transformer(out):
    """Realisation 0 of post-LN, x ← normalize(x + h softmax(β QX (KX)ᵀ) X), in NumPy."""
    params = fig.PRESETS["quick"]
    d, n, h = params["d"], params["n"], params["step"]
    Q, K, x = (
        np.asarray(a) for a in fig.draw(jr.split(jr.key(0), params["realisations"])[0], n, d)
    )
    beta = np.sqrt(d)
    curve = []
    for _ in range(round(params["t1"] / h) + 1):
        gram = x @ x.T
        curve.append((gram.sum() - n) / (n * (n - 1)))
        logits = beta * (x @ Q.T) @ (x @ K.T).T
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        x = x + h * a @ x
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    with np.load(out / "normalization.npz") as data:
        np.testing.assert_allclose(data["cosine"][0, 0], curve, atol=1e-12)


def test_curves_are_ordered_by_their_speed_factors(out):
    """At the last time, mean over realisations: post-LN (s = 1) ≥ Mix-LN (s = 1, then r) ≥
    pre-LN (s = r) ≥ sqrt-scaling (s = r√(t + 1)), and nGPT (s = |A| ≤ 1) ≥ post-LN."""
    with np.load(out / "normalization.npz") as data:
        final = dict(zip(data["names"], data["cosine"][:, :, -1].mean(axis=1), strict=True))
    chain = ["nGPT", "Post-LN", "Mix-LN", "Pre-LN", "sqrt-scaling"]
    values = [final[name] for name in chain]
    assert values == sorted(values, reverse=True), dict(zip(chain, values, strict=True))
