"""world_models/sim_search.py: tree search with the simulator as the model."""

import numpy as np
import pytest

from world_models import mcts
from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv
from world_models.planner import PlannerConfig
from world_models.sim_search import SimulatorModel, play_episode, search


class Chain:
    """A line of cells: action 0 steps right (+0.1), any other stays (−0.1); cell 3 is the goal (+1)."""

    def __init__(self) -> None:
        self.x, self.calls = 0, 0

    def snapshot(self) -> dict:
        return {"x": self.x}

    def restore(self, snap: dict) -> None:
        self.x = snap["x"]

    def simulate(self, action: int) -> tuple[float, bool]:
        self.calls += 1
        if action == 0:
            self.x += 1
            return (1.0 if self.x == 3 else 0.1), self.x == 3
        return -0.1, False


def test_search_with_a_known_model_finds_the_rewarding_action_and_leaves_the_env_as_found():
    chains = [Chain(), Chain()]
    chains[1].x = 2
    model = SimulatorModel(chains, gamma=0.9)
    for s in ("muzero", "gumbel"):
        out = search(model, PlannerConfig(search=s, num_simulations=24), np.random.default_rng(0))
        np.testing.assert_array_equal(out.action, [0, 0])
        assert [c.x for c in chains] == [0, 2]  # released: back at the root state
    # the root values: one step right then the zero leaf value (0.1), and the goal in one step (1.0)
    assert out.q_values[1, 0] == pytest.approx(1.0)
    assert out.q_values[0, 0] >= 0.1


def test_a_terminal_child_is_absorbing_and_the_simulator_is_not_stepped_below_it():
    c = Chain()
    c.x = 2
    model = SimulatorModel([c], gamma=0.9)
    model.root()
    out, child = model.recurrent(np.zeros(1, np.int64), np.zeros(1, np.int64))
    assert out.reward[0] == 1.0 and out.discount[0] == 0.0 and c.calls == 1
    out2, child2 = model.recurrent(child, np.zeros(1, np.int64))
    assert out2.reward[0] == 0.0 and out2.discount[0] == 0.0 and c.calls == 1 and child2[0] == child[0]
    model.release()
    assert c.x == 2


def test_expanding_a_child_equals_stepping_an_env_that_never_restored():
    env, twin = (ObjectTaskEnv(ObjectTaskConfig(task="push3", image_size=32)) for _ in range(2))
    for e in (env, twin):
        e.reset(seed=11)
        for a in (0, 0, 1):
            e.step(a)
    model = SimulatorModel([env])
    root = model.root()
    assert isinstance(root, mcts.RootFnOutput)
    out, child = model.recurrent(root.embedding, np.array([7]))
    out2, _ = model.recurrent(child, np.array([7]))  # and one more step below it
    snap = model._store[0][-1][0]
    model.release()
    rewards = [twin.step(7)[1], twin.step(7)[1]]
    assert [out.reward[0], out2.reward[0]] == rewards
    assert out.discount[0] == out2.discount[0] == 0.97
    env.restore(snap)  # the deepest node's state is the twin's, to the bit
    np.testing.assert_array_equal(env.oracle_now(), twin.oracle_now())
    assert env.t == twin.t == 5
    for e in (env, twin):
        e.close()


def test_reach3_is_solved_by_search_with_the_simulator():
    env = ObjectTaskEnv(ObjectTaskConfig(task="reach3"))
    r = play_episode(env, 800_000_001, PlannerConfig(search="gumbel", num_simulations=16, max_considered=8))
    env.close()
    assert r["success"] and r["steps"] <= 10  # measured: 5 steps
    assert len(r["decide_s"]) == r["steps"]
    assert 0.5 * 16 * r["steps"] < r["search_sim_steps"] <= 16 * r["steps"]  # none below a success
    assert max(r["max_depth"]) >= 2


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="at least one env"):
        SimulatorModel([])
    with pytest.raises(ValueError, match="gamma"):
        SimulatorModel([Chain()], gamma=0.0)


def test_an_agent_and_its_halves_play_from_the_same_seeds(tmp_path):
    from world_models.observer import Observer
    from world_models.planner import Planner
    from world_models.policy import load_world_model
    from world_models.planner import History
    from world_models.sim_search import CELLS, LearnedLeaves, MaskedLeaves, play_agent_episodes
    from world_models.train import Trainer, tiny

    tr = Trainer(tiny(obs="oracle"), tmp_path / "wm", progress=False)
    tr.run()
    cfg, model, _ = load_world_model(tmp_path / "wm")
    planner = Planner(model, cfg.planner)
    obs = Observer.for_run(cfg)
    seeds = [123, 124, 125]
    envs = [ObjectTaskEnv(cfg.env) for _ in seeds]
    runs = {c: play_agent_episodes(envs, seeds, planner, obs, c) for c in CELLS}
    ref = tr.evaluate([ObjectTaskEnv(cfg.env)], 3, seed0=123)  # the trained agent's own evaluation
    # the agent cell is the agent as its own evaluation plays it, episode by episode
    assert [round(r["return"], 6) for r in runs["agent"]] == ref["per_episode_return"]
    assert [r["success"] for r in runs["agent"]] == ref["per_episode"]
    assert all(r["search_sim_steps"] > 0 for c in CELLS if c.startswith("simulator") for r in runs[c])
    assert all(r["search_sim_steps"] == 0 for r in runs["learned_dynamics"])
    assert all(len(r["decide_s"]) == r["steps"] <= cfg.env.steps for c in CELLS for r in runs[c])
    with pytest.raises(ValueError, match="cell"):
        play_agent_episodes(envs, seeds, planner, obs, "both")
    # a node's window over the simulator is what the agent's history holds after the same step
    leaves, env = LearnedLeaves(planner, obs), envs[0]
    first, _ = env.reset(seed=7)
    hist = History(1, cfg.planner.context, obs.state_shape, obs.dtype)
    hist.reset(0, obs.observe([first], np.ones(1, bool))[0])
    for a in (3, 1, 4, 1, 5):  # more steps than the window holds
        win = (hist.states[0].copy(), hist.actions[0].copy(), hist.valid[0].copy())
        snap = env.snapshot()
        env.simulate(a)
        child = leaves.child(win, a, env)
        env.restore(snap)
        o, *_ = env.step(a)
        hist.push(0, a, obs.observe([o], np.zeros(1, bool))[0])
        for k in range(3):
            np.testing.assert_array_equal(child[k], (hist.states[0], hist.actions[0], hist.valid[0])[k])
        prior, value = leaves.evaluate([child])
        root = planner.root(hist.states, hist.actions, hist.valid)
        np.testing.assert_allclose(prior, root.prior_logits, rtol=1e-6)
        np.testing.assert_allclose(value, root.value, rtol=1e-6)
        p_only, v_only = LearnedLeaves(planner, obs, value=False), LearnedLeaves(planner, obs, prior=False)
        assert (p_only.evaluate([child])[1] == 0).all() and (v_only.evaluate([child])[0] == 0).all()
        np.testing.assert_allclose(p_only.evaluate([child])[0], prior, rtol=1e-6)
        np.testing.assert_allclose(v_only.evaluate([child])[1], value, rtol=1e-6)
    assert hist.valid[0].all()
    with pytest.raises(ValueError, match="neither"):
        LearnedLeaves(planner, obs, prior=False, value=False)
    # the learned dynamics with only the value (uniform prior) or only the prior (value 0)
    r0 = planner.root(hist.states, hist.actions, hist.valid)
    o0, _ = planner.recurrent(r0.embedding, np.array([2]))
    for keep_prior, keep_value in ((False, True), (True, False)):
        m = MaskedLeaves(planner, prior=keep_prior, value=keep_value)
        r1 = m.root(hist.states, hist.actions, hist.valid)
        o1, _ = m.recurrent(r1.embedding, np.array([2]))
        assert o1.reward == o0.reward and o1.discount == o0.discount
        for got, ref, keep in ((r1.prior_logits, r0.prior_logits, keep_prior), (r1.value, r0.value, keep_value),
                               (o1.prior_logits, o0.prior_logits, keep_prior), (o1.value, o0.value, keep_value)):
            np.testing.assert_array_equal(got, ref if keep else np.zeros_like(ref))
    assert np.abs(r0.prior_logits).max() > 0 and np.abs(o0.value).max() > 0  # so the masks are seen
    for e in envs:
        e.close()
