"""The scripted expert as a ChunkPolicy (sim.expert_policy) in the runtime loop: it acts exactly as in
its own episode loop (sim.rollout.expert_episode), episode after episode, and refuses the settings it
cannot run with."""

import numpy as np
import pytest

import sim
from edge.contracts import ChunkPolicy
from edge.errors import EdgeError
from edge.runtime.config import RuntimeConfig
from edge.runtime.factories import EXPERT_SETTINGS
from edge.runtime.registry import POLICIES
from edge.runtime.session import build_runtime, run_session
from sim.expert_policy import ExpertPolicy
from sim.rollout import expert_episode


def _cfg(**kw) -> RuntimeConfig:
    return RuntimeConfig.of(**{"policy": "expert", "image_size": 16, "video_episodes": 0, **EXPERT_SETTINGS, **kw})


def test_the_expert_policy_runs_episodes_in_run_session_as_in_its_own_loop(tmp_path):
    policy = ExpertPolicy("stack", image_size=16)
    assert isinstance(policy, ChunkPolicy)
    res = run_session(_cfg(episodes=2, seed=1000), tmp_path / "run", policy=policy, progress=False)
    assert [e["seed"] for e in res.episodes] == [1000, 1001]
    assert policy.episodes == 2 and policy.seed == 1001  # one fresh expert per episode, its seed
    from edge.telemetry import read_jsonl

    ticks = read_jsonl(tmp_path / "run" / "ticks.jsonl")
    env = sim.make_env("stack", image_size=16)
    try:
        for ep in res.episodes:
            own = expert_episode(env, ep["seed"], keep_frames=False)
            sent = np.array([t["sent"] for t in ticks if t["ep"] == ep["ep"]], np.float32)
            assert ep["success"] == own["success"] and ep["steps"] == own["steps"] == len(sent)
            np.testing.assert_array_equal(sent, own["action"])  # no hold tick, nothing altered
            assert ep["nfe"] == ep["queries"] == ep["steps"]
    finally:
        env.close()


def test_the_registry_builds_it_from_the_session():
    policy = POLICIES.resolve("expert")(_cfg(task="pick_place", image_size=24), None)
    assert policy.spec.image_hw == (24, 24) and policy.spec.task == "pick_place"
    assert policy.spec.execution == "sync" and policy.chunk_len == 1
    assert POLICIES.resolve("expert")(_cfg(image_size=0), None).spec.image_hw == (96, 96)


@pytest.mark.parametrize("kw, needle", [
    ({"inference": "thread"}, "inline"),
    ({"inference": "auto", "clock": "real"}, "inline"),
    ({"num_steps": 10}, "num_steps must be 1"),
    ({"execute": 8}, "execute must be 1"),
])
def test_the_factory_refuses_settings_the_expert_cannot_run_with(kw, needle):
    with pytest.raises(EdgeError, match=needle):
        POLICIES.resolve("expert")(_cfg(**kw), None)


def test_build_runtime_refuses_async_and_another_image_size():
    with pytest.raises(EdgeError, match="--query-mode sync"):
        build_runtime(_cfg(execution="async"), None, policy=ExpertPolicy("stack", image_size=16))
    with pytest.raises(EdgeError, match="--image-size 32"):
        build_runtime(_cfg(image_size=32), None, policy=ExpertPolicy("stack", image_size=16))


def test_a_new_scene_restarts_the_expert_with_the_envs_seed():
    policy = ExpertPolicy("stack", image_size=16)
    with pytest.raises(RuntimeError, match="attach_env"):
        policy.encode(None)
    env = sim.make_env("stack", image_size=16)
    try:
        policy.attach_env(env)
        env.reset(seed=3)
        a = policy.sample(policy.encode(None), np.zeros((1, 5), np.float32), 1)
        assert a.shape == (1, 5) and policy.seed == 3 and policy.episodes == 1
        policy.encode(None)
        assert policy.episodes == 1  # same scene: the same expert goes on
        env.reset(seed=4)  # no policy.reset(): the new scene is noticed anyway
        policy.encode(None)
        assert policy.seed == 4 and policy.episodes == 2
        with pytest.raises(ValueError, match="task"):
            ExpertPolicy("push").attach_env(env)
    finally:
        env.close()
