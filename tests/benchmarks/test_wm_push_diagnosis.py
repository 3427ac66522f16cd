"""benchmarks/wm_push_diagnosis.py: oracle slots decode back to positions; behaviour and model checks on a tiny run."""

import json
from dataclasses import replace

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

diag = load_benchmark("wm_push_diagnosis")


def _oracle_states(pos: np.ndarray, seed: int, slot_dim: int = 16) -> np.ndarray:
    """(T, N, 3) positions -> the observer's oracle slots for them (robot, goal, target, distractors)."""
    from world_models.object_env import _CENTER_M, _SCALE_M
    from world_models.observer import Observer

    t, n = pos.shape[:2]
    feats = np.zeros((t, n, 8), np.float32)
    feats[..., :3] = (pos - _CENTER_M) / _SCALE_M
    feats[..., 3 + np.minimum(np.arange(n), 3)] = 1.0
    feats[..., 7] = 1.0
    ob = Observer("oracle", 1, slot_dim=slot_dim, n_entities=n, seed=seed)
    return np.stack([ob.observe([{"oracle": f}], np.ones(1, bool))[0] for f in feats])


def _episode(pos: np.ndarray, seed: int, success: bool):
    from world_models.replay import Episode

    t = len(pos) - 1
    return Episode(states=_oracle_states(pos, seed), actions=np.zeros(t, np.int64), rewards=np.zeros(t, np.float32),
                   policies=np.full((t, 8), 1 / 8, np.float32), root_values=np.zeros(t, np.float32), terminated=success)


def test_oracle_slots_decode_to_the_positions_and_refuse_other_states():
    rng = np.random.default_rng(0)
    pos = np.array([0.53, 0.0, 0.0]) + rng.uniform(-0.15, 0.15, (7, 5, 3))
    states = _oracle_states(pos, seed=3)
    np.testing.assert_allclose(diag.decode_positions(states, 3), pos, atol=1e-5)
    with pytest.raises(ValueError, match="not oracle slots"):
        diag.decode_positions(states, 4)  # another seed's map


def test_behaviour_counts_cube_motion_and_distance_closed():
    seed, t = 1, 6
    still = np.zeros((t + 1, 5, 3)) + np.array([0.53, 0.0, 0.0])
    still[:, 1, :2] = [0.60, 0.05]  # the goal
    still[:, 2, :2] = [0.50, 0.05]  # the target cube, 10 cm from the goal
    pushed = still.copy()
    pushed[4:, 2, 0] = 0.54  # moved 4 cm towards the goal at step 4 (one contact step)
    away = still.copy()
    away[2:, 2, 0] = 0.45  # pushed 5 cm away
    eps = [_episode(still, seed, False), _episode(pushed, seed, True), _episode(away, seed, False)]
    rows = diag.behaviour(eps, seed)
    assert [r["episodes"] for r in rows] == [1, 1, 1]
    first, second, third = rows
    assert first["cube_moved_episodes"] == 0 and first["closed_cm_mean"] == 0 and first["success"] == 0
    assert second["cube_moved_episodes"] == 1 and second["cube_moved_steps"] == pytest.approx(1 / t, abs=1e-3)
    assert second["closed_cm_mean"] == pytest.approx(4.0, abs=0.01) and second["closed_gt_3cm"] == 1
    assert second["success"] == 1 and second["start_distance_cm_median"] == pytest.approx(10.0, abs=0.01)
    assert third["closed_cm_mean"] == pytest.approx(-5.0, abs=0.01) and third["opened_gt_3cm"] == 1


def test_cli_on_a_tiny_oracle_push3_run(tmp_path):
    from world_models.object_env import ObjectTaskConfig
    from world_models.train import Trainer, tiny

    run = tmp_path / "wm"
    cfg = tiny(env=ObjectTaskConfig(task="push3", image_size=32, max_steps=6, distractors=1), env_steps=12,
               model=replace(tiny().model, num_slots=4))
    Trainer(cfg, run, progress=False).run()
    out = tmp_path / "d.json"
    assert diag.main(["--runs", str(run), "--tail", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())["runs"][str(run)]
    assert res["env_steps"] == 12 and sum(r["episodes"] for r in res["behaviour"]) == res["replay_episodes"] == 2
    m = res["model_on_last_episodes"]
    assert m["transitions"] == 12 and 0 <= m["contact_steps"] <= 12
    assert -1 <= m["robot_displacement_cosine_median"] <= 1
    with pytest.raises(SystemExit):  # not an oracle push3 run
        diag.main(["--runs", str(tmp_path), "--out", str(out)])
