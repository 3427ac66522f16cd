"""The scripted experts solve their tasks and label phases (a few seeds; the 100-seed figures come
from `edge expert eval`, see README)."""

import numpy as np
import pytest

import sim
from sim.experts import PHASES
from sim.rollout import expert_episode


@pytest.mark.parametrize("task", ["stack", "pick_place"])
def test_expert_succeeds_and_labels_phases(task):
    env = sim.make_env(task, render_images=False, image_size=32)
    results = [expert_episode(env, seed, keep_frames=False) for seed in range(3)]
    assert sum(r["success"] for r in results) >= 2
    phases = {PHASES[p] for r in results for p in r["phase"]}
    assert {"transport", "approach", "grasp", "lift", "place", "release"} <= phases


def test_expert_is_varied_across_seeds():
    env = sim.make_env("stack", render_images=False, image_size=32)
    speeds = [np.abs(expert_episode(env, s, keep_frames=False)["action"][:, :3]).max() for s in range(4)]
    assert np.ptp(speeds) > 0.002  # different speed profiles


def test_same_seed_same_demo():
    env = sim.make_env("pick_place", render_images=False, image_size=32)
    a = expert_episode(env, 11, keep_frames=False)
    b = expert_episode(env, 11, keep_frames=False)
    np.testing.assert_array_equal(a["action"], b["action"])


def test_dart_noise_perturbs_execution_but_records_the_clean_expert_action():
    from sim.rollout import NOISY_PHASES

    env = sim.make_env("stack", render_images=False, image_size=32)
    executed = []
    step = env.step

    def spy(action):
        executed.append(np.array(action, np.float32))
        return step(action)

    env.step = spy
    ep = expert_episode(env, 3, keep_frames=False, action_noise_m=0.01)
    assert 0 < ep["action_noise_std_m"] <= 0.01
    executed = np.stack(executed)
    diff = np.abs(executed - ep["action"]).max(axis=1)
    noisy = np.isin(ep["phase"], list(NOISY_PHASES))
    assert (diff[noisy] > 0).mean() > 0.9  # perturbed where noise is injected ...
    assert (diff[~noisy] == 0).all()  # ... and never while grasping/placing/releasing
    assert np.abs(executed[:, 3:] - ep["action"][:, 3:]).max() == 0  # yaw and gripper untouched
    env.step = step
    again = expert_episode(env, 3, keep_frames=False, action_noise_m=0.01)
    np.testing.assert_array_equal(again["action"], ep["action"])  # seeded
    with pytest.raises(ValueError, match="action_noise_m"):
        expert_episode(env, 3, keep_frames=False, action_noise_m=0.5)
