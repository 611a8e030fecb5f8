"""What three figures draw (issue 22, item 5), on synthetic data: the measure-landscape switch
curve only where it is a boundary, the Rice reference and one colour per model in
metastable-clusters, and no y-label of fig1-flow over another panel."""

import numpy as np
import pytest

import attnflow as af
from attnflow.figures import fig1_flow, measure_landscape, metastable_clusters

pytest.importorskip("matplotlib")


def test_measure_landscape_switch_curve_only_where_it_applies():
    import matplotlib.pyplot as plt

    values = np.linspace(-2, 2, 5)
    shape = (5, 5)
    data = {"values": values, "max_kind": np.zeros(shape, int), "min_kind": np.zeros(shape, int)}
    fig = measure_landscape.plot(data)
    lines = [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) > 2]
    assert len(lines) == 2
    for line in lines:
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        lam_min, lam_max = np.minimum(x, y), np.maximum(x, y)
        # Every drawn point is on the boundary between Dirac and antipodal pair: λ_min ≤ 0 and
        # e^{λ_max} = cosh λ_min (theory.maximum_energy's two candidates tie).
        assert np.all(lam_min <= 0)
        np.testing.assert_allclose(lam_max, np.log(np.cosh(lam_min)), atol=1e-12)
        for a, b in zip(x[::40], y[::40], strict=True):
            e = af.theory.maximum_energy(np.diag([a, b]))
            assert e == pytest.approx(np.exp(max(a, b)), rel=1e-12)
            assert e == pytest.approx(np.cosh(min(a, b)), rel=1e-12)
    plt.close(fig)


def test_uniform_circle_mode_count_against_monte_carlo():
    # Rice formula against brute-force mode counts of n = 2000 uniform angles (24 draws each).
    rng = np.random.default_rng(0)
    for beta in (4.0, 16.0):
        counts = [
            af.measures.kde_mode_count(rng.uniform(0, 2 * np.pi, 2000), beta, circular=True)
            for _ in range(24)
        ]
        mean, err = np.mean(counts), np.std(counts, ddof=1) / np.sqrt(len(counts))
        assert abs(mean - af.theory.uniform_circle_mode_count(beta)) < 3 * err + 0.05
    big = af.theory.uniform_circle_mode_count(np.array([400.0, 1600.0]))
    np.testing.assert_allclose(big, np.sqrt(1.5 * np.array([400.0, 1600.0])), rtol=2e-3)


def test_metastable_clusters_reference_and_colours():
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    betas = np.array([3.0, 6.0, 9.0])
    counts = np.array([[2, 3], [3, 3], [4, 5]])
    data = {"betas": betas, "kde_modes": counts, "usa": counts, "sa": counts + 1}
    fig = metastable_clusters.plot(data, {"n": 16, "realizations": 2})
    left, right = fig.axes
    reference = [line for line in left.get_lines() if line.get_linestyle() == "--"]
    assert len(reference) == 1
    x, y = reference[0].get_xdata(), reference[0].get_ydata()
    np.testing.assert_allclose(y, af.theory.uniform_circle_mode_count(x))
    assert not np.allclose(y, np.sqrt(x * np.log(x)), rtol=0.05)

    # BPA's k_max beside the counts: the dotted step is argmax_k k² I_k(β) (scipy, brute force).
    from scipy.special import iv

    (bpa,) = [line for line in left.get_lines() if line.get_linestyle() == ":"]
    k = np.arange(1, 40)
    for b, kmax in zip(bpa.get_xdata(), bpa.get_ydata(), strict=True):
        assert kmax == 1 + np.argmax(k**2 * iv(k, b))
    assert "k_max" in bpa.get_label()

    on_right = {
        line.get_label(): to_rgba(line.get_color())
        for line in right.get_lines()
        if not line.get_label().startswith("_")
    }
    on_left = {
        c.get_label().split(",")[0]: to_rgba(c.lines[0].get_color()) for c in left.containers
    }
    assert set(on_right) == {"USA clusters", "SA clusters"}
    assert len(set(on_left.values())) == 3
    for label, colour in on_right.items():
        assert on_left[label] == colour
    plt.close(fig)


def test_fig1_flow_labels_stay_in_their_panels():
    import matplotlib.pyplot as plt

    layers, bins, v, m = 4, 10, len(fig1_flow.VARIANTS), len(fig1_flow.METHODS)
    rng = np.random.default_rng(0)
    data = {
        "real_hist": rng.random((layers, bins)),
        "sim_hist": rng.random((v, m, layers, bins)),
        "edges": np.linspace(-1, 1, bins + 1),
        "sim_mmd": rng.random((v, m, layers)),
        "sim_agreement": rng.random((v, m, layers)),
        "sim_mean_cosine": rng.random((v, m, layers)),
        "identity_mmd": rng.random(layers),
        "identity_agreement": rng.random(layers),
        "real_mean_cosine": rng.random(layers),
    }
    fig = fig1_flow.plot_figure(data, {"kappa": 1.0})
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # Other panels with their tick labels and axis labels (the old label reached the x-label
    # of the histogram above).
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
    for i, ax in enumerate(fig.axes):
        label = ax.yaxis.label
        if not label.get_text():
            continue
        extent = label.get_window_extent(renderer)
        for j, box in enumerate(boxes):
            if j != i:
                assert not extent.overlaps(box), (label.get_text(), j)
        # Nor past the figure's top or bottom.
        assert extent.y0 >= 0 and extent.y1 <= fig.bbox.y1
    plt.close(fig)
