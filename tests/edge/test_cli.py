import subprocess
import sys

import pytest

from edge.cli import build_parser, main


def test_help_lists_subcommands_with_examples(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"run", "data", "expert"} <= set(sub.choices)
    for name, p in sub.choices.items():
        assert "Examples:" in (p.epilog or ""), name


def test_console_script_help():
    r = subprocess.run([sys.executable, "-m", "edge.cli", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "run" in r.stdout


@pytest.mark.parametrize("argv, words", [
    (["expert", "eval", "--task", "nope"], ["invalid choice", "nope"]),
    (["expert", "eval", "--episodes", "0"], ["--episodes=0"]),
    (["data", "record", "--out", "/proc/forbidden/x", "--episodes", "1"], ["cannot create output directory"]),
    (["data", "record", "--out", "/tmp/x", "--regrasp-off-centre", "0.01"], ["--regrasp-off-centre", "--dagger"]),
    (["data", "record", "--out", "/tmp/x", "--regrasp-off-centre", "0.5"], ["--regrasp-off-centre=0.5"]),
])
def test_bad_input_gives_clear_error_not_traceback(argv, words, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    for w in words:
        assert w in err
