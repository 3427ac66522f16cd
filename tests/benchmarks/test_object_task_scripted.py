"""benchmarks/object_task_scripted.py: the scripted policies that bound the object tasks."""

import json

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

ots = load_benchmark("object_task_scripted")
E, N, W = 0, 2, 4  # discrete8: east, north, west


def test_compass_picks_the_nearest_direction():
    assert ots.compass(np.array([1.0, 0.1])) == E
    assert ots.compass(np.array([0.0, 1.0])) == N
    assert ots.compass(np.array([-1.0, -0.2])) == W


def test_pusher_goes_around_then_lines_up_then_pushes():
    red, goal = np.array([0.5, 0.0]), np.array([0.7, 0.0])  # the goal lies east of the cube
    kw = dict(back=0.06, side_tol=0.02, clear=0.065)
    # on the goal side, on the line: step sideways (north or south), never west through the cube
    assert ots.push_action(np.array([0.6, 0.0]), red, goal, **kw) in (N, 6)
    # behind the cube, on the line: push towards the goal
    assert ots.push_action(np.array([0.44, 0.005]), red, goal, **kw) == E
    # behind but off the line: move back onto it (south-east / south, not east)
    assert ots.push_action(np.array([0.42, 0.05]), red, goal, **kw) in (6, 7)


def test_reach3_run_writes_json(tmp_path):
    out = tmp_path / "r.json"
    assert ots.main(["--tasks", "reach3", "--episodes", "2", "--constant-select-episodes", "0", "--out", str(out)]) == 0
    r = json.loads(out.read_text())["tasks"]["reach3"]
    assert r["episodes"] == 2 and len(r["per_episode_success"]) == 2 and "constant_action" not in r
    assert r["successes"] == 2  # the first two seeds of the default block: both reached (measured)
    assert all(s <= r["max_steps"] for s in r["per_episode_steps"])


def test_push3_episodes_are_solved(tmp_path):
    out = tmp_path / "p.json"
    assert ots.main(["--tasks", "push3", "--episodes", "2", "--constant-select-episodes", "0", "--out", str(out)]) == 0
    r = json.loads(out.read_text())["tasks"]["push3"]
    assert r["successes"] == 2  # the first two seeds of the default block (measured: solved in < 60 steps)
    assert all(s < r["max_steps"] for s in r["per_episode_steps"])


def test_pusher_takes_the_detour_waypoint_when_far_to_the_side():
    red, goal = np.array([0.5, 0.0]), np.array([0.7, 0.0])
    kw = dict(back=0.06, side_tol=0.02, clear=0.065)
    # on the goal side, 10 cm to the north (clear of the cube): head for the corner behind-north, west
    assert ots.push_action(np.array([0.6, 0.1]), red, goal, **kw) == W
    # on the goal side, 3 cm to the north (too close to pass): step further north first
    assert ots.push_action(np.array([0.6, 0.03]), red, goal, **kw) == N


def test_bad_settings_are_refused():
    with pytest.raises(ots.EdgeError, match="--side-tol"):
        ots.main(["--side-tol", "0.5"])


def test_best_constant_action_is_picked_on_its_own_seeds_and_played_on_the_evaluation_seeds(tmp_path):
    out = tmp_path / "c.json"
    assert ots.main(["--tasks", "reach3", "--episodes", "3", "--constant-select-episodes", "2",
                     "--out", str(out)]) == 0
    c = json.loads(out.read_text())["tasks"]["reach3"]["constant_action"]
    sel = c["select_success_per_action"]
    assert len(sel) == 8 and c["best_action"] == int(np.argmax(sel))
    assert c["select_seed0"] == 611_000_000 and c["seed0"] == 610_000_000 and c["episodes"] == 3
    assert c["successes"] == sum(c["per_episode_success"])
    # measured on these seeds: some direction reaches a cube, none reaches every one
    assert 0 < max(sel) < 1


def test_constant_action_seed_blocks_must_not_overlap():
    with pytest.raises(ots.EdgeError, match="--select-seed0"):
        ots.main(["--episodes", "10", "--select-seed0", "610000005"])
    with pytest.raises(ots.EdgeError, match="--constant-select-episodes"):
        ots.main(["--constant-select-episodes", "-1"])
