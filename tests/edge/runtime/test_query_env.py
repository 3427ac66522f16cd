"""QueryEnv on the real runtime path with the shipped VLA: a fixed-plan agent reproduces the episode
runner's per-episode records exactly (the grid's equivalence), and the step accounting adds up."""

import numpy as np
import pytest

from edge.runtime.query_env import CONTEXT_DIM, QueryEnv
from edge.runtime.session import SessionConfig, run_session

CFG = SessionConfig(num_steps=2, execute=8, execution="sync", latency="constant", latency_ms=0.0,
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


def test_noise_from_the_agent_is_used_and_reset_mid_episode_is_clean(env):
    env.reset(seed=100005)
    _, _, _, _, info = env.step({"noise": np.zeros((16, 5), np.float32), "num_steps": 1, "execute": 4})
    assert info["ticks"] == 4 and info["nfe"] == 1 and info["chunk"].shape == (16, 5)
    env.reset(seed=100005)  # aborts the running episode; the next one starts from its first query
    _, _, _, _, info2 = env.step({"noise": np.zeros((16, 5), np.float32), "num_steps": 1, "execute": 4})
    np.testing.assert_array_equal(info["chunk"], info2["chunk"])  # zero noise, K=1: deterministic
