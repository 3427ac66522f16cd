"""Every registered env passes gymnasium's checker; seeds reproduce; bad config is rejected."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sim
from sim.env import EnvConfig, TabletopEnv


def _backend_available(env_id: str) -> bool:
    if "PyBullet" not in env_id:
        return True
    try:
        import sim.backends.pybullet_backend  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("env_id", sorted(sim.ENV_IDS))
def test_check_env(env_id):
    if not _backend_available(env_id):
        pytest.skip("PyBullet backend not available")
    env = gym.make(env_id, image_size=32)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=1)
    assert obs["front"].shape == (32, 32, 3) and obs["front"].dtype == np.uint8
    assert obs["proprio"].shape == (22,) and np.isfinite(obs["proprio"]).all()
    assert obs["front"].std() > 1.0  # a real image, not a blank frame
    assert set(info["object_poses"]) == {o.name for o in env.unwrapped.scene.objects}
    env.close()


def test_same_seed_same_episode():
    a = sim.make_env("stack", image_size=32)
    b = sim.make_env("stack", image_size=32)
    rng = np.random.default_rng(0)
    actions = rng.uniform(a.action_space.low, a.action_space.high, (15, 5)).astype(np.float32)
    oa, _ = a.reset(seed=42)
    ob, _ = b.reset(seed=42)
    assert oa["instruction"] == ob["instruction"]
    for act in actions:
        oa, *_ = a.step(act)
        ob, *_ = b.step(act)
    np.testing.assert_array_equal(oa["proprio"], ob["proprio"])
    np.testing.assert_array_equal(oa["front"], ob["front"])
    oc, _ = a.reset(seed=43)
    assert not np.array_equal(oc["front"], oa["front"])


@pytest.mark.parametrize("kwargs, words", [
    ({"task": "stak"}, ["task", "stak", "stack"]),
    ({"image_size": 4}, ["image_size", "4", "[16, 512]"]),
    ({"control_rate_hz": 30.0, "physics_dt_s": 0.004}, ["whole number"]),
    ({"control_rate_hz": 40.0, "sim": "pybullet"}, ["whole number", "pybullet default"]),
    ({"physics_dt_s": 0.01}, ["physics_dt_s", "0.01", "[0.0001, 0.004]", "or 0"]),
    ({"action_mode": "discrete8"}, ["discrete8", "push"]),
    ({"distribution": "test"}, ["distribution", "ood"]),
    ({"render_mesh_cell_m": 0.2}, ["render_mesh_cell_m", "0.2", "[0.001, 0.05]", "or 0"]),
    ({"render_mesh_cell_m": 0.01, "sim": "pybullet"}, ["render_mesh_cell_m", "mujoco", "pybullet"]),
])
def test_bad_config_names_key_and_range(kwargs, words):
    with pytest.raises(ValueError) as err:
        EnvConfig(**kwargs)
    for w in words:
        assert w in str(err.value)


def test_each_engine_has_its_own_default_physics_step():
    from sim.env import DEFAULT_PHYSICS_DT_S

    assert EnvConfig().physics_dt_s == 0.0  # "the engine's", resolved by physics_step_s
    assert EnvConfig(sim="mujoco").physics_step_s == DEFAULT_PHYSICS_DT_S["mujoco"] == 0.002
    assert EnvConfig(sim="pybullet").physics_step_s == DEFAULT_PHYSICS_DT_S["pybullet"] == 1.0 / 300.0
    assert EnvConfig(sim="pybullet", physics_dt_s=0.002).physics_step_s == 0.002
    env = sim.make_env("stack", render_images=False)
    try:
        assert env.unwrapped.n_substeps == 25 and env.unwrapped.backend.physics_dt_s == 0.002
    finally:
        env.close()


def test_action_clipping_is_counted_and_bad_actions_rejected():
    env = sim.make_env("pick_place", image_size=32)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([1.0, 0, 0, 0, 0.5], np.float32))
    assert info["clipped"] and info["clip_counts"]["action_box"] == 1
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([np.nan, 0, 0, 0, 0], np.float32))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(4, np.float32))


def test_ee_delta_moves_the_tcp_by_the_commanded_amount():
    env = sim.make_env("stack", image_size=32, render_images=False)
    env.reset(seed=3)
    p0, _ = env.tcp_pose()
    for _ in range(10):
        env.step(np.array([0.01, 0.0, 0.0, 0.0, 0.0], np.float32))
    for _ in range(10):
        env.step(np.zeros(5, np.float32))
    p1, _ = env.tcp_pose()
    np.testing.assert_allclose(p1 - p0, [0.10, 0.0, 0.0], atol=0.01)


def test_push_discrete_actions_and_segmentation():
    env = sim.make_env("push", image_size=48, action_mode="discrete8", segmentation=True)
    obs, _ = env.reset(seed=5)
    seg = obs["front_seg"]
    assert {10, 11} <= set(np.unique(seg))  # the two task cubes are visible from above
    p0, _ = env.tcp_pose()
    for _ in range(5):
        env.step(2)  # +y
    for _ in range(5):
        env.step(np.int64(2))
    p1, _ = env.tcp_pose()
    assert p1[1] - p0[1] > 0.1 and abs(p1[0] - p0[0]) < 0.02
    with pytest.raises(ValueError, match="discrete8"):
        env.step(9)


def test_realism_hooks_delay_and_freeze():
    from sim.realism import RealismConfig

    env = TabletopEnv(EnvConfig(task="stack", image_size=32, realism=RealismConfig(
        action_latency_steps=3, image_freeze_prob=1.0, image_freeze_steps=100)))
    obs0, _ = env.reset(seed=0)
    p0, _ = env.tcp_pose()
    for _ in range(3):  # commands are applied 3 steps late: nothing moves yet
        obs, *_ = env.step(np.array([0.02, 0, 0, 0, 0], np.float32))
    p1, _ = env.tcp_pose()
    assert np.linalg.norm(p1 - p0) < 0.004
    for _ in range(5):
        obs, *_ = env.step(np.array([0.02, 0, 0, 0, 0], np.float32))
    assert np.linalg.norm(env.tcp_pose()[0] - p0) > 0.03
    np.testing.assert_array_equal(obs["front"], obs0["front"])  # frozen camera
    assert env.realism.counts["frozen_frames"] > 0


def test_measured_kinematics_are_memoised_but_never_shared_mutably():
    env = sim.make_env("stack", sim="mujoco", render_images=False)
    obs, _ = env.reset(seed=3)
    u = env.unwrapped
    p, _ = u.tcp_pose()
    p[:] = 0.0  # a caller's copy: must not leak into the env's next observation or IK
    np.testing.assert_allclose(obs["proprio"][15:18], u.tcp_pose()[0], atol=1e-6)
    q, _ = u.backend.arm_state()
    np.testing.assert_allclose(u._fk(q)[0], sim.robot_model.fk(q)[0], atol=0)
    obs, *_ = env.step(np.array([0.01, 0, 0, 0, 0], np.float32))
    q2, _ = u.backend.arm_state()
    assert not np.array_equal(q, q2)
    np.testing.assert_allclose(obs["proprio"][15:18], sim.robot_model.fk(q2)[0], atol=1e-6)
    env.close()


def test_paraphrased_instructions_change_only_the_wording():
    import numpy as np
    import pytest

    from sim.env import TabletopEnv

    for task in ("stack", "pick_place", "push"):
        a = TabletopEnv(task=task, render_images=False)
        b = TabletopEnv(task=task, render_images=False, instructions="paraphrase")
        try:
            for seed in (3, 11):
                oa, _ = a.reset(seed=seed)
                ob, _ = b.reset(seed=seed)
                assert oa["instruction"] != ob["instruction"]
                assert a.spec_task.order == b.spec_task.order
                np.testing.assert_array_equal(oa["proprio"], ob["proprio"])
                assert [o.name for o in a.scene.objects] == [o.name for o in b.scene.objects]
        finally:
            a.close()
            b.close()
    with pytest.raises(ValueError, match="instructions"):
        TabletopEnv(task="stack", instructions="slang")


def test_simplified_render_meshes_leave_an_expert_stacking_episode_bit_identical():
    """Render-only geoms: grasp, carry and stack contacts run exactly as without them."""
    from sim.rollout import expert_episode

    runs = []
    for cell in (0.0, 0.01):
        env = sim.make_env("stack", render_images=False, render_mesh_cell_m=cell)
        try:
            runs.append(expert_episode(env, seed=3, keep_frames=False))
        finally:
            env.close()
    a, b = runs
    assert a["success"] and a["steps"] == b["steps"] and a["steps"] > 50
    np.testing.assert_array_equal(a["proprio"], b["proprio"])
    np.testing.assert_array_equal(a["action"], b["action"])
    np.testing.assert_array_equal(a["object_pos"], b["object_pos"])


def test_snapshot_restore_replays_the_same_steps_bit_for_bit():
    env = TabletopEnv(EnvConfig(task="push", action_mode="discrete8", image_size=32, push_distractors=2,
                                lazy_images=True))
    env.reset(seed=3)
    actions = np.random.default_rng(0).integers(0, 8, 24)
    for a in actions[:8]:
        env.step(int(a))
    snap = env.snapshot()
    # the reference: the same trajectory continued without any restore
    ref, ref_tcp = [], []
    for a in actions[8:]:
        ref.append(env.step(int(a)))
        ref_tcp.append(env.tcp_pose()[0])
    assert np.linalg.norm(ref_tcp[-1] - ref_tcp[0]) > 0.01  # the arm moved: the comparison can fail
    stale = ref[-1][0]
    env._hold_steps, env.clip_counts["workspace"] = 7, 99  # counters the restore must put back
    env.restore(snap)
    assert (env.t_step, env._hold_steps) == (8, snap["hold_steps"]) and env.clip_counts == snap["clip_counts"]
    with pytest.raises(RuntimeError, match="after the env stepped on"):
        stale["front"]  # an image of an observation made before the restore is not rendered later
    for a, (_, _, _, _, info_ref), tcp in zip(actions[8:], ref, ref_tcp):
        _, _, _, _, info = env.step(int(a))
        for name, pose in info_ref["object_poses"].items():
            np.testing.assert_array_equal(info["object_poses"][name], pose)
        np.testing.assert_array_equal(env.tcp_pose()[0], tcp)
        assert info["step"] == info_ref["step"]
    env.close()


def test_restore_puts_back_the_divergence_flag():
    env = TabletopEnv(EnvConfig(task="push", action_mode="discrete8", image_size=32))
    env.reset(seed=0)
    snap = env.snapshot()
    env.backend._warning_counts[env.backend._warn_ids[0]] += 1  # as if a searched branch blew up
    assert env.backend.diverged
    env.restore(snap)
    assert not env.backend.diverged
    env.close()


def test_snapshot_refuses_what_it_cannot_restore():
    from sim.realism import RealismConfig

    env = TabletopEnv(EnvConfig(task="push", action_mode="discrete8", image_size=32))
    with pytest.raises(ValueError, match="before reset"):
        env.snapshot()
    env.reset(seed=0)
    snap = env.snapshot()
    env.reset(seed=1)
    with pytest.raises(ValueError, match="another episode"):
        env.restore(snap)
    env.close()
    env = TabletopEnv(EnvConfig(task="push", action_mode="discrete8", image_size=32,
                                realism=RealismConfig(action_latency_steps=1)))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="realism"):
        env.snapshot()
    env.close()


def test_recorded_env_configs_take_settings_added_since_at_their_defaults():
    from sim.env import with_new_env_defaults

    new = {"task": "stack", "depth": False, "lazy_images": False, "not_a_key": 1}
    assert with_new_env_defaults({"task": "stack"}, new) == {"task": "stack", "depth": False, "lazy_images": False}
    # a setting off its default, or recorded with another value, stays a difference
    assert with_new_env_defaults({"task": "stack"}, {**new, "depth": True}) == {"task": "stack", "lazy_images": False}
    assert with_new_env_defaults({"depth": True}, new)["depth"] is True
