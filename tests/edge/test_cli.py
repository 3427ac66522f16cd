import argparse
import subprocess
import sys

import pytest

from edge.cli import DeprecatedAlias, build_parser, main


def test_help_lists_subcommands_with_examples(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"run", "data", "expert"} <= set(sub.choices)
    for name, p in sub.choices.items():
        assert "Examples:" in (p.epilog or ""), name


def test_every_listed_command_module_exists_and_registers_one_command():
    """No placeholder entries: a listed module that is missing is an import error, not a silently absent command."""
    import importlib

    from edge.cli import COMMAND_MODULES

    sub = argparse.ArgumentParser().add_subparsers()
    for name in COMMAND_MODULES:
        before = set(sub.choices)
        importlib.import_module(name).register(sub)
        assert set(sub.choices) - before, name


def test_console_script_help():
    r = subprocess.run([sys.executable, "-m", "edge.cli", "--help"], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "run" in r.stdout


@pytest.mark.parametrize("argv, words", [
    (["expert", "eval", "--task", "nope"], ["invalid choice", "nope"]),
    (["expert", "eval", "--episodes", "0"], ["--episodes=0"]),
    (["expert", "eval", "--image-size", "64"], ["unrecognized arguments: --image-size 64"]),  # renders nothing
    # a deprecated spelling and the new one with different values, in either order
    (["export", "--checkpoint", "/tmp/a", "/tmp/b", "--out", "/tmp/x"], ["the positional CKPT /tmp/b", "both given"]),
    (["profile", "--query-mode", "sync", "--execution", "async"], ["--execution async and --query-mode both"]),
    (["profile", "--execution", "async", "--query-mode=async"], ["--execution async and --query-mode both"]),
    (["data", "record", "--out", "/proc/forbidden/x", "--episodes", "1"], ["cannot create output directory"]),
    (["data", "record", "--out", "/tmp/x", "--regrasp-off-centre", "0.01"], ["--regrasp-off-centre", "--checkpoint", "--dagger"]),
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


# --- one vocabulary: help on every option, deprecated spellings still parse -----------------------
def _parsers(parser=None, path=("edge",)):
    """(path, parser) for the top-level parser and every subcommand, recursively."""
    parser = parser or build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_option_has_help_and_a_shown_default():
    missing, no_default = [], []
    for path, parser in _parsers():
        fmt = parser._get_formatter()
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                continue
            name = f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}"
            if not (a.help or "").strip() or a.help == argparse.SUPPRESS:
                missing.append(name)
                continue
            takes_value = a.nargs != 0 and a.option_strings
            if (takes_value and not a.required and not isinstance(a, DeprecatedAlias)
                    and "(required)" not in a.help and "default" not in fmt._get_help_string(a)):
                no_default.append(name)
    assert not missing, f"options without help: {missing}"
    assert not no_default, f"options whose help shows no default: {no_default}"


def test_every_deprecated_alias_has_a_canonical_option_with_its_dest():
    aliases = 0
    for path, parser in _parsers():
        for a in parser._actions:
            if isinstance(a, DeprecatedAlias):
                aliases += 1
                canonical = [c for c in parser._actions if c.dest == a.dest and c is not a
                             and not isinstance(c, DeprecatedAlias)]
                assert canonical, f"{' '.join(path)} {a.option_strings or a.dest}: no canonical option"
                assert a.help.startswith("deprecated: use "), a.help
                assert a.use.split()[0] in canonical[0].option_strings
    assert aliases >= 5  # run/profile --execution, record --dagger-k/--dagger-c, export positional


@pytest.mark.parametrize("old, new, warns", [
    (["run", "--execution", "sync"], ["run", "--query-mode", "sync"], "--execution"),
    (["profile", "--execution", "async"], ["profile", "--query-mode", "async"], "--execution"),
    (["data", "record", "--out", "d", "--dagger-k", "4", "--dagger-c", "6"],
     ["data", "record", "--out", "d", "--num-steps", "4", "--execute", "6"], "--dagger-k"),
    (["data", "record", "--out", "d", "--dagger=ck"], ["data", "record", "--out", "d", "--checkpoint", "ck"],
     None),  # --dagger is a synonym of --checkpoint (a DAgger recording), not deprecated
    (["export", "ck", "--out", "o"], ["export", "--checkpoint", "ck", "--out", "o"], "positional CKPT"),
    (["export", "--out", "o", "ck"], ["export", "--out", "o", "--checkpoint", "ck"], "positional CKPT"),
])
def test_deprecated_spellings_parse_to_the_same_destination(old, new, warns, capsys):
    parser = build_parser()
    got_new = vars(parser.parse_args(new))
    assert capsys.readouterr().err == ""
    got_old = vars(parser.parse_args(old))
    err = capsys.readouterr().err
    assert got_old == got_new
    if warns is None:
        assert err == ""
    else:
        lines = err.strip().splitlines()
        assert lines and all(line.startswith("warning: ") and "deprecated; use --" in line
                             for line in lines), err
        assert warns in lines[0]


def test_renamed_defaults_are_unchanged():
    parser = build_parser()
    run = parser.parse_args(["run"])
    # query mode None = async for the VLA, sync for --policy comet (resolved in edge run)
    assert (run.num_steps, run.execute, run.query_mode, run.checkpoint) == (10, 8, None, None)
    rec = parser.parse_args(["data", "record", "--out", "d"])
    assert (rec.num_steps, rec.execute, rec.checkpoint, rec.backend) == (10, 8, None, "onnxruntime")
    assert parser.parse_args(["profile"]).query_mode == "sync"


def test_choices_match_the_packages_lists():
    from edge.backends import BACKENDS
    from edge.commands._sim_args import EXPERT_TASKS, TASKS
    from sim.tasks import EXPERT_TASKS as SIM_EXPERT_TASKS
    from sim.tasks import TASKS as SIM_TASKS

    assert TASKS == SIM_TASKS and EXPERT_TASKS == SIM_EXPERT_TASKS
    choices = {}
    for path, parser in _parsers():
        for a in parser._actions:
            if a.dest in ("task", "backend") and a.option_strings:
                choices[(" ".join(path), a.dest)] = a.choices
    assert choices[("edge train vla", "task")] == SIM_EXPERT_TASKS  # demonstrations come from the expert
    assert choices[("edge run", "task")] == choices[("edge profile", "task")] == SIM_TASKS
    assert choices[("edge data record", "task")] == choices[("edge expert eval", "task")] == SIM_EXPERT_TASKS
    assert choices[("edge data record", "backend")] == BACKENDS
    # edge run also takes a user's own backend ('pkg.module:factory'), checked by BackendConfig
    assert choices.pop(("edge run", "backend")) is None
    for key, value in choices.items():
        assert value is not None, f"{key}: free text"
    from edge.commands.train import WM_KINDS
    from world_models.token_model import KINDS
    assert WM_KINDS == KINDS


@pytest.mark.parametrize("argv, words", [
    (["train", "vla", "--task", "stak", "--data", "d", "--out", "o"], ["--task", "invalid choice", "stak"]),
    (["data", "record", "--out", "d", "--backend", "trt"], ["--backend", "invalid choice", "trt"]),
    (["run", "--driver", "sim"], ["unrecognized arguments: --driver"]),  # removed: it had one choice
])
def test_free_text_is_refused_and_removed_flags_are_gone(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    for w in words:
        assert w in err


def test_export_without_a_checkpoint_is_one_clear_error(tmp_path, capsys):
    assert main(["export", "--out", str(tmp_path / "e")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --checkpoint CKPT is required"), lines
    assert not (tmp_path / "e").exists()


def test_tensorrt_backend_without_tensorrt_is_one_clear_error(tmp_path, capsys, monkeypatch):
    import importlib.util

    from edge.runtime.session import DEFAULT_CHECKPOINT

    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("tensorrt is installed here")
    if not DEFAULT_CHECKPOINT.exists():
        pytest.skip("no shipped checkpoint: edge run would fall back to the expert")
    monkeypatch.delenv("EDGE_DEBUG", raising=False)
    code = main(["run", "--backend", "tensorrt", "--episodes", "1", "--out", str(tmp_path / "r")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("error: backend 'tensorrt' is not available"), lines
    assert "install" in lines[0] and "Traceback" not in lines[0]
    assert not (tmp_path / "r").exists()  # fails before the first tick: no run directory


_BIG_OUTPUT = """
import argparse, sys
from edge import cli
def big(args):
    for i in range(200000):
        print("line", i)
    return 0
class Parser:
    def parse_known_args(self, argv):
        return argparse.Namespace(func=big, command="x"), []
cli.build_parser = Parser
sys.exit(cli.main([]))
"""


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`edge data info DIR | head -1`: exit 141 as after SIGPIPE, no traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", _BIG_OUTPUT], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"line 0")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err, err


def test_a_broken_pipe_of_our_own_is_an_error(monkeypatch):
    import argparse
    import multiprocessing as mp

    from edge import cli

    def send_to_a_dead_worker(args):
        a, b = mp.Pipe()
        b.close()
        a.send(("x" * 100000,))

    class Parser:
        def parse_known_args(self, argv):
            return argparse.Namespace(func=send_to_a_dead_worker, command="x"), []

    monkeypatch.setattr(cli, "build_parser", Parser)
    with pytest.raises(BrokenPipeError):
        cli.main([])


def test_an_unknown_flag_is_named_by_its_subcommand(capsys):
    from edge.cli import main

    for argv, who in ((["doctor", "--bogus"], "edge doctor: error"), (["data", "info", "x", "--bogus"], "edge data info: error")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and who in err and "unrecognized arguments: --bogus" in err, err
