"""The phase-families figure through the CLI at --quick size, and its notebook at test size."""

import json
import pathlib
import runpy

import numpy as np

from attnflow.cli import main

NOTEBOOKS = pathlib.Path(__file__).parent.parent / "notebooks"


def test_notebook_and_cli(tmp_path, monkeypatch):
    # The notebook first: the CLI run then reuses its compilations (same shapes, same process).
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    result = runpy.run_path(str(NOTEBOOKS / "phase_families.py"), run_name="__main__")
    assert result["P"].shape == (3, 7)

    assert main(["figure", "phase-families", "--quick", "--out", str(tmp_path)]) == 0
    for suffix in ("png", "npz", "json"):
        assert (tmp_path / f"phase-families.{suffix}").stat().st_size > 0
    record = json.loads((tmp_path / "phase-families.json").read_text())
    with np.load(tmp_path / "phase-families.npz") as data:
        values = data["values"]
    n = record["params"]["n"]
    assert values.shape == (4, record["params"]["n_betas"], record["params"]["n_ts"])
    # Same seed as the notebook: the same numbers.
    np.testing.assert_array_equal(values[0], result["P"])
    # The clustered fraction (reduced engine) is 1 exactly where every system is one cluster
    # (general engine); P lies in [0, 1] on the three P panels; n clusters at t = 0.
    P, clusters = values[0], values[3]
    assert np.array_equal(P == 1, clusters == 1) and (P == 1).any()
    assert np.all((values[:3] >= 0) & (values[:3] <= 1)) and np.all(clusters[:, 0] == n)
