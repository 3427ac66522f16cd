"""The object tasks: scene, oracle layout, shaped reward, success, errors."""

import numpy as np
import pytest

from world_models.object_env import (
    ORACLE_LAYOUT,
    REACH_RADIUS_M,
    ObjectTaskConfig,
    ObjectTaskEnv,
)
from world_models.observer import Observer


def test_push3_scene_has_a_red_target_and_two_distractors():
    env = ObjectTaskEnv(ObjectTaskConfig(task="push3", image_size=32, segmentation=True))
    obs, _ = env.reset(seed=5)
    objs = env.env.scene.objects
    assert objs[0].name == "red" and not objs[0].distractor
    assert sum(o.distractor for o in objs) == 2 and "red" not in [o.name for o in objs[1:]]
    assert obs["frame"].shape == (32, 32, 3) and obs["seg"].shape == (32, 32)
    orc = obs["oracle"]
    assert orc.shape == (5, len(ORACLE_LAYOUT))
    assert orc[:, 3:7].argmax(1).tolist() == [0, 1, 2, 3, 3]  # robot, goal, target, distractors
    env.close()


def test_reach3_shaping_sums_to_potential_difference_and_success_ends():
    env = ObjectTaskEnv(ObjectTaskConfig(task="reach3", image_size=16, max_steps=40))
    _, info = env.reset(seed=2)
    phi0 = env._potential
    total = 0.0
    for _ in range(40):  # greedy: move toward the red cube along the best of the 8 directions
        d = info["object_poses"]["red"][:2] - env._tcp()[:2]
        a = int(np.round(np.arctan2(d[1], d[0]) / (np.pi / 4))) % 8
        _, r, term, trunc, info = env.step(a)
        total += r
        if term or trunc:
            break
    assert term and info["success"]
    assert np.linalg.norm(env._tcp()[:2] - info["object_poses"]["red"][:2]) < REACH_RADIUS_M
    assert total == pytest.approx(1.0 + env._potential - phi0, abs=1e-6)
    env.close()


def test_truncation_and_bad_action():
    env = ObjectTaskEnv(ObjectTaskConfig(task="push3", image_size=16, max_steps=3))
    env.reset(seed=0)
    for t in range(3):
        *_, term, trunc, _ = env.step(4)
    assert trunc and not term
    with pytest.raises(ValueError, match="action"):
        env.step(8)
    env.close()


def test_behind_shaping_pulls_the_tcp_to_the_pushing_point():
    from world_models.object_env import BEHIND_M

    envs = {a: ObjectTaskEnv(ObjectTaskConfig(task="push3", image_size=16, approach=a)) for a in ("cube", "behind")}
    infos = {a: e.reset(seed=5)[1] for a, e in envs.items()}
    e, info = envs["behind"], infos["behind"]
    red, goal, tcp = info["object_poses"]["red"][:2], info["goal_m"], e._tcp()[:2]
    u = (goal - red) / np.linalg.norm(goal - red)
    d_goal = np.linalg.norm(goal - red)
    assert e._potential == pytest.approx(-2 * np.linalg.norm(tcp - (red - BEHIND_M * u)) - 10 * d_goal, abs=1e-9)
    assert envs["cube"]._potential == pytest.approx(-2 * np.linalg.norm(tcp - red) - 10 * d_goal, abs=1e-9)
    # same scene, same step: the rewards differ by the change of the two potentials only
    _, r_b, *_ = e.step(0)
    _, r_c, *_ = envs["cube"].step(0)
    assert r_b != pytest.approx(r_c)
    for env in envs.values():
        env.close()


def test_config_errors():
    with pytest.raises(ValueError, match="approach="):
        ObjectTaskConfig(approach="side")
    with pytest.raises(ValueError, match="shapes push3 only"):
        ObjectTaskConfig(task="reach3", approach="behind")
    with pytest.raises(ValueError, match="task="):
        ObjectTaskConfig(task="stack")
    with pytest.raises(ValueError, match="distractors="):
        ObjectTaskConfig(distractors=5)


def test_oracle_observer_is_a_fixed_projection():
    obs = [{"oracle": np.eye(5, 8, dtype=np.float32)}]
    a = Observer("oracle", 1, slot_dim=16, n_entities=5, seed=3).observe(obs, np.ones(1, bool))
    b = Observer("oracle", 1, slot_dim=16, n_entities=5, seed=3).observe(obs, np.ones(1, bool))
    assert a.shape == (1, 5, 16) and np.array_equal(a, b)
    with pytest.raises(ValueError, match="encoder"):
        Observer("slots", 1)


def test_control_oracle_adds_the_arm_lag_and_cube_yaw_and_keeps_the_pose_features():
    from sim.env import DISCRETE_STEP_M
    from world_models.object_env import ORACLE_CONTROL

    envs = {k: ObjectTaskEnv(ObjectTaskConfig(task="push3", image_size=16, oracle_state=k)) for k in ("pose", "control")}
    for env in envs.values():
        env.reset(seed=7)
    for _ in range(3):  # the same actions in the same scene: the TCP trails its commanded target
        obs = {k: env.step(0)[0]["oracle"] for k, env in envs.items()}
    pose, ctl = obs["pose"], obs["control"]
    assert envs["control"].cfg.oracle_layout == ORACLE_LAYOUT + ORACLE_CONTROL and ctl.shape == (5, 12)
    np.testing.assert_array_equal(ctl[:, :8], pose)
    env = envs["control"]
    target, _, _ = env.env.commanded_target()
    lag = (target[:2] - env._tcp()[:2]) / DISCRETE_STEP_M
    np.testing.assert_allclose(ctl[0, 8:10], lag, atol=1e-6)
    assert 0.1 < np.linalg.norm(lag) < 2.0  # moving: a fraction of a step to a step behind
    assert ctl[0, 8] > 0.1 and abs(ctl[0, 9]) < 0.5 * ctl[0, 8]  # action 0 is +x: the target leads the TCP along +x
    assert np.all(ctl[1:, 8:10] == 0) and np.all(ctl[:2, 10:12] == 0)  # lag is the arm's, yaw the cubes'
    np.testing.assert_allclose(np.hypot(ctl[2:, 10], ctl[2:, 11]), 1.0, atol=1e-6)
    # a cube turned by a quarter turn looks the same; by an eighth, its features flip sign
    w, x, y, z = np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)  # yaw 90 degrees
    info = {"object_poses": {o.name: np.array([0.5, 0.0, 0.02, 1.0, 0, 0, 0]) for o in env.env.scene.objects}}
    base = env.oracle(info)
    info["object_poses"]["red"] = np.array([0.5, 0.0, 0.02, w, x, y, z])
    np.testing.assert_allclose(env.oracle(info)[2, 10:12], base[2, 10:12], atol=1e-6)
    info["object_poses"]["red"] = np.array([0.5, 0.0, 0.02, np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)])
    np.testing.assert_allclose(env.oracle(info)[2, 10:12], [-1.0, 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="oracle_state="):
        ObjectTaskConfig(oracle_state="full")
    for e in envs.values():
        e.close()


def test_oracle_map_keeps_the_pose_rows_when_features_are_added():
    from world_models.observer import oracle_map

    np.testing.assert_array_equal(oracle_map(12, 64, 3)[:8], oracle_map(8, 64, 3))
    ob = Observer("oracle", 1, slot_dim=16, n_entities=5, seed=3, oracle_features=12)
    feats = np.random.default_rng(0).standard_normal((5, 12)).astype(np.float32)
    np.testing.assert_allclose(ob.observe([{"oracle": feats}], np.ones(1, bool))[0], feats @ oracle_map(12, 16, 3),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="12 features per slot"):  # a control run's observations, a pose observer
        Observer("oracle", 1, slot_dim=16, n_entities=5, seed=3).observe([{"oracle": feats}], np.ones(1, bool))


def test_frame_is_the_centre_crop_of_the_camera_view():
    env = ObjectTaskEnv(ObjectTaskConfig(task="reach3", image_size=16, crop=1.5, segmentation=True))
    obs, _ = env.reset(seed=4)
    full = env.env.backend.render("front", 24, 24)
    assert obs["frame"].shape == (16, 16, 3) and np.array_equal(obs["frame"], full[4:20, 4:20])
    assert obs["seg"].shape == (16, 16)
    env.close()


def test_foreground_weighting_is_plain_mse_when_off():
    import torch

    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig

    torch.manual_seed(0)
    frames = np.random.default_rng(0).integers(0, 255, (2, 32, 32, 3), dtype=np.uint8)
    plain = SlotAutoencoder(SlotEncoderConfig.tiny(fg_weight=0))
    weighted = SlotAutoencoder(SlotEncoderConfig.tiny(fg_weight=10))
    weighted.load_state_dict(plain.state_dict())
    x = plain.prepare(frames)
    slots = plain._encode(x, None)[0]
    mse = torch.nn.functional.mse_loss(plain.decode(slots)[0], plain.target(x))
    torch.manual_seed(0)
    assert torch.allclose(plain.loss(frames)[0], mse)
    assert not torch.allclose(weighted.loss(frames)[0], mse)


def test_depth_adds_a_fourth_channel_and_keeps_the_colour_frame():
    from world_models.object_env import depth_to_uint8

    env = ObjectTaskEnv(ObjectTaskConfig(task="push3", image_size=32, segmentation=True))
    envd = ObjectTaskEnv(ObjectTaskConfig(task="push3", image_size=32, segmentation=True, depth=True))
    for e in (env, envd):
        e.reset(seed=7)
    for a in (0, 3, 3):
        obs, *_ = env.step(a)
        obsd, *_ = envd.step(a)
    assert obsd["frame"].shape == (32, 32, 4) and np.array_equal(obsd["frame"][..., :3], obs["frame"])
    full = envd.env.backend.render_depth("front", 48, 48)[8:40, 8:40]
    assert np.array_equal(obsd["frame"][..., 3], depth_to_uint8(full, 0.6, 1.0)[0])
    assert envd.depth_clipped == 0  # the workspace lies inside the default range
    env.close()
    envd.close()
    img, outside = depth_to_uint8(np.array([[0.6, 0.7, 1.0], [0.5, 1.2, 0.9]]), 0.6, 1.0)
    assert img.tolist() == [[255, 191, 0], [255, 0, 64]] and outside == 2  # 0.5 and 1.2 saturate, counted
    with pytest.raises(ValueError, match="depth_near_m"):
        ObjectTaskConfig(depth_near_m=1.0, depth_far_m=0.9)


def test_an_oracle_runs_env_renders_nothing_and_sees_the_same_states(tmp_path):
    """Oracle-slot runs read the object states only: their envs skip the camera (about 4 % of a run's
    time) and play the same episodes."""
    from world_models.train import Trainer, tiny

    a, b = ObjectTaskEnv(ObjectTaskConfig(task="push3")), ObjectTaskEnv(ObjectTaskConfig(task="push3"), frames=False)
    (oa, _), (ob, _) = a.reset(seed=3), b.reset(seed=3)
    assert set(ob) == {"oracle"} and "frame" in oa and np.array_equal(oa["oracle"], ob["oracle"])
    for act in (0, 2, 2, 5):
        (oa, ra, *_), (ob, rb, *_) = a.step(act), b.step(act)
        assert set(ob) == {"oracle"} and np.array_equal(oa["oracle"], ob["oracle"]) and ra == rb
    a.close(), b.close()
    envs = Trainer(tiny(obs="oracle"), tmp_path / "wm", progress=False)._make_envs(1)
    assert [e.frames for e in envs] == [False]
    envs[0].close()
