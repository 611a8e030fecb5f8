"""Figures fig3 and fig5 through the CLI at --quick size, and their notebooks at test size."""

import json
import pathlib
import runpy

import numpy as np
import pytest
from scipy.integrate import quad
from shared_runs import computed_once, reused

from attnflow.cli import main
from attnflow.figures import fig3, fig5

# Every test reads the files of one command-line run of the figures (the `out` fixture).
pytestmark = pytest.mark.slow

NOTEBOOKS = pathlib.Path(__file__).parent.parent / "notebooks"


@pytest.fixture(scope="module")
def shared():
    """The CLI run and the notebooks compute each figure once (same preset and seed)."""
    with computed_once(fig3, fig5) as calls:
        yield calls


@pytest.fixture(scope="module")
def out(tmp_path_factory, shared):
    folder = tmp_path_factory.mktemp("figures")
    for name in ("fig3", "fig5"):
        assert main(["figure", name, "--quick", "--out", str(folder)]) == 0
    return folder


def load(out, name):
    with np.load(out / f"{name}.npz") as data:
        return {k: data[k] for k in data.files}, json.loads((out / f"{name}.json").read_text())


@pytest.mark.parametrize("name", ["fig3", "fig5"])
def test_cli_writes_files(out, name):
    for suffix in ("png", "npz", "json"):
        assert (out / f"{name}.{suffix}").stat().st_size > 0
    data, record = load(out, name)
    assert record["figure"] == name and record["params"]["seed"] == 0
    assert record["timings_s"]["compute"] > 0 and record["versions"]["attnflow"]
    P = data["P"]
    assert P.shape == (
        len(record["params"].get("ds", record["params"].get("panels"))),
        record["params"]["n_betas"],
        record["params"]["n_ts"],
    )
    assert np.all((P >= 0) & (P <= 1))
    # Common random numbers: every β starts from the same tokens; for d ≥ 8 no pair starts
    # within δ = 1e-3 (on the circle a pair does with probability arccos(1 − δ)/π ≈ 1.4%).
    assert np.all(P[:, :, 0] == P[:, :1, 0])
    assert np.all(P[-1, :, 0] == 0)


def test_fig3_curve_and_small_beta_clustering(out):
    data, record = load(out, "fig3")
    n, delta = record["params"]["n"], record["params"]["delta"]

    def t_star(beta):  # (6.9) integrated by quadrature, independent of attnflow.theory
        rhs = lambda g: 2 * (1 - g) * (1 + (n - 1) * g) / (np.exp(beta * (1 - g)) + n - 1)
        return quad(lambda g: 1 / rhs(g), 0, 1 - delta, epsrel=1e-12)[0]

    for k in (0, 150, 399):
        assert abs(data["curve_t"][k] - t_star(data["curve_beta"][k])) < 1e-8
    # d = 16 ≥ n: the smallest β is fully clustered by t = 30, as the curve says.
    assert data["d"].tolist() == [2, 16] and data["P"][1, 0, -1] == 1.0


def test_fig3_notebook(out, shared, monkeypatch):
    del out  # after the CLI: the notebook's fig3.compute is the CLI's (`shared`)
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    before = reused(shared)
    nb = runpy.run_path(str(NOTEBOOKS / "fig3.py"), run_name="__main__")
    assert reused(shared) == before + 1
    n, delta, beta = nb["n"], nb["params"]["delta"], nb["beta"]
    # The exact t* it prints against (6.9) integrated by quadrature; the authors' Euler
    # scheme (step 0.1) reaches 1 − δ late, by less than 15%.
    rhs = lambda g: 2 * (1 - g) * (1 + (n - 1) * g) / (np.exp(beta * (1 - g)) + n - 1)
    t_star = quad(lambda g: 1 / rhs(g), 0, 1 - delta, epsrel=1e-12)[0]
    assert abs(nb["exact"] - t_star) < 1e-8
    assert t_star < nb["t"] < 1.15 * t_star
    # Its d = 4096 diagram: every β clustered by the last time, none at t = 0.
    assert np.all(nb["P"][:, -1] == 1.0) and np.all(nb["P"][:, 0] == 0.0)


def test_fig5_notebook(out, shared, monkeypatch):
    del out  # after the CLI: the notebook's fig5.compute is the CLI's (`shared`)
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    before = reused(shared)
    nb = runpy.run_path(str(NOTEBOOKS / "fig5.py"), run_name="__main__")
    assert reused(shared) == before + 1
    P = nb["data"]["P"]
    assert P.shape == (4, nb["params"]["n_betas"], nb["params"]["n_ts"])
    # Probabilities with a denominator R n (n − 1): multiples of 1/48 at the quick size.
    R, n = nb["params"]["realizations"], nb["params"]["n"]
    assert np.allclose(P * R * n * (n - 1), np.round(P * R * n * (n - 1)), atol=1e-9)
    # Panel (a) spectrum: the Ginibre V of d = 128 has spectral radius ≈ 1 (circular law).
    assert 0.8 < np.abs(nb["ginibre_v"]).max() < 1.2
