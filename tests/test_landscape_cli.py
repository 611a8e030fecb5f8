"""The landscape survey: deduplication invariants, a survey on S², the CLI and the notebook.

All runs use the CLI's ``--quick`` seed counts so that the compiled searches are shared.
"""

import csv
import json
import os
import pathlib
import runpy

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import attnflow as af
from attnflow.cli import main
from attnflow.commands.landscape import QUICK

SEEDS = dict(
    num_random=QUICK["random"], num_flow=QUICK["flow"], flow_times=tuple(QUICK["flow_times"])
)


def test_signature_is_invariant_under_rotation_reflection_and_relabelling():
    x = af.random_tokens(jr.key(0), 6, 3)
    q, _ = np.linalg.qr(np.asarray(jr.normal(jr.key(1), (3, 3))))  # Haar-ish O(3), maybe improper
    moved = np.asarray(x)[np.random.default_rng(0).permutation(6)] @ q.T
    np.testing.assert_allclose(
        af.landscape.configuration_signature(moved),
        af.landscape.configuration_signature(x),
        atol=1e-13,
    )
    other = af.normalize(x + 0.01 * jr.normal(jr.key(2), x.shape))
    assert (
        np.abs(
            af.landscape.configuration_signature(other) - af.landscape.configuration_signature(x)
        ).max()
        > 1e-4
    )


def test_symmetric_configurations_are_critical_when_balanced():
    energy = af.InteractionEnergy(2.0)
    usa = af.SelfAttention(2.0, normalization="n")
    for d in (2, 3):
        configs = af.landscape.symmetric_configurations(6, d)
        for name in ("synchronised", "polygon", "antipodal 1|5", "antipodal 3|3", "clusters 3"):
            x = jnp.asarray(configs[name])
            assert float(jnp.abs(usa(0.0, x)).max()) < 1e-12, name
    configs = af.landscape.symmetric_configurations(4, 3)
    simplex = configs["simplex"]
    np.testing.assert_allclose(simplex @ simplex.T, (4 * np.eye(4) - 1) / 3, atol=1e-14)
    assert af.classify_critical_point(energy, jnp.asarray(simplex)).kind == "local minimum"
    octahedron = af.landscape.symmetric_configurations(6, 3)["cross-polytope"]
    np.testing.assert_allclose(
        np.sort((octahedron @ octahedron.T).ravel()), np.repeat([-1.0, 0.0, 1.0], [6, 24, 6])
    )


def test_survey_on_the_two_sphere():
    survey = af.landscape.survey_critical_points(4, 3, 2.0, key=jr.key(3), **SEEDS)
    assert survey.num_converged >= survey.num_seeds - 2
    kinds = [p.kind for p in survey.points]
    # exactly one synchronised point (the global maximum) and it is the only maximum
    assert [p.synchronised for p in survey.points].count(True) == 1
    assert survey.points[0].synchronised and survey.points[0].kind == "local maximum"
    assert kinds.count("local maximum") == 1 and not survey.counterexample
    # the regular tetrahedron is the minimum of E_β on S² (Cohn–Kumar; MATH.md §8)
    minima = [p for p in survey.points if p.kind == "local minimum"]
    assert len(minima) == 1
    np.testing.assert_allclose(minima[0].x @ minima[0].x.T, (4 * np.eye(4) - 1) / 3, atol=1e-8)
    # every non-synchronised point is escaped by the ascent flow
    assert all(p.is_paper_strict_saddle for p in survey.points if not p.synchronised)
    # distinct points really are distinct, and each is critical for E_β (weights 1/n)
    signatures = np.array([af.landscape.configuration_signature(p.x) for p in survey.points])
    gaps = np.abs(signatures[:, None] - signatures[None]).max(axis=-1)
    assert (gaps + np.eye(len(gaps)) > 1e-6).all()
    assert max(p.grad_norm for p in survey.points) < 1e-8


def test_landscape_cli_quick(tmp_path, capsys):
    assert main(["landscape", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "counterexample to Problem 3) found: no" in out
    summary = json.loads((tmp_path / "landscape.json").read_text())
    assert summary["counterexample_found"] is False
    assert [(s["n"], s["beta"]) for s in summary["systems"]] == [
        (3, 1.0),
        (3, 6.0),
        (4, 1.0),
        (4, 6.0),
    ]
    for s in summary["systems"]:
        assert s["sync_maxima"] == 1 and s["local maximum"] == 1
        assert s["paper_strict_saddles"] == s["distinct"] - 1
    with open(tmp_path / "landscape.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(s["distinct"] for s in summary["systems"])
    # on the circle the rows give the angles; the n-gon (n = 3, 4) appears as a local minimum
    ngons = [r for r in rows if r["kind"] == "local minimum"]
    assert len(ngons) == 4
    for r in ngons:
        angles = np.array(json.loads(r["angles_or_tokens"]))
        gaps = np.diff(np.concatenate([angles, [angles[0] + 2 * np.pi]]))
        np.testing.assert_allclose(gaps, 2 * np.pi / int(r["n"]), atol=1e-8)


def test_survey_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n: expected an integer >= 2"):
        af.landscape.survey_critical_points(1, 2, 1.0, key=jr.key(0))
    with pytest.raises(ValueError, match="beta: expected a finite value ≠ 0"):
        af.landscape.survey_critical_points(3, 2, 0.0, key=jr.key(0))
    with pytest.raises(ValueError, match="d: expected an integer >= 2"):
        af.landscape.symmetric_configurations(3, 1)


def test_landscape_notebook_runs_quick(monkeypatch):
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    path = pathlib.Path(__file__).parents[1] / "notebooks" / "landscape.py"
    namespace = runpy.run_path(os.fspath(path), run_name="__main__")
    assert namespace["symmetric_all_escape"] and not namespace["counterexample_found"]
