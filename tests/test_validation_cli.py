"""The command line checks its options before computing: a bad --out, --seed or --t1 fails at
once with a message naming the option, not with a traceback after minutes of work."""

import pytest

from attnflow.cli import main


@pytest.mark.parametrize("command", [["demo"], ["figure", "fig3"], ["landscape", "--quick"]])
def test_out_that_is_a_file_fails_before_computing(command, tmp_path, capsys):
    existing = tmp_path / "taken"
    existing.write_text("")
    assert main([*command, "--out", str(existing)]) == 2
    err = capsys.readouterr().err
    assert f"attnflow {command[0]}: error: --out: '{existing}' exists and is not a folder" in err


def test_out_that_cannot_be_created_fails_before_computing(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    unwritable = tmp_path / "file" / "sub"
    assert main(["demo", "--out", str(unwritable)]) == 2
    err = capsys.readouterr().err
    assert f"--out: cannot write to '{unwritable}' (" in err


@pytest.mark.parametrize("command", [["demo"], ["figure", "fig3"], ["landscape"]])
@pytest.mark.parametrize("seed", [str(2**63), "-1", "1.5"])
def test_bad_seed_is_a_usage_error(command, seed, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--seed", seed])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --seed:" in err
    assert "expected an integer seed" in err or "expected a seed in [0, 2**63 - 1]" in err


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--t1", "nan", "argument --t1: expected a finite number > 0, got nan"),
        ("--t1", "inf", "argument --t1: expected a finite number > 0, got inf"),
        ("--t1", "-1", "argument --t1: expected a finite number > 0, got -1"),
        ("--beta", "nan", "argument --beta: expected a finite number, got nan"),  # β < 0 is fine
        ("--n", "1", "argument --n: expected an integer >= 2, got 1"),
        ("--d", "1", "argument --d: expected an integer >= 2, got 1"),
        ("--steps", "0", "argument --steps: expected an integer >= 1, got 0"),
    ],
)
def test_demo_rejects_bad_numbers(option, value, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", option, value])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["landscape", "--gtol", "nan"], "argument --gtol: expected a finite number > 0, got nan"),
        (["landscape", "--n", "1"], "argument --n: expected an integer >= 2, got 1"),
        (["landscape", "--d", "1"], "argument --d: expected an integer >= 2, got 1"),
        (["landscape", "--beta", "-1"], "argument --beta: expected a finite number > 0, got -1"),
        (["landscape", "--random", "-1"], "argument --random: expected an integer >= 0, got -1"),
        (["nosuch"], "argument command: invalid choice: 'nosuch'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1, err  # one line: no usage block, no traceback


def test_usage_errors_do_not_start_jax():
    """Parsing imports neither JAX nor the library's numerics (``attnflow`` imports its public
    names on first use): an unknown figure is reported at once, not after JAX's start-up."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from attnflow.cli import main\n"
        "try:\n"
        "    main(['figure', 'no-such-figure'])\n"
        "except SystemExit as stop:\n"
        "    started = [m for m in ('jax', 'diffrax', 'equinox') if m in sys.modules]\n"
        "    print(stop.code, started)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.stdout.split("\n")[0] == "2 []", result.stdout + result.stderr
    assert "invalid choice: 'no-such-figure'" in result.stderr
