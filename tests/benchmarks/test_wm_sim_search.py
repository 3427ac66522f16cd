"""benchmarks/wm_sim_search.py: arms of search with the simulator, paired per task."""

import json

import pytest

from edge.errors import EdgeError
from tests.benchmarks._load import load_benchmark

wss = load_benchmark("wm_sim_search")


@pytest.mark.parametrize("spec, words", [
    ("push3:gumbel", "TASK:SEARCH:SIMULATIONS"),
    ("lift:gumbel:16", "'lift'"),
    ("push3:beam:16", "'beam'"),
    ("push3:gumbel:x", "integers"),
    ("push3:gumbel:0", "simulations=0"),
    ("push3:gumbel:16:0", "episodes=0"),
])
def test_bad_arms_name_the_spec(spec, words):
    with pytest.raises(EdgeError, match="--arms") as e:
        wss.parse_arm(spec, 10)
    assert words in str(e.value)


def test_arms_run_and_pair_on_common_seeds(tmp_path):
    out = tmp_path / "s.json"
    assert wss.main(["--arms", "reach3:gumbel:2:2", "reach3:muzero:2:3", "--seed0", "800000001",
                     "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    a, b = r["arms"]
    assert (a["episodes"], b["episodes"]) == (2, 3)
    assert a["per_episode_seed"] == [800000001, 800000002] and b["per_episode_seed"][:2] == a["per_episode_seed"]
    assert a["search_sim_steps_per_decision"] == 2.0
    (p,) = r["pairs"]
    assert p["episodes"] == 2 and p["successes_a"] == sum(a["per_episode_success"])
    assert p["successes_b"] == sum(b["per_episode_success"][:2])


def test_an_arm_named_twice_is_refused(tmp_path):
    with pytest.raises(EdgeError, match="twice"):
        wss.main(["--arms", "reach3:gumbel:2:1", "reach3:gumbel:2:1", "--out", str(tmp_path / "x.json")])


def test_an_agent_trained_with_other_task_settings_is_refused(tmp_path):
    from world_models.train import Trainer, tiny

    Trainer(tiny(obs="oracle"), tmp_path / "wm", progress=False).run()
    with pytest.raises(EdgeError, match="task settings") as e:
        wss.parse_agent(f"t={tmp_path / 'wm'}")
    assert "distractors" in str(e.value) and "image_size" in str(e.value)
    assert "'oracle_state'" not in str(e.value)  # not among the differing settings


def test_an_agent_that_sees_the_control_features_pairs_with_the_simulator_arms(tmp_path, monkeypatch):
    from world_models.object_env import ObjectTaskConfig
    from world_models.train import tiny

    cfg = tiny(obs="oracle", env=ObjectTaskConfig(task="push3", oracle_state="control"))
    monkeypatch.setattr("world_models.policy.load_world_model", lambda path: (cfg, None, None))
    assert wss.parse_agent("c=some/run")["task"] == "push3"  # what the agent sees may differ
    other = tiny(obs="oracle", env=ObjectTaskConfig(task="push3", oracle_state="control", hold_s=0.2))
    monkeypatch.setattr("world_models.policy.load_world_model", lambda path: (other, None, None))
    with pytest.raises(EdgeError, match="hold_s"):  # what the task is may not
        wss.parse_agent("c=some/run")


def test_unknown_cells_are_refused(tmp_path):
    with pytest.raises(EdgeError, match="--cells both"):
        wss.main(["--arms", "reach3:gumbel:2:1", "--cells", "agent", "both", "--out", str(tmp_path / "x.json")])


def _arm(name: str, seeds: list[int], success: list[bool]) -> dict:
    return {"name": name, "task": "push3", "episodes": len(seeds), "per_episode_seed": seeds,
            "per_episode_success": success}


def test_pools_pair_two_seeds_against_two_and_runs_merge(tmp_path):
    s = [1, 2, 3, 4]
    arms = [_arm("push3:m_s0:agent", s, [True, True, False, False]), _arm("push3:m_s1:agent", s, [True, False, True, False]),
            _arm("push3:c_s0:agent", s, [False, True, False, False]), _arm("push3:c_s1:agent", s, [False, False, False, False])]
    (p,) = wss.pool_pairs(arms, ["push3:m_s0:agent+push3:m_s1:agent:push3:c_s0:agent+push3:c_s1:agent"])
    assert (p["episodes"], p["successes_a"], p["successes_b"], p["only_a"], p["only_b"]) == (8, 4, 1, 3, 0)
    assert p["a"] == "push3:m_s0:agent+push3:m_s1:agent"
    for bad in ("push3:m_s0:agent", "push3:m_s0:agent+push3:m_s1:agent:push3:c_s0:agent", "x:y"):
        with pytest.raises(EdgeError, match="--pool"):
            wss.pool_pairs(arms, [bad])
    # two runs' files merged: their arms pair across the files
    files = []
    for i, part in enumerate((arms[:2], arms[2:])):
        f = tmp_path / f"r{i}.json"
        f.write_text(json.dumps({"settings": {"seed0": 1}, "git": {}, "command": "c", "wall_s": 1.0, "arms": part}))
        files.append(f)
    out = tmp_path / "m.json"
    assert wss.main(["--merge", *map(str, files), "--out", str(out), "--pool",
                     "push3:m_s0:agent+push3:m_s1:agent:push3:c_s0:agent+push3:c_s1:agent"]) == 0
    m = json.loads(out.read_text())
    assert len(m["arms"]) == 4 and len(m["pairs"]) == 6 and m["pools"][0]["only_a"] == 3
    assert set(m["merged_from"]) == {str(f) for f in files}
    # an arm in two files (a deterministic control rerun): kept once if it played alike, refused otherwise
    again = tmp_path / "again.json"
    again.write_text(json.dumps({"settings": {"seed0": 1}, "git": {}, "command": "c", "wall_s": 1.0,
                                 "arms": [arms[0], _arm("push3:n_s0:agent", s, [True] * 4)]}))
    assert wss.main(["--merge", *map(str, files), str(again), "--out", str(out)]) == 0
    m = json.loads(out.read_text())
    assert [a["name"] for a in m["arms"]][-1] == "push3:n_s0:agent" and len(m["arms"]) == 5
    assert m["reproduced"] == [{"arm": "push3:m_s0:agent", "file": str(again), "episodes": 4}]
    again.write_text(json.dumps({"settings": {"seed0": 1}, "git": {}, "command": "c", "wall_s": 1.0,
                                 "arms": [_arm("push3:m_s0:agent", s, [False] * 4)]}))
    with pytest.raises(EdgeError, match="push3:m_s0:agent in .* differs .*per_episode_success"):
        wss.main(["--merge", *map(str, files), str(again), "--out", str(out)])
    other_agent = {**arms[0], "agent": "runs/another"}  # the same name and outcomes, another agent
    again.write_text(json.dumps({"settings": {"seed0": 1}, "git": {}, "command": "c", "wall_s": 1.0,
                                 "arms": [other_agent]}))
    with pytest.raises(EdgeError, match=r"earlier file \(agent\)"):
        wss.main(["--merge", *map(str, files), str(again), "--out", str(out)])
    other = tmp_path / "o.json"
    other.write_text(json.dumps({"settings": {"seed0": 2}, "git": {}, "command": "c", "wall_s": 1.0, "arms": []}))
    with pytest.raises(EdgeError, match="different seeds"):
        wss.main(["--merge", str(files[0]), str(other), "--out", str(out)])
    with pytest.raises(EdgeError, match="--pool"):  # checked before anything is played
        wss.main(["--arms", "reach3:gumbel:2:1", "--pool", "a:b", "--out", str(out)])
