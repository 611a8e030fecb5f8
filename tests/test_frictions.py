"""A new user's frictions of issue #34, each pinned: a warning where a setting is ignored or a
family is degenerate, the pretrained entry points as the README writes them, the install hint
of a checkout, the CLI's --version and plain --help."""

import re
import subprocess
import sys
import warnings
from pathlib import Path

import diffrax
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

ROOT = Path(__file__).resolve().parent.parent


def test_rtol_with_a_stepsize_controller_warns_that_it_is_ignored():
    x0 = af.random_tokens(jr.key(0), 4, 3)
    field, controller = af.SelfAttention(1.0), diffrax.ConstantStepSize()
    with pytest.warns(UserWarning, match="rtol: ignored, because stepsize_controller="):
        warned = af.solve(field, x0, 1.0, dt0=0.1, rtol=1e-3, stepsize_controller=controller)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = af.solve(field, x0, 1.0, dt0=0.1, stepsize_controller=controller)
        adaptive = af.solve(field, x0, 1.0, rtol=1e-3)  # the default controller uses rtol
    np.testing.assert_array_equal(warned.ys, quiet.ys)  # rtol had no effect
    assert int(adaptive.stats["num_steps"]) != int(quiet.stats["num_steps"])


def test_pretrained_as_the_readme_writes_it():
    assert af.pretrained.compare_with_flow is not None  # `import attnflow as af; af.pretrained`
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "compare_with_flow(" in x)
    assert re.search(r'compare_with_flow\([^,]+, "[^"]+"\)', line), line  # one text, a str
    with pytest.raises(ValueError, match="text: expected one string"):
        af.pretrained.compare_with_flow(None, ["The cat sat on the mat."])


def test_install_hint_is_the_one_of_a_checkout():
    from attnflow.pretrained._load import ModelNotInstalledError, _require

    with pytest.raises(ModelNotInstalledError, match=re.escape('pip install -e ".[pretrained]"')):
        _require("attnflow_no_such_module")
    for page in ("docs/api/pretrained.md", "attnflow/pretrained/__init__.py"):
        assert 'pip install "attnflow[pretrained]"' not in (ROOT / page).read_text(), page


def test_cli_version_and_plain_help():
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "attnflow.cli", *a], capture_output=True, text=True, cwd=ROOT
    )
    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"attnflow {af.__version__}"
    for args in (["--help"], ["figure", "--help"], ["demo", "--help"]):
        out = run(*args)
        assert out.returncode == 0 and "``" not in out.stdout, args
