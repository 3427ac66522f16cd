"""benchmarks/wm_value_probe.py and sim_search.probe_leaf_values: one step of search with a learned value."""

import json

import numpy as np
import pytest

from edge.errors import EdgeError
from tests.benchmarks._load import load_benchmark

wvp = load_benchmark("wm_value_probe")


def _rows(rewards: np.ndarray, values: np.ndarray, actions, success=None) -> list[dict]:
    success = np.zeros(rewards.shape, bool) if success is None else success
    return [{"reward": r, "value": v, "success": s, "action": a} for r, v, s, a in zip(rewards, values, success, actions)]


def test_summary_reads_a_cancelling_value_a_zero_value_and_a_noisy_one():
    rng = np.random.default_rng(0)
    r = rng.normal(0, 0.05, (40, 8))
    best = r.argmax(1)
    g = 0.97
    cancel = wvp.summarise(_rows(r, -r / g + rng.normal(0, 1, (40, 1)), best), g)  # V = −r/γ + a per-state constant
    assert cancel["slope"] == pytest.approx(-1.0) and cancel["q_over_reward"] == pytest.approx(0.0, abs=1e-6)
    assert cancel["slope_median_per_state"] == pytest.approx(-1.0)
    assert cancel["residual_over_reward"] == pytest.approx(0.0, abs=1e-6)
    zero = wvp.summarise(_rows(r, np.zeros_like(r), best), g)
    assert zero["slope"] == 0.0 and zero["q_over_reward"] == 1.0 and zero["agree_scripted_reward_only"] == 1.0
    noisy = wvp.summarise(_rows(r, rng.normal(0, 0.5, r.shape), best), g)
    assert abs(noisy["slope"]) < 1.0 and noisy["residual_over_reward"] > 5 and noisy["agree_scripted_with_value"] < 0.5
    half = wvp.summarise(_rows(r, -0.5 * r / g, best), g)  # half the reward's differences cancelled
    assert half["slope"] == pytest.approx(-0.5) and half["residual_over_signal"] == pytest.approx(0.0, abs=1e-6)
    assert half["q_over_reward"] == pytest.approx(0.5)
    assert wvp.summarise(_rows(np.zeros_like(r), r, best), g) == {"states": 40, "slope": None}  # no reward differences
    # after a success there is no value: γ·V counts 0 for that action
    succ = np.zeros(r.shape, bool)
    succ[:, 0] = True
    ones = wvp.summarise(_rows(np.zeros_like(r) + np.eye(8)[0], np.ones_like(r), best, succ), g)
    assert ones["slope"] == pytest.approx(-g)
    assert wvp.summarise([], g) == {"states": 0}


def test_probe_steps_each_action_from_the_state_and_plays_the_behaviours_episode(tmp_path):
    from world_models.object_env import ObjectTaskEnv
    from world_models.observer import Observer
    from world_models.planner import Planner
    from world_models.policy import load_world_model
    from world_models.scripted import scripted_action
    from world_models.sim_search import probe_leaf_values
    from world_models.train import Trainer, tiny

    Trainer(tiny(obs="oracle"), tmp_path / "wm", progress=False).run()
    cfg, model, _ = load_world_model(tmp_path / "wm")
    obs = Observer.for_run(cfg)
    env, twin = ObjectTaskEnv(cfg.env), ObjectTaskEnv(cfg.env)
    rows = probe_leaf_values(env, 31, Planner(model, cfg.planner), obs, scripted_action)
    twin.reset(seed=31)
    acts = []
    for _ in range(cfg.env.steps):  # the same episode, never probed
        acts.append(scripted_action(twin))
        *_, term, trunc, _ = twin.step(acts[-1])
        if term or trunc:
            break
    assert [x["action"] for x in rows] == acts
    from world_models.planner import History

    planner = Planner(model, cfg.planner)
    for k in (0, len(acts) - 1):  # a probed child is what stepping its action from that state gives, and its
        for a in (0, 5):          # value is the model's on the window the agent would hold after that step
            twin.reset(seed=31)
            hist = History(1, cfg.planner.context, obs.state_shape, obs.dtype)
            o, _ = twin.reset(seed=31)
            hist.reset(0, obs.observe([o], np.ones(1, bool))[0])
            for b in [*acts[:k], a]:
                o, reward, *_ = twin.step(b)
                hist.push(0, b, obs.observe([o], np.zeros(1, bool))[0])
            assert rows[k]["reward"][a] == pytest.approx(reward, abs=1e-12)
            value = planner.root(hist.states, hist.actions, hist.valid).value[0]
            assert rows[k]["value"][a] == pytest.approx(value, rel=1e-5, abs=1e-6)
    assert all(x["value"].shape == (8,) and np.isfinite(x["value"]).all() for x in rows)
    env.close()
    twin.close()
    # the script end to end, and its errors
    out = tmp_path / "probe.json"
    assert wvp.main(["--agents", f"t={tmp_path / 'wm'}", "--episodes", "1", "--seed0", "31", "--out", str(out)]) == 0
    res = json.loads(out.read_text())["agents"]["t"]
    assert res["all"]["states"] == len(rows) == res["contact"]["states"] + res["free"]["states"]
    with pytest.raises(EdgeError, match="twice"):
        wvp.main(["--agents", f"t={tmp_path / 'wm'}", f"t={tmp_path / 'wm'}", "--out", str(out)])
    with pytest.raises(EdgeError, match="--episodes"):
        wvp.main(["--agents", f"t={tmp_path / 'wm'}", "--episodes", "0", "--out", str(out)])
