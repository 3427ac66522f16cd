"""benchmarks/wm_push_diagnosis.py: oracle slots decode back to positions; behaviour and model checks on a tiny run."""

import json
from dataclasses import replace

import numpy as np
import pytest

from tests.benchmarks._load import load_benchmark

diag = load_benchmark("wm_push_diagnosis")


def _oracle_states(pos: np.ndarray, seed: int, slot_dim: int = 16, control: bool = False) -> np.ndarray:
    """(T, N, 3) positions -> the observer's oracle slots for them (robot, goal, target, distractors)."""
    from world_models.object_env import _CENTER_M, _SCALE_M
    from world_models.observer import Observer

    t, n = pos.shape[:2]
    feats = np.zeros((t, n, 12 if control else 8), np.float32)
    if control:
        feats[..., 8:] = np.random.default_rng(seed).uniform(-1, 1, (t, n, 4))
    feats[..., :3] = (pos - _CENTER_M) / _SCALE_M
    feats[..., 3 + np.minimum(np.arange(n), 3)] = 1.0
    feats[..., 7] = 1.0
    ob = Observer("oracle", 1, slot_dim=slot_dim, n_entities=n, seed=seed, oracle_features=feats.shape[-1])
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
    wide = _oracle_states(pos, seed=3, control=True)  # 4 more features (oracle_state="control")
    np.testing.assert_allclose(diag.decode_positions(wide, 3, features=12), pos, atol=1e-5)


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


def test_model_checks_on_a_model_that_knows_the_pushes(monkeypatch):
    """A stand-in model that moves the robot and the cube 1 cm along the action's direction, on
    episodes where the cube is pushed exactly so at two steps (one sideways to the goal, one
    towards it): cosine 1, length ratio 1, steps and goal-distance changes as constructed."""
    from types import SimpleNamespace

    import torch

    import world_models.policy as wp
    from world_models.object_env import _SCALE_M

    seed, dim = 2, 16
    proj = np.random.default_rng(seed + 7919).standard_normal((8, dim)) / np.sqrt(8)
    dirs = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [1, -1], [-1, 1], [-1, -1]]) / 1.0
    dirs = dirs / np.linalg.norm(dirs, axis=1, keepdims=True)

    def moved(step_m: np.ndarray, entities: tuple) -> np.ndarray:  # (A, N, dim) slot change for those entities
        out = np.zeros((len(step_m), 5, dim))
        for k in entities:
            out[:, k] = (np.c_[step_m, np.zeros(len(step_m))] / _SCALE_M) @ proj[:3]
        return out

    class Model:
        support = SimpleNamespace(decode=lambda x: x)

        def __call__(self, win, act, val, heads="none", branch=True):
            last = win[0, -1].numpy()  # (N, dim)
            nxt = last[None] + moved(0.01 * dirs, (0, 2))
            d_now = np.linalg.norm(diag.decode_positions(last[None], seed, check=False)[0, 2, :2] - goal)
            d_next = np.linalg.norm(diag.decode_positions(nxt, seed, check=False)[:, 2, :2] - goal, axis=1)
            return {"branch_next_z": torch.as_tensor(nxt[None], dtype=torch.float32),
                    "branch_reward_logits": torch.as_tensor(10 * (d_now - d_next))[None]}

    goal = np.array([0.60, 0.0])
    actions = [0, 0, 1, 0, 2, 2]  # the cube is pushed at steps 2 (+y: sideways) and 3 (+x: towards the goal)
    pos = np.zeros((7, 5, 3)) + np.array([0.53, 0.0, 0.0])
    pos[:, 1, :2] = goal
    pos[:, 2, :2] = [0.50, 0.0]
    pos[:, 3:, :2] = [0.45, 0.1]
    for t, a in enumerate(actions):
        pos[t + 1, 0, :2] = pos[t, 0, :2] + 0.01 * dirs[a]
        pos[t + 1, 2, :2] = pos[t, 2, :2] + (0.01 * dirs[a] if t in (2, 3) else 0)
    ep = _episode(pos, seed, False)
    ep.actions[:] = actions
    d = np.linalg.norm(pos[:, 2, :2] - goal, axis=1)
    ep.rewards[:] = 10 * (d[:-1] - d[1:])
    monkeypatch.setattr(wp, "load_world_model", lambda path: (SimpleNamespace(planner=SimpleNamespace(context=2)),
                                                              Model(), {}))
    m = diag.model_checks(None, [ep, ep], seed)
    assert m["transitions"] == 12 and m["contact_steps"] == 4
    assert m["cube_displacement_cosine_median_at_contact"] == pytest.approx(1.0, abs=1e-3)
    assert m["cube_displacement_length_ratio_median_at_contact"] == pytest.approx(1.0, abs=1e-3)
    assert m["robot_displacement_cosine_median"] == pytest.approx(1.0, abs=1e-3)
    assert m["cube_step_cm_median_at_contact"] == pytest.approx(1.0, abs=1e-3)
    assert m["tcp_step_cm_median"] == pytest.approx(1.0, abs=1e-3)
    towards = 100 * (d[3] - d[4])  # the push towards the goal (1 cm off its line): almost 1 cm closer
    sideways = 100 * (d[2] - d[3])  # the sideways push: a little further away
    assert 0.99 < towards < 1.0 and -0.1 < sideways < 0
    assert m["closer_to_goal_cm_median_at_contact"] == pytest.approx((towards + sideways) / 2, abs=1e-3)
    assert m["abs_closer_over_step_median_at_contact"] == pytest.approx((towards + abs(sideways)) / 2, abs=1e-3)
    assert m["goal_distance_change_corr_at_contact"] == pytest.approx(1.0, abs=1e-3)
    assert m["reward_corr_at_contact"] == pytest.approx(1.0, abs=1e-3)
    assert m["reward_abs_error_at_contact"] == pytest.approx(0.0, abs=1e-4)
    assert m["goal_distance_spread_across_actions_cm_median"]["contact"] > 1.0  # the action decides where it goes


def test_every_run_is_checked_before_the_first_is_analysed(tmp_path, capsys):
    from world_models.train import STATE_FILE

    runs = []
    for name, obs, task in (("good", "oracle", "push3"), ("bad", "slots", "reach3")):
        d = tmp_path / name
        d.mkdir()
        (d / STATE_FILE).write_bytes(b"")  # never loaded: the bad run is refused first
        (d / "manifest.json").write_text(json.dumps({"config": {"obs": obs, "env": {"task": task}}}))
        runs.append(str(d))
    with pytest.raises(SystemExit) as e:
        diag.main(["--runs", *runs, "--out", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"--runs {runs[1]}: obs=slots, task=reach3" in err and "Traceback" not in err
    assert not (tmp_path / "out.json").exists()
