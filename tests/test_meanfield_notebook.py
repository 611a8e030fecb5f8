"""The mean-field notebook at quick size (it runs the figure module's computation)."""

import os
import pathlib
import runpy

import numpy as np

import attnflow.theory as th


def test_meanfield_notebook_runs_at_quick_size(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    monkeypatch.delenv("ATTNFLOW_OUT", raising=False)
    path = pathlib.Path(__file__).parent.parent / "notebooks" / "meanfield.py"
    ns = runpy.run_path(os.fspath(path), run_name="__main__")
    # Independent of the notebook's own fit: the theory's rates at β = 9 from scipy's Bessel
    # functions, and the fitted rates within 1e-3 of the largest.
    import scipy.special as sp

    k = np.arange(1, 17)
    expected = k**2 * sp.ive(k, 9.0) / (9.0 * sp.ive(0, 9.0))
    np.testing.assert_allclose(ns["fitted"], expected, atol=1e-3 * expected.max())
    data = ns["data"]
    assert data["theory_bumps"] == th.metastable_cluster_count(9.0) == 4
    assert data["pde_bumps"] in (4, 5)
    assert 0 < data["t_plateau"] < 40
