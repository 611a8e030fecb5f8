"""benchmarks/device_check.sh --cpu: the GPU check of issue #34 runs on the CPU at a reduced size
(so that the script a lent GPU will run is known to work), and its output has every section."""

import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow  # subprocesses that start JAX and compile: tens of seconds
def test_device_check_runs_on_the_cpu():
    out = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "device_check.sh"), "--cpu"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    text = out.stdout
    assert out.returncode == 0, text[-3000:] + out.stderr[-3000:]
    for section in ("device", "fig3", "layout", "solve", "grad"):
        assert f"## {section}" in text and f"device_check: {section} took" in text, section
    assert "device: cpu" in text
    # Fig. 3: one row per panel with its counts; evaluations = 6 (accepted + rejected) + systems.
    row = re.search(r"^\| 2 \| [0-9.]+ \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", text, re.M)
    assert row, text
    accepted, rejected, evaluations, _ = map(int, row.groups())
    systems = 6 * 8  # the quick preset: 6 β × 8 realisations
    assert evaluations == 6 * (accepted + rejected) + systems
    assert "bitwise equal: True" in text
    assert "`solve` / raw `diffeqsolve` time ratio" in text
    assert "StoredStepAdjoint" in text  # the gradient benchmark's table
    assert "status 0" in text
