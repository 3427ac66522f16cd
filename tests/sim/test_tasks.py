"""Task definitions: the ``reach`` task is reach3's scene and test in the runtime's env."""

import numpy as np
import pytest

from sim.env import PUSH_Z_M, TabletopEnv
from sim.experts import make_expert
from sim.tasks import REACH_RADIUS_M


def _toward(tcp_xy: np.ndarray, goal_xy: np.ndarray) -> int:
    """The discrete8 move (k · 45°) closest in direction to goal − tcp."""
    ang = np.arctan2(*(goal_xy - tcp_xy)[::-1])
    return int(np.round(ang / (np.pi / 4))) % 8


def test_reach_is_reach3s_scene_and_success_test():
    from world_models.object_env import ObjectTaskConfig, ObjectTaskEnv

    obj = ObjectTaskEnv(ObjectTaskConfig(task="reach3", image_size=32))
    env = TabletopEnv(task="reach", action_mode="discrete8", image_size=48, push_target_color="red",
                      push_distractors=2, max_steps=10000, hold_s=0.0, lazy_images=True)
    try:
        for seed in (5, 6):
            obj.reset(seed=seed)
            _, info = env.reset(seed=seed)
            want = obj.env._info(False)["object_poses"]
            assert info["object_poses"].keys() == want.keys() == {"red", *[o.name for o in env.scene.objects]}
            for k, pose in want.items():  # the same scene, cube for cube
                np.testing.assert_array_equal(info["object_poses"][k], pose)
            assert env.spec_task.name == "reach" and env.spec_task.order == ("red",)
            assert "red" in env.spec_task.instruction
            for t in range(40):  # head for the red cube: both envs judge every step the same
                tcp = env.tcp_pose()[0]
                a = _toward(tcp[:2], np.asarray(env._info(False)["object_poses"]["red"][:2]))
                _, _, s_obj, _, _ = obj.step(a)
                _, _, s_env, _, _ = env.step(a)
                d = np.linalg.norm(env.tcp_pose()[0][:2] - env._info(False)["object_poses"]["red"][:2])
                assert s_env == s_obj == (d < REACH_RADIUS_M), (seed, t, d)
                assert abs(env.tcp_pose()[0][2] - PUSH_Z_M) < 0.02  # the TCP stays in the push plane
                if s_env:
                    break
            assert s_env, f"seed {seed}: heading straight for the cube did not reach it in 40 moves"
            assert t >= 2  # the start is not at the cube: hold_s=0 does not count a step without success
    finally:
        obj.close()
        env.close()


def test_reach_has_no_scripted_expert():
    with pytest.raises(ValueError, match="reach"):
        make_expert("reach")
