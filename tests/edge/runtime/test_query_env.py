"""QueryEnv on the real runtime path with the shipped VLA: a fixed-plan agent reproduces the episode
runner's per-episode records exactly (the grid's equivalence), and the step accounting adds up."""

import numpy as np
import pytest

from edge.runtime.config import RuntimeConfig
from edge.runtime.query_env import CONTEXT_DIM, QueryEnv
from edge.runtime.session import run_session

CFG = RuntimeConfig.of(num_steps=2, execute=8, execution="sync", latency="constant", latency_ms=0.0,
                    episodes=2, seed=100000, record_ticks=False, video_episodes=0)


@pytest.fixture(scope="module")
def env():
    e = QueryEnv(CFG)
    yield e
    e.close()


def test_fixed_plan_agent_equals_the_episode_runner(env):
    ref = run_session(CFG, None, progress=False).episodes
    got = []
    for _ in range(2):
        obs, info = env.reset()
        assert obs["features"].shape == (128,) and obs["context"].shape == (CONTEXT_DIM,)
        done, nfe, executed, reward = False, 0, 0, 0.0
        while not done:
            obs, r, term, trunc, info = env.step({"noise": None, "num_steps": 2, "execute": 8})
            nfe, executed, reward = nfe + info["nfe"], executed + info["executed"], reward + r
            done = term or trunc
        ep = info["episode"]
        assert (nfe, executed) == (ep["nfe"], ep["executed"])
        assert reward == float(ep["success"]) and term == ep["success"]
        got.append({k: ep[k] for k in ("seed", "success", "steps", "nfe", "executed")})
    assert got == [{k: e[k] for k in ("seed", "success", "steps", "nfe", "executed")} for e in ref]


def test_noise_from_the_agent_is_used_and_reset_mid_episode_is_clean(env, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="edge.loop")
    env.reset(seed=100005)
    _, _, _, _, info = env.step({"noise": np.zeros((16, 5), np.float32), "num_steps": 1, "execute": 4})
    assert info["ticks"] == 4 and info["nfe"] == 1 and info["chunk"].shape == (16, 5)
    env.reset(seed=100005)  # aborts the running episode; the next one starts from its first query
    _, _, _, _, info2 = env.step({"noise": np.zeros((16, 5), np.float32), "num_steps": 1, "execute": 4})
    np.testing.assert_array_equal(info["chunk"], info2["chunk"])  # zero noise, K=1: deterministic
    # the abort stops the arm like a failed query but is not reported as an error
    stops = [r for r in caplog.records if "control loop stopping" in r.getMessage()]
    assert stops and all(r.levelno == logging.INFO and "ended by its owner" in r.getMessage() for r in stops)


def test_latency_drawn_per_episode_reaches_the_context_and_the_episode():
    """reset(options={"latency_ms": x}) charges x per query from that episode on: the context's
    delay (ceil(p95 / period) / H) reads 6 ticks at 300 ms after the first measurement and 0 again
    after a reset to 0 ms; the same seed at 0 ms reproduces itself after a 300 ms episode."""
    cfg = RuntimeConfig.of(execution="async", latency="constant", latency_ms=0.0, seed=100000,
                        record_ticks=False, video_episodes=0)
    env = QueryEnv(cfg)
    try:
        def episode(lat):
            obs, _ = env.reset(seed=100000, options={"latency_ms": lat})
            delays, done = [], False
            while not done:
                delays.append(round(float(obs["context"][3]) * env.chunk_len))
                obs, _, term, trunc, info = env.step({"noise": np.zeros((16, 5), np.float32), "num_steps": 2,
                                                      "execute": 16})
                done = term or trunc
            return delays, info["episode"]

        d0, e0 = episode(0.0)
        d300, e300 = episode(300.0)
        d0b, e0b = episode(0.0)
        assert set(d0) == {0} and d300[0] == 0 and set(d300[1:]) == {6}
        assert e300["queries"] > e0["queries"]  # 6 of every 16 actions expire in flight
        assert (d0b, e0b["steps"], e0b["success"]) == (d0, e0["steps"], e0["success"])
        with pytest.raises(ValueError, match="latency_ms=-1"):
            env.set_latency_ms(-1.0)
    finally:
        env.close()
    sync = QueryEnv(CFG)
    try:
        with pytest.raises(ValueError, match="needs execution='async'"):
            sync.reset(options={"latency_ms": 100.0})
    finally:
        sync.close()


def test_a_dict_action_needs_whole_k_and_c():
    import numpy as np

    from edge.runtime.query_env import as_plan

    plan = as_plan({"num_steps": np.int64(2), "execute": 8.0}, 16)
    assert (plan.num_steps, plan.execute, plan.next_query_in_steps) == (2, 8, 8)
    for bad, said in (({"num_steps": 2.5, "execute": 8}, "num_steps=2.5"), ({"num_steps": 2}, "lacks execute"),
                      ({"num_steps": 2, "execute": 8, "next_query_in_steps": 3.5}, "next_query_in_steps=3.5"),
                      ({"num_steps": 2, "execute": 8, "foo": 1}, "unknown action key 'foo'")):
        with pytest.raises(ValueError, match=said):
            as_plan(bad, 16)
    with pytest.raises(TypeError, match="QueryPlan or a dict"):
        as_plan("K=2", 16)
