"""The per-user compilation cache (attnflow.enable_compilation_cache) and the error mode that lets
the solve be cached: where it is, that it is switched off on request, that a second process
loads what the first compiled, and that errors are still reported in ``EQX_ON_ERROR=nan`` mode.

The processes here are fresh Python interpreters (JAX's cache is per process), each a few
seconds: the cached program is a tiny one, and the solves are at n = 4."""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

import attnflow as af
from attnflow import _compile_cache
from attnflow.cli import build_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _compile_cache.default_cache_dir() == tmp_path / "xdg" / "attnflow" / "jax"
    # Unset or empty: ~/.cache (the XDG default).
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for value in ("", None):
        if value is None:
            monkeypatch.delenv("XDG_CACHE_HOME")
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", value)
        expected = tmp_path / "home" / ".cache" / "attnflow" / "jax"
        assert _compile_cache.default_cache_dir() == expected


@pytest.mark.parametrize("value", ["0", "false", "OFF", "no"])
def test_environment_switches_it_off(monkeypatch, tmp_path, value):
    import jax

    before = jax.config.jax_compilation_cache_dir
    monkeypatch.setenv("ATTNFLOW_COMPILATION_CACHE", value)
    assert af.enable_compilation_cache(tmp_path / "c") is None
    assert jax.config.jax_compilation_cache_dir == before
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("bad", [3, b"folder", ""])
def test_bad_path_is_named(monkeypatch, bad):
    monkeypatch.delenv("ATTNFLOW_COMPILATION_CACHE", raising=False)
    with pytest.raises(ValueError, match=r"^path: expected a folder"):
        af.enable_compilation_cache(bad)


def test_a_file_is_not_a_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNFLOW_COMPILATION_CACHE", raising=False)
    file = tmp_path / "f"
    file.write_text("")
    with pytest.raises(ValueError, match="path: expected a folder, got the file"):
        af.enable_compilation_cache(file)


def test_cli_flag_parses():
    parser = build_parser()
    for command in (["demo"], ["figure", "fig3"], ["landscape"]):
        assert parser.parse_args(command).no_compilation_cache is False
        assert parser.parse_args([*command, "--no-compilation-cache"]).no_compilation_cache


def _python(code: str, env: dict, tmp_path) -> str:
    """Run ``code`` in a fresh interpreter with only the given JAX-cache settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "ATTNFLOW_"))}
    clean.update(env)
    clean["PYTHONPATH"] = os.pathsep.join([str(ROOT), clean.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


_LOG = """
    import io, logging
    log = io.StringIO()
    logging.basicConfig(level=logging.WARNING, stream=log)
    import jax
    jax.config.update("jax_debug_log_modules", "jax._src.compiler")
    """


def test_second_process_loads_instead_of_compiling(tmp_path):
    """The CLI's way in: the default folder under XDG_CACHE_HOME; a program compiled by the first
    process is a cache hit in the second (JAX's own log says so), and the switch keeps it off."""
    code = (
        _LOG
        + """
    import jax.numpy as jnp, attnflow as af
    folder = af.enable_compilation_cache()
    print("folder", folder)
    print("value", float(jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.float32(0.5))))
    print("hit", "Persistent compilation cache hit for 'jit__lambda'" in log.getvalue())
    """
    )
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    first = _python(code, env, tmp_path)
    folder = tmp_path / "xdg" / "attnflow" / "jax"
    assert f"folder {folder}" in first and "hit False" in first
    assert any(p.name.startswith("jit__lambda") for p in folder.iterdir())
    second = _python(code, env, tmp_path)
    assert "hit True" in second
    off = _python(code, {**env, "ATTNFLOW_COMPILATION_CACHE": "0"}, tmp_path)
    assert "folder None" in off and "hit False" in off


_SOLVES = """
    import numpy as np, jax, jax.numpy as jnp, equinox as eqx, attnflow as af
    jax.config.update("jax_enable_x64", True)
    af.enable_compilation_cache(CACHE)
    x0 = af.random_tokens(jax.random.key(0), 4, 3)
    ts = jnp.linspace(0.0, 1.0, 3)

    sa = af.SelfAttention(1.0)
    # NaN from time args = t_bad on: the NaN is produced inside the solve. One program for all
    # three solves (t_bad is an argument).
    nan_after = lambda t, x, t_bad: jnp.where(t >= t_bad, jnp.nan, 1.0) * sa(t, x, None)

    def report(what, call):
        try:
            out = call()
        except (ValueError, eqx.EquinoxRuntimeError) as error:
            print(what, type(error).__name__, str(error).splitlines()[0][:90])
        else:
            print(what, "returned", "finite" if np.all(np.isfinite(out)) else "nan")

    def run(t_bad, ts=ts):
        return af.solve(nan_after, x0, 1.0, ts=ts, args=jnp.float64(t_bad), max_steps=64).ys

    report("good", lambda: run(2.0))
    report("nan_start", lambda: run(0.0))
    report("nan_later", lambda: run(0.5))
    report("bad_ts", lambda: run(2.0, ts[::-1]))
    if MODE == "nan":  # raise mode: the traced diagnosis is tested in test_validation_solve
        solve = lambda x, t_bad: af.solve(nan_after, x, 1.0, args=t_bad, max_steps=64).ys
        report("nan_jit", lambda: eqx.filter_jit(solve)(x0, jnp.float64(0.5)))
    print("uncacheable", "uses host callbacks" in log.getvalue())
    """


@pytest.mark.parametrize("mode", ["raise", "nan"])
def test_errors_are_reported_in_either_error_mode(tmp_path, mode):
    """With EQX_ON_ERROR=nan the eager solve has no host callback (it is written to the cache),
    and its failures are still raised on the host with attnflow's diagnosis; inside the user's
    own jit a failure comes back as NaN, never as finite numbers."""
    cache = f"CACHE = {str(tmp_path / 'c')!r}\nMODE = {mode!r}\n"
    code = textwrap.dedent(_LOG) + cache + textwrap.dedent(_SOLVES)
    out = _python(code, {"EQX_ON_ERROR": mode}, tmp_path)
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["good"] == "returned finite"
    assert lines["nan_start"].startswith(
        "EquinoxRuntimeError solve: the field is not finite at the initial state"
    )
    assert lines["nan_later"].startswith("EquinoxRuntimeError solve: reached max_steps = 64")
    assert lines["bad_ts"].startswith("ValueError ts: expected finite save times")
    if mode == "raise":
        # diffrax's copy of the save-time check and the traced diagnosis: host callbacks.
        assert lines["uncacheable"] == "True"
    else:
        assert lines["uncacheable"] == "False"
        assert lines["nan_jit"] == "returned nan"
    solves = [p for p in (tmp_path / "c").iterdir() if p.name.startswith("jit_diffeqsolve")]
    assert len(solves) == (0 if mode == "raise" else 1), sorted(p.name for p in solves)


def test_every_notebook_opts_in():
    """The notebooks switch the cache on (the CLI does in attnflow/cli.py), the library does not."""
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        call = re.search(r"^(af\.)?enable_compilation_cache\(\)", path.read_text(), re.M)
        assert call, path.name
    init = (ROOT / "attnflow" / "__init__.py").read_text()
    assert "enable_compilation_cache(" not in init.replace("enable_compilation_cache as", "")
