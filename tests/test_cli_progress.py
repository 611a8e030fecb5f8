"""The command line's progress output in a log file (stderr not a terminal): compilation is its
own line, progress counts flow time, and there are no carriage-return redraws."""

from attnflow.cli import main


def test_demo_log_is_plain_lines(tmp_path, capsys):
    assert main(["demo", "--n", "6", "--t1", "2", "--steps", "10", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("compiling the (SA) solve ... ")
    progress = [line for line in lines if line.startswith("solving (SA): t = ")]
    assert len(progress) == 10 and progress[-1].startswith("solving (SA): t = 2 of 2 ")


def test_figure_reports_its_phases(tmp_path, capsys):
    assert main(["figure", "fig6", "--quick", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.err
    assert captured.err.startswith("fig6 (quick): computing ...")
    assert "(compute " in captured.out and " plot " in captured.out


def test_progress_rates_read_at_every_speed(monkeypatch):
    """A rate below one item per second is not printed as 0, and the unit is spaced."""
    import io

    from attnflow import _progress

    clock = iter([0.0, 4.0, 8.0])
    monkeypatch.setattr(_progress.time, "perf_counter", lambda: next(clock))
    log = io.StringIO()
    with _progress.Progress("demo", 4, "systems", file=log, interval=0) as bar:
        bar.update(1)
    lines = log.getvalue().splitlines()
    assert lines[0].endswith("4.0 s, 0.25 systems/s"), lines
    monkeypatch.undo()

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    with _progress.Progress("demo", 2, "systems", file=screen, interval=0) as bar:
        bar.update(2)
    assert " systems/s]" in screen.getvalue() and "s/ systems" not in screen.getvalue()


def test_general_engine_reports_systems(capsys):
    """The general engine (a non-default family) reports systems, not tqdm's bare "it"."""
    import jax.numpy as jnp
    import jax.random as jr

    import attnflow as af

    af.phase_diagram(
        jr.key(0),
        n=4,
        d=3,
        betas=jnp.array([1.0]),
        ts=jnp.array([0.0, 0.5]),
        realizations=3,
        family=af.FieldFamily(heads=1, causal=True),
        progress=True,
    )
    err = capsys.readouterr().err
    assert "3/3 systems" in err and " it/s" not in err, err
