"""Headline numbers of the notebooks and figures against independent computations.

The ``check_*`` functions take the namespace a notebook leaves after ``runpy.run_path`` (the
notebook tests in test_fig46.py and test_mean_field.py call them, so each notebook runs once):

- fig4: cluster counts against scipy's connected components, the first run against a scipy
  solve of the angle ODE on the circle, and the paper's claim (2 clusters at β = 4, 3 at β = 9);
- staircase: the last merge against the two-body ODE u' = −e^{β cos u} sin u, integrated by
  quadrature (time to reach each gap), not by an ODE solver;
- movie: the last frame against a scipy solve of (SA) and its cluster count against scipy;
- mean_field: the exact W_2 against a linear program, and the fitted slopes within stated
  tolerances of the theory.

The tests in this file check Fig. 5's ensembles (b)–(d) realisation by realisation.
"""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp
from scipy.optimize import linprog
from scipy.sparse.csgraph import connected_components

import attnflow as af


def _components(x, delta):
    x = np.asarray(x, np.float64)
    return connected_components(x @ x.T >= 1 - delta, directed=False)[0]


def _sa_circle_rhs(beta):
    """(SA) on the circle, paper §7: θ̇_i = −Σ_j e^{β cos(θ_i−θ_j)} sin(θ_i−θ_j) / Z_i."""

    def rhs(t, theta):
        diff = theta[:, None] - theta[None, :]
        w = np.exp(beta * (np.cos(diff) - 1))
        return -np.sum(w * np.sin(diff), axis=1) / np.sum(w, axis=1)

    return rhs


def _sa_rhs(beta, n, d):
    """(SA) of paper (2.3) with Q = K = V = I in R^{n×d}, written with NumPy."""

    def rhs(t, flat):
        x = flat.reshape(n, d)
        logits = beta * x @ x.T
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        out = (a / a.sum(axis=1, keepdims=True)) @ x
        return (out - np.sum(out * x, axis=1, keepdims=True) * x).ravel()

    return rhs


def check_fig4_notebook(ns):
    data, params = ns["data"], ns["params"]
    delta, ts = params["delta"], data["ts"]
    betas = params["betas"]
    for b, beta in enumerate(betas):
        tokens = data["tokens"][b]
        for k in range(len(ts)):
            assert data["counts"][b, 0, k] == _components(tokens[k], delta), (beta, ts[k])
        theta0 = np.arctan2(tokens[0, :, 1], tokens[0, :, 0])
        ref = solve_ivp(
            _sa_circle_rhs(beta), (0, ts[-1]), theta0, t_eval=ts, rtol=1e-10, atol=1e-12
        )
        ref_tokens = np.stack([np.cos(ref.y.T), np.sin(ref.y.T)], axis=-1)
        np.testing.assert_allclose(tokens, ref_tokens, atol=1e-4, err_msg=f"beta = {beta}")
    # The paper's Fig. 4 claim at t = 30: two clusters at β = 4, three at β = 9 (the most
    # frequent count over seeds; the count is a random variable, metastable in time).
    final = {beta: np.bincount(data["counts"][b, :, -1]).argmax() for b, beta in enumerate(betas)}
    assert final == {4.0: 2, 9.0: 3}
    np.testing.assert_array_equal(ns["final"], data["counts"][:, :, -1])


def check_staircase_notebook(ns):
    """Along the last two-cluster plateau the gap u between the clusters' mean angles follows
    u' = −e^{β cos u} sin u (two point clusters, masses summing to 1): the time to go from u_0
    to u is ∫_u^{u_0} dv / (e^{β cos v} sin v)."""
    result, beta = ns["result"], ns["params"]["beta"]
    counts, ts = result["counts"], np.asarray(ns["ts"])
    two = np.flatnonzero(counts == 2)
    assert len(two) > 3 and counts[-1] == 1
    k0 = two[len(two) // 2]

    def gap(k):
        labels, theta = result["labels"][k], result["theta"][k]
        roots = np.unique(labels)
        if len(roots) == 1:
            return np.ptp(np.angle(np.exp(1j * (theta - theta[0]))))
        centres = [np.angle(np.mean(np.exp(1j * theta[labels == r]))) for r in roots]
        return abs(np.angle(np.exp(1j * (centres[1] - centres[0]))))

    u0 = gap(k0)
    checked = 0
    for k in range(k0 + 1, len(ts)):
        u = gap(k)
        if u < 0.05:  # the tail is the clusters' own width, not the two-body problem
            break
        travel, _ = quad(lambda v: 1.0 / (np.exp(beta * np.cos(v)) * np.sin(v)), u, u0, limit=200)
        assert ts[k] - ts[k0] == pytest.approx(travel, rel=2e-3), (ts[k], u)
        checked += 1
    assert checked >= 3
    # the notebook's merge time (first save with gap < 0.01) is the two-body one
    assert ns["merged_run"] == pytest.approx(ns["merged_model"], rel=0.3)


def check_movie_notebook(ns):
    params, x0, last = ns["params"], np.asarray(ns["x0"]), np.asarray(ns["last"])
    n, d, beta, t1 = params["n"], params["d"], params["beta"], params["t1"]
    ref = solve_ivp(_sa_rhs(beta, n, d), (0, t1), x0.ravel(), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(last, ref.y[:, -1].reshape(n, d), atol=1e-5)
    assert int(af.count_clusters(jnp.asarray(last), params["delta"])) == _components(
        last, params["delta"]
    )


def _exact_w2_linprog(x, y):
    """W_2 between two uniform empirical measures with the same number of points, as the
    transport linear program (not an assignment solver)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    n = len(x)
    cost = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1).ravel()
    rows = np.kron(np.eye(n), np.ones((1, n)))
    cols = np.kron(np.ones((1, n)), np.eye(n))
    res = linprog(cost / n, A_eq=np.vstack([rows, cols]), b_eq=np.ones(2 * n), bounds=(0, None))
    assert res.status == 0
    return float(np.sqrt(res.fun / 1.0))


def check_mean_field_notebook(ns):
    """The notebook's exact W_2 between two independent systems against a linear program. At
    the notebook's quick size (n = 32, 64, one pair) fitted slopes are noise; the slope is
    tested at larger n in test_mean_field_w2_slope below."""
    ys = np.asarray(ns["ys"])
    assert ns["values"][-1] == pytest.approx(_exact_w2_linprog(ys[0, -1], ys[1, -1]), rel=1e-6)
    assert all(np.isfinite(s) for s in ns["slopes"].values())


def test_mean_field_w2_slope():
    """The mean-field limit (Remark 3.3), measured as in notebooks/mean_field.py.

    E W_2 between two independent n-particle systems of (SA) (β = 1, d = 3; 10 layers of step
    0.1, the discrete flow to t = 1) from a von Mises–Fisher mixture decays like n^{-1/2} up to
    a log factor (d − 1 = 2). Stated tolerance: the fitted slope over n = 16 … 256 (8 pairs
    each, exact assignment) lies in [−0.65, −0.3], i.e. −1/2 widened for the log factor
    (√(log n / n) has local slope −0.5 + 1/(2 log n) ≈ −0.4) and the sampling error (≈ 0.05).
    """
    from scipy.optimize import linear_sum_assignment

    means, kappas = jnp.eye(3), jnp.array([8.0, 8.0, 4.0])
    probs = jnp.array([0.5, 0.3, 0.2])
    ns, pairs, size = [16, 64, 256], 8, 256

    @jax.jit
    @jax.vmap
    def final(key, weights):
        """n-particle systems as 256 slots with weights 1/n on the first n, 0 elsewhere: the
        empty slots do not act on the others (one compilation for every n)."""
        x0 = af.measures.von_mises_fisher_mixture(key, means, kappas, size, probs)
        return af.layers(af.SelfAttention(1.0), x0, 10, 0.1, args=weights)[-1]

    values = []
    for n in ns:
        weights = jnp.where(jnp.arange(size) < n, 1.0 / n, 0.0)
        keys = jr.split(jr.key(n), 2 * pairs)
        ends = np.asarray(final(keys, jnp.broadcast_to(weights, (2 * pairs, size))))[:, :n]
        w2 = []
        for i in range(pairs):
            x, y = ends[2 * i], ends[2 * i + 1]
            cost = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
            rows, cols = linear_sum_assignment(cost)
            w2.append(np.sqrt(cost[rows, cols].mean()))
        values.append(np.mean(w2))
    slope = np.polyfit(np.log(ns), np.log(values), 1)[0]
    assert -0.65 < slope < -0.3, (slope, values)


# Fig. 5, ensembles (b)–(d): a few realisations, each as one system of phase_diagram_from_tokens
# (R = 1: P is that system's clustered fraction), against scipy on (2.3) with Q = I, K = B, V.

N5, D5, DELTA5 = 4, 6, 1e-3
TS5 = np.array([0.0, 1.0, 3.0, 8.0])
BETAS5 = np.array([1.0, 4.0])


def _field_bv(beta, B, V):
    def rhs(t, flat):
        x = flat.reshape(N5, D5)
        logits = beta * x @ B @ x.T  # ⟨Q x_i, K x_j⟩ = x_iᵀ B x_j with Q = I, K = B
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        out = (a / a.sum(axis=1, keepdims=True)) @ x @ V.T  # V x_j, column convention
        return (out - np.sum(out * x, axis=1, keepdims=True) * x).ravel()

    return rhs


@pytest.mark.parametrize("panel", ["b", "c", "d"])
def test_fig5_realisations_against_an_independent_solve(panel):
    ensemble = af.FIG5_ENSEMBLES[panel]
    for r in range(2):
        key = jr.fold_in(jr.key(50), r)
        B, V = (np.asarray(m) for m in ensemble.sample(jr.fold_in(key, 1), D5))
        x0 = np.asarray(af.random_tokens(key, N5, D5))
        P = af.phase_diagram_from_tokens(
            jnp.asarray(x0[None]),
            betas=BETAS5,
            ts=TS5,
            Q=jnp.eye(D5),
            K=jnp.asarray(B),
            V=jnp.asarray(V),
            rtol=1e-9,
            atol=1e-11,
            max_steps=20000,
        )
        for b, beta in enumerate(BETAS5):
            ref = solve_ivp(
                _field_bv(beta, B, V), (0, TS5[-1]), x0.ravel(), t_eval=TS5, rtol=1e-11, atol=1e-12
            )
            for k in range(len(TS5)):
                x = ref.y[:, k].reshape(N5, D5)
                g = x @ x.T
                off = ~np.eye(N5, dtype=bool)
                clustered = np.sum(g[off] >= 1 - DELTA5)
                ambiguous = np.sum(np.abs(g[off] - (1 - DELTA5)) < 1e-6)
                got = float(P[b, k]) * N5 * (N5 - 1)
                assert abs(got - clustered) <= ambiguous + 1e-9, (panel, r, beta, TS5[k])
    # the ensembles draw what their panels say: (b) Wishart V ⪰ 0, (c)/(d) V ∝ B
    B, V = (np.asarray(m) for m in ensemble.sample(jr.key(3), D5))
    if panel == "b":
        assert np.linalg.eigvalsh((V + V.T) / 2).min() > -1e-12
        np.testing.assert_allclose(B, B.T, atol=1e-12)
    else:
        c = np.sqrt(D5) if panel == "c" else np.sqrt(D5 + 1)
        np.testing.assert_allclose(V, B / c, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Pictures: every notebook saves its figures into the folder named by ATTNFLOW_OUT, and
# importing attnflow.plot leaves matplotlib's backend alone.

NOTEBOOK_DIR = __import__("pathlib").Path(__file__).resolve().parent.parent / "notebooks"


def test_every_notebook_saves_its_figures_under_its_name():
    for path in sorted(NOTEBOOK_DIR.glob("*.py")):
        source = path.read_text()
        assert f'plot.save_figures("{path.stem}"' in source, path.name


def test_notebook_run_as_a_script_writes_its_pngs(tmp_path):
    import os
    import subprocess
    import sys

    import matplotlib.image

    out = tmp_path / "pictures"
    root = str(NOTEBOOK_DIR.parent)  # this checkout's attnflow, wherever the cwd is
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "ATTNFLOW_QUICK": "1", "ATTNFLOW_OUT": str(out), "MPLBACKEND": "Agg"}
    env["PYTHONPATH"] = path
    script = NOTEBOOK_DIR / "fig6.py"
    subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, check=True, timeout=600)
    written = sorted(p.name for p in out.iterdir())
    assert written and written[0] == "fig6.png", written
    for name in written:
        image = matplotlib.image.imread(out / name)
        assert image.shape[0] > 100 and image.shape[1] > 100
        assert np.ptp(image) > 0  # not a blank canvas
    assert not any(p.suffix == ".png" for p in tmp_path.iterdir())  # nothing in the cwd


def test_save_figures_without_a_folder_saves_nothing(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from attnflow import plot

    monkeypatch.delenv("ATTNFLOW_OUT", raising=False)
    monkeypatch.chdir(tmp_path)
    plt.close("all")
    plt.figure()
    assert plot.save_figures("x") == [] and not list(tmp_path.iterdir())
    monkeypatch.setenv("ATTNFLOW_OUT", str(tmp_path / "o"))
    plt.figure()
    assert [p.name for p in plot.save_figures("x")] == ["x.png", "x-2.png"]
    plt.close("all")
    with pytest.raises(ValueError, match="name"):
        plot.save_figures("../escape")


def test_importing_plot_keeps_the_backend():
    import os
    import subprocess
    import sys

    code = (
        "import matplotlib; matplotlib.use('svg'); import attnflow.plot; "
        "print(matplotlib.get_backend())"
    )
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "svg"
