"""Figures fig4, fig6, staircase and movie: each runs through the CLI at --quick size and writes
its files; their numbers are checked against independent computations (autodiff, scipy root
finding and ODE solves, scipy graph components, attnflow.solve in R^{n×2}); their notebooks run."""

import csv
import json
import pathlib
import runpy

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq
from scipy.sparse.csgraph import connected_components
from test_notebook_results import (
    check_fig4_notebook,
    check_movie_notebook,
    check_staircase_notebook,
)

import attnflow as af
from attnflow import plot
from attnflow.cli import main

# Every test reads the files of one command-line run of the figures (the `out` fixture).
pytestmark = pytest.mark.slow

NAMES = ("fig4", "fig6", "staircase", "movie")
NOTEBOOKS = pathlib.Path(__file__).parent.parent / "notebooks"
NOTEBOOK_CHECKS = {
    "fig4": check_fig4_notebook,
    "staircase": check_staircase_notebook,
    "movie": check_movie_notebook,
}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    folder = tmp_path_factory.mktemp("figures")
    for name in NAMES:
        assert main(["figure", name, "--quick", "--out", str(folder)]) == 0
    return folder


def load(out, name):
    with np.load(out / f"{name}.npz") as data:
        return {k: data[k] for k in data.files}, json.loads((out / f"{name}.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_cli_writes_files_without_nan(out, name):
    for suffix in ("png", "npz", "json"):
        assert (out / f"{name}.{suffix}").stat().st_size > 0
    data, record = load(out, name)
    assert record["figure"] == name and record["versions"]["attnflow"]
    for key, value in data.items():
        if value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), f"{name}.npz[{key}] has non-finite values"


def test_fig6_kernel_against_hessian_and_root_finding(out):
    data, record = load(out, "fig6")
    assert data["beta"].tolist() == [2.0, 6.0]

    def energy(u, beta):  # (7.4) for n = 2 as a function of u = θ_1 − θ_2
        return (2 * np.exp(beta) + 2 * np.exp(beta * np.cos(u))) / (2 * beta * 4)

    # ∂²E/∂θ_1∂θ_2 = −E''(u) = g(u)/n², by a fourth-order central difference.
    h = 1e-3
    taus = data["tau"]
    for k, beta in enumerate(data["beta"]):
        second = (
            -energy(taus + 2 * h, beta)
            + 16 * energy(taus + h, beta)
            - 30 * energy(taus, beta)
            + 16 * energy(taus - h, beta)
            - energy(taus - 2 * h, beta)
        ) / (12 * h**2)
        np.testing.assert_allclose(data["g"][k], -4 * second, rtol=1e-6, atol=1e-6 * np.exp(beta))
        root = brentq(lambda t, b=beta: np.cos(t) - b * np.sin(t) ** 2, 0.0, np.pi / 2, xtol=1e-15)
        assert data["tau_star"][k] == pytest.approx(root, abs=1e-12)
        inside = np.abs(data["tau"]) < root - 1e-9
        outside = np.abs(data["tau"]) > root + 1e-9
        assert np.all(data["g"][k, inside] > 0) and np.all(data["g"][k, outside] < 0)
    assert record["params"]["tau_star"] == pytest.approx(data["tau_star"].tolist())


def test_fig4_counts_and_tokens(out):
    data, record = load(out, "fig4")
    params = record["params"]
    betas, seeds, n = len(params["betas"]), params["seeds"], params["n"]
    assert data["counts"].shape == (betas, seeds, len(data["ts"]))
    assert data["tokens"].shape == (betas, len(data["ts"]), n, 2)
    np.testing.assert_allclose(np.linalg.norm(data["tokens"], axis=-1), 1.0, atol=1e-9)
    for b in range(betas):
        for k in range(len(data["ts"])):
            x = data["tokens"][b, k]
            count, _ = connected_components(x @ x.T >= 1 - params["delta"], directed=False)
            assert data["counts"][b, 0, k] == count
    assert np.all((data["counts"] >= 1) & (data["counts"] <= n))
    # Common random numbers: both β start from the same tokens.
    np.testing.assert_array_equal(data["tokens"][0, 0], data["tokens"][1, 0])
    summary = record["params"]["final_cluster_counts"]
    assert sum(sum(v.values()) for v in summary.values()) == betas * seeds


def point_cluster_energy(x, labels, beta):
    """φ of the configuration with each cluster collapsed to its mean direction."""
    roots = np.unique(labels)
    masses = np.array([np.mean(labels == r) for r in roots])
    centres = np.array([x[labels == r].mean(0) for r in roots])
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    s = np.clip(centres @ centres.T, -1, 1)
    return masses @ np.exp(beta * (s - 1)) @ masses, np.sum(masses**2)


def test_staircase_plateaux_merges_and_no_nan(out):
    data, record = load(out, "staircase")
    params = record["params"]
    beta, n = params["beta"], params["n"]
    phi, counts, labels = data["energy"], data["counts"], data["labels"]
    # After the last merge: one cluster, φ = 1, tokens still exactly on the circle.
    assert counts[-1] == 1 and record["params"]["final_clusters"] == 1
    assert phi[-1] == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(np.linalg.norm(data["tokens"], axis=-1), 1.0, atol=1e-12)
    # USA is a gradient ascent: φ never decreases.
    assert np.all(np.diff(phi) > -1e-10)
    # Plateaux: the last save of every run of constant count lasting a decade or more.
    ts = data["ts"]
    ends = np.flatnonzero(np.diff(counts) != 0)
    starts = np.concatenate([[1], ends[:-1] + 1])
    checked = 0
    for s, e in zip(starts, ends, strict=True):
        if ts[e] < 10 * ts[s]:
            continue
        x = data["tokens"][e]
        with_cross, levels = point_cluster_energy(x, labels[e], beta)
        assert data["levels"][e] == pytest.approx(levels, abs=1e-12)
        assert phi[e] == pytest.approx(with_cross, abs=1e-6)
        if counts[e] <= 3:
            assert abs(phi[e] - levels) < 1e-3
        checked += 1
    assert checked >= 2
    # The merge log: JSON and CSV agree, and merges account for every lost cluster.
    events = json.loads((out / "staircase_merges.json").read_text())
    with (out / "staircase_merges.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(events) == record["params"]["merges"] > 0
    assert sum(len(e["merged_masses"]) - 1 for e in events) == counts[0] - counts[-1]
    for e, row in zip(events, rows, strict=True):
        assert float(row["t_after"]) == pytest.approx(e["t_after"])
        assert e["new_mass"] == pytest.approx(sum(e["merged_masses"]))
        assert e["t_before"] < e["t_after"] and e["clusters_after"] < e["clusters_before"]
    assert n * events[-1]["new_mass"] == n


def test_staircase_agrees_with_attnflow_solve(out):
    # The angle ODE with Kvaerno5 against (USA) in R^{n×2} with attnflow.solve (Tsit5) from the
    # same tokens, over the collapse and the first merges.
    data, record = load(out, "staircase")
    beta = record["params"]["beta"]
    ts = data["ts"][data["ts"] <= 0.01]
    sol = af.solve(
        af.SelfAttention(beta, normalization="n"),
        jnp.asarray(data["tokens"][0]),
        ts[-1],
        ts=jnp.asarray(ts),
        rtol=1e-9,
        atol=1e-11,
        max_steps=20000,
    )
    np.testing.assert_allclose(sol.ys, data["tokens"][: len(ts)], atol=5e-5)


def test_staircase_last_merge_is_the_two_body_problem(out):
    # Two point clusters of masses summing to 1 at gap u: (7.1) reduces to
    # u' = −e^{β cos u} sin u exactly. Solve it with scipy from the middle of the last plateau.
    data, record = load(out, "staircase")
    beta = record["params"]["beta"]
    counts, ts = data["counts"], data["ts"]
    two = np.flatnonzero(counts == 2)
    k0 = two[len(two) // 2]

    def gap(k):
        labels = data["labels"][k]
        roots = np.unique(labels)
        if len(roots) == 1:
            return np.ptp(np.angle(np.exp(1j * (data["theta"][k] - data["theta"][k][0]))))
        angles = [np.angle(np.mean(np.exp(1j * data["theta"][k][labels == r]))) for r in roots]
        return abs(np.angle(np.exp(1j * (angles[1] - angles[0]))))

    # The window ends a few saves after the merge (the tail is stiff and uninformative).
    k1 = min(len(ts) - 1, np.flatnonzero(counts == 1)[0] + 5)
    later = ts[k0 : k1 + 1]
    model = solve_ivp(
        lambda t, u: -np.exp(beta * np.cos(u)) * np.sin(u),
        (later[0], later[-1]),
        [gap(k0)],
        method="Radau",
        t_eval=later,
        rtol=1e-11,
        atol=1e-14,
    )
    particles = np.array([gap(k) for k in range(k0, k1 + 1)])
    big = model.y[0] > 0.05
    assert big.sum() > 5 and (~big).sum() > 5  # the merge happens inside the window
    np.testing.assert_allclose(particles[big], model.y[0][big], rtol=1e-3)


def test_movie_streams_all_frames(out):
    data, record = load(out, "movie")
    params = record["params"]
    assert data["tokens"].shape == (params["frames"], params["n"], params["d"])
    movie = out / params["movie"]
    assert movie.stat().st_size > 0
    if movie.suffix == ".gif":
        from PIL import Image

        with Image.open(movie) as image:
            assert image.n_frames == params["frames"]


def test_token_movie_png_frames_and_bad_input(tmp_path):
    states = (jnp.array([[1.0, 0.0], [np.cos(a), np.sin(a)]]) for a in (1.0, 0.5))
    path, frames = plot.token_movie(states, tmp_path / "frames", fmt="png", dpi=30)
    assert frames == 2 and sorted(p.name for p in path.iterdir()) == [
        "frame_00000.png",
        "frame_00001.png",
    ]
    with pytest.raises(ValueError, match="fmt: expected 'mp4', 'gif' or 'png'"):
        plot.token_movie([], tmp_path / "m.avi", fmt="avi")
    with pytest.raises(ValueError, match="states: expected at least one frame"):
        plot.token_movie([], tmp_path / "m.gif", fmt="gif")
    with pytest.raises(ValueError, match=r"d = 4"):
        plot.token_movie([np.eye(4)], tmp_path / "m.gif", fmt="gif")


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_at_quick_size(out, name, tmp_path, monkeypatch):
    del out  # run after the CLI so the jitted solves are reused
    monkeypatch.setenv("ATTNFLOW_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    namespace = runpy.run_path(str(NOTEBOOKS / f"{name}.py"), run_name="__main__")
    if name in NOTEBOOK_CHECKS:  # headline numbers against independent computations
        NOTEBOOK_CHECKS[name](namespace)
    import matplotlib.pyplot as plt

    plt.close("all")
