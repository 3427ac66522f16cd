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


def _grip(path, closure, sent, slots=None):
    """A run whose gripper closure is ``closure[k]`` at tick k and whose gripper command is ``sent[k]``."""
    with open(path, "a") as f:
        for k, (g, s) in enumerate(zip(closure, sent)):
            f.write(json.dumps({"ep": 0, "slot": k if slots is None else slots[k], "kind": "act",
                                "ee_pos_m": [0.3, 0.0, 0.1], "gripper": g,
                                "sent": None if s is None else [0.0, 0.0, 0.0, 0.0, s]}) + "\n")


def test_releases_open_commands_while_holding(tmp_path):
    f = tmp_path / "ticks.jsonl"
    # holding at 0.47; a 1-tick open that does not let go, then a 3-tick open that does
    _grip(f, [0.47, 0.47, 0.46, 0.47, 0.47, 0.47, 0.30, 0.10, 0.05, 0.05],
          [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    rel = at.releases(f)
    assert [(round(a, 3), round(b, 3), n, go) for a, b, n, go in rel] == [(0.01, 0.0, 1, False), (0.17, 0.37, 3, True)]
    g = tmp_path / "open"
    _grip(g, [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0])  # open fingers: nothing held, nothing counted
    assert at.releases(g) == []
    h = tmp_path / "gap"
    _grip(h, [0.47, 0.47, 0.40, 0.20], [1.0, 0.0, 0.0, 0.0], slots=[0, 1, 2, 5])  # ticks missing after it
    assert at.releases(h) == []


def test_gripper_block_in_the_json(tmp_path):
    (tmp_path / "r").mkdir()
    _grip(tmp_path / "r" / "ticks.jsonl", [0.47, 0.47, 0.30, 0.10, 0.05], [1.0, 0.0, 0.0, 0.0, 0.0])
    out = tmp_path / "t.json"
    assert at.main(["--gripper", "--runs", f"bridge={tmp_path}/r", "--out", str(out)]) == 0
    gr = json.loads(out.read_text())["groups"]["bridge"]["gripper"]
    assert gr["open_commands_while_holding"] == 1 and gr["let_go_fraction"] == 1.0
    assert gr["closure_fall_one_tick_later"]["p50"] == pytest.approx(0.17)
