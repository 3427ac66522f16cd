"""benchmarks/arm_tracking.py: how far the measured TCP follows each commanded move."""

import json

import pytest

from tests.benchmarks._load import load_benchmark

at = load_benchmark("arm_tracking")


def _ticks(path, xs, sent_at=(0,), ep=0):
    """A run whose TCP sits at x = xs[k] at tick k; a 2 cm +x move is sent at the ticks in ``sent_at``."""
    with open(path, "a") as f:
        for k, x in enumerate(xs):
            move = k in sent_at
            f.write(json.dumps({"ep": ep, "slot": k, "kind": "act" if move else "hold", "ee_pos_m": [x, 0.0, 0.1],
                                "sent": [0.02, 0.0, 0.0, 0.0, 1.0] if move else [0.0, 0.0, 0.0, 0.0, 1.0]}) + "\n")


def test_fractions_of_a_move_one_and_two_ticks_later(tmp_path):
    run = tmp_path / "a"
    run.mkdir()
    _ticks(run / "ticks.jsonl", [0.30, 0.31, 0.32, 0.32], sent_at=(0,))
    _ticks(run / "ticks.jsonl", [0.30, 0.315, 0.32, 0.32], sent_at=(0, 2), ep=1)  # the second move: no 2 ticks after
    one, two, lag = at.fractions(run / "ticks.jsonl", 0.015)
    assert one == pytest.approx([0.5, 0.75]) and two == pytest.approx([1.0, 1.0])
    assert lag == pytest.approx([0.01, 0.005])  # the target 0.32 after the move; the TCP at 0.31 / 0.315
    assert at.fractions(run / "ticks.jsonl", 0.03) == ([], [], [])  # moves below the size counted are left out


def test_writes_each_groups_medians_and_refuses_an_empty_group(tmp_path, capsys):
    for name, xs in (("b1", [0.30, 0.31, 0.32]), ("b2", [0.30, 0.305, 0.32])):
        (tmp_path / name).mkdir()
        _ticks(tmp_path / name / "ticks.jsonl", xs)
    out = tmp_path / "t.json"
    assert at.main(["--runs", f"bridge={tmp_path}/b*", "--out", str(out)]) == 0
    g = json.loads(out.read_text())["groups"]["bridge"]
    assert g["run_dirs"] == 2 and g["moves"] == 2 and g["one_tick_later"]["p50"] == pytest.approx(0.375)
    with pytest.raises(SystemExit):
        at.main(["--runs", f"sim={tmp_path}/none*", "--out", str(out)])
    assert "no run directory with a ticks.jsonl" in capsys.readouterr().err
