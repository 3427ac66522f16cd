"""edge run's run directory: what a run that failed early leaves behind (nothing, unless it recorded a
fault, an e-stop, a loop error or a command sent to an arm)."""

import argparse
import json
from pathlib import Path

import pytest

from edge.commands.run import RunDir


@pytest.mark.parametrize("files, kept", [
    ({}, False),
    ({"events.jsonl": [{"kind": "start"}, {"kind": "worker_started", "start_s": 0.1}]}, False),
    ({"events.jsonl": [{"kind": "start"}, {"kind": "loop_error", "detail": "x"}]}, True),
    ({"events.jsonl": [{"kind": "fault", "detail": "link_down"}]}, True),
    ({"events.jsonl": [{"kind": "driver_fault", "fault": "link_down"}]}, True),
    # a bridge run refused at the prompt or at connect: its driver's lifecycle events keep nothing
    ({"events.jsonl": [{"kind": "driver_connected"}, {"kind": "driver_closed"}, {"kind": "connect_failed"}]}, False),
    ({"commands.jsonl": [{"seq": 1}]}, True),
    ({"ticks.jsonl": [{"ep": 0, "slot": 0}]}, True),
])
def test_a_run_that_failed_early_is_removed_unless_it_recorded_something(tmp_path, files, kept):
    d = RunDir(argparse.Namespace(out=str(tmp_path / "parent" / "run"), resume=False))
    for name, lines in files.items():
        (d.path / name).write_text("".join(json.dumps(x) + "\n" for x in lines))
    d.discard_if_empty()
    assert d.path.exists() == kept and (tmp_path / "parent").exists() == kept  # the topmost folder it made


def test_two_runs_started_in_the_same_second_get_their_own_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("time.strftime", lambda fmt: "20261207-120000")
    a = RunDir(argparse.Namespace(out=None, resume=False))
    # the other run made its folder after this one looked (the race): exists() still said no
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda p: False if p.name.startswith("20261207") else real_exists(p))
    b = RunDir(argparse.Namespace(out=None, resume=False))
    assert (a.path.name, b.path.name) == ("20261207-120000", "20261207-120000-2")
    monkeypatch.setattr(Path, "exists", real_exists)
    # a fails before its first tick: its own folder goes, runs/ (which it made) stays while b records there
    a.discard_if_empty()
    assert not a.path.exists() and b.path.is_dir()
    b.discard_if_empty()
    assert not b.path.exists() and list(Path("runs").iterdir()) == []  # b removes only what b made


def test_hil_and_profile_default_folders_are_made_the_same_way(tmp_path, monkeypatch):
    from edge.commands._out import make_default_run_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("time.strftime", lambda fmt: "20261207-120000")
    made = [make_default_run_dir(p) for p in ("hil-", "hil-", "profile-")]
    assert [str(d) for d, _ in made] == ["runs/hil-20261207-120000", "runs/hil-20261207-120000-2",
                                         "runs/profile-20261207-120000"]
    assert [str(c) for _, c in made] == ["runs", "runs/hil-20261207-120000-2", "runs/profile-20261207-120000"]
