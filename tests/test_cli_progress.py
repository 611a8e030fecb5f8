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
