"""The survey's Fig. 4 against ``attnflow figure normalization``: a table of our mean, our
5–95% band and the digitised survey mean at t = 1, 2, 3, 4, 5, 6, 8, 10 (issue 41).

Run the figure first (the values are deterministic; only its time depends on the machine)::

    attnflow figure normalization --full --compare --out /tmp/fig4
    python benchmarks/fig4_survey.py /tmp/fig4/normalization.npz

A deviation |mean − survey| ≤ 0.05 is within the survey's band where the curves rise steeply
(its band is about ±0.05 wide there, README of the digitisation); ``in ours`` says whether the
survey's mean lies inside our own 5–95% band.
"""

import argparse

import numpy as np

from attnflow.figures import _survey_fig4 as survey

TIMES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def table(path: str) -> str:
    with np.load(path) as data:
        t, cosine, names = data["t"], data["cosine"], [str(n) for n in data["names"]]
        model = str(data["model"]) if "model" in data else "(no model recorded)"
    rows = [
        f"model: {model}",
        "",
        "| scheme | " + " | ".join(f"t = {x:g}" for x in TIMES) + " |",
        "|---|" + "---|" * len(TIMES),
    ]
    worst = {}
    for name, _ in survey.STYLE:
        curves = cosine[names.index(name)]
        mean = curves.mean(axis=0)
        lo, hi = np.quantile(curves, [0.05, 0.95], axis=0)
        cells = []
        for x in TIMES:
            if x > t[-1] + 1e-9:
                cells.append("–")
                continue
            m, a, b = (float(np.interp(x, t, c)) for c in (mean, lo, hi))
            ref = survey.MEANS[name][survey.TIMES.index(x)]
            inside = "in" if a <= ref <= b else "out"
            worst[name] = max(worst.get(name, 0.0), abs(m - ref))
            cells.append(f"{m:.3f} [{a:.2f}, {b:.2f}] vs {ref:.2f} ({m - ref:+.3f}, {inside})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    rows.append("")
    rows.append("largest |mean − survey|: " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()))
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("npz", help="normalization.npz written by attnflow figure normalization")
    print(table(parser.parse_args().npz))
