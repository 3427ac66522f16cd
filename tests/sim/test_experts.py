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

    from tests.fakes import spy_steps

    env = sim.make_env("stack", render_images=False, image_size=32)
    executed = spy_steps(env)
    ep = expert_episode(env, 3, keep_frames=False, action_noise_m=0.01)
    assert 0 < ep["action_noise_std_m"] <= 0.01
    executed = np.stack(executed)
    diff = np.abs(executed - ep["action"]).max(axis=1)
    noisy = np.isin(ep["phase"], list(NOISY_PHASES))
    assert (diff[noisy] > 0).mean() > 0.9  # perturbed where noise is injected ...
    assert (diff[~noisy] == 0).all()  # ... and never while grasping/placing/releasing
    assert np.abs(executed[:, 3:] - ep["action"][:, 3:]).max() == 0  # yaw and gripper untouched
    del env.step
    again = expert_episode(env, 3, keep_frames=False, action_noise_m=0.01)
    np.testing.assert_array_equal(again["action"], ep["action"])  # seeded
    with pytest.raises(ValueError, match="action_noise_m"):
        expert_episode(env, 3, keep_frames=False, action_noise_m=0.5)


def test_relabelling_expert_follows_a_state_another_driver_made():
    """DAgger labels: a second expert (another seed: other via-points, speeds, grasp yaw) drives;
    the labelling expert must follow what the driver did, not its own plan's progress."""
    from sim.experts import PHASE_ID, make_expert

    env = sim.make_env("stack", render_images=False, image_size=32)
    u = env.unwrapped
    for seed in (4, 5):
        obs, info = env.reset(seed=seed)
        driver, labeller = make_expert("stack", 0.0), make_expert("stack", 0.0)
        driver.reset(u, seed + 1000)
        labeller.reset(u, seed)
        lower, upper = u.spec_task.order
        carried = 0
        for _ in range(400):
            label, phase = labeller.act_from_state()
            action, _ = driver.act()
            pos = info["object_poses"][upper][:3]
            base = info["object_poses"][lower][:3]
            held = driver._holding(upper) and u.commanded_target()[2] > 0.5
            if held and pos[2] > 0.06 and np.linalg.norm(base[:2] - pos[:2]) > 0.05:
                carried += 1  # the driver carries it, well clear of the table and the base
                assert label[4] == 1.0 and phase in (PHASE_ID["lift"], PHASE_ID["transport"])
                if phase == PHASE_ID["transport"]:  # ... and the label heads for the base
                    to_base = (base[:2] - pos[:2]) / np.linalg.norm(base[:2] - pos[:2])
                    assert label[:2] @ to_base > 0.5 * np.linalg.norm(label[:2])
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert info["success"] and carried >= 5
    # labelling while driving itself, it still solves the task
    results = []
    for seed in (6, 7):
        env.reset(seed=seed)
        expert = make_expert("stack", 0.0)
        expert.reset(u, seed)
        for _ in range(400):
            _, _, terminated, truncated, info = env.step(expert.act_from_state()[0])
            if terminated or truncated:
                break
        results.append(info["success"])
    assert all(results)


def _off_centre_carry(seed: int, place_held_object: bool, shift_m: float = 0.012):
    """A driver expert grasps the block ``shift_m`` off its centre (along the fingers, where the
    closing gripper cannot centre it) and lifts it; then the labelling expert takes over.
    Returns (in-hand xy offset after the lift, final block-to-base xy distance, success)."""
    from sim.experts import make_expert

    env = sim.make_env("stack", render_images=False, image_size=32)
    u = env.unwrapped
    obs, info = env.reset(seed=seed)
    lower, upper = u.spec_task.order
    driver = make_expert("stack", 0.0)
    driver.reset(u, seed)
    yaw = driver.plan[-1].yaw  # the grasp yaw; the fingers close along the hand's y axis
    along = np.array([np.cos(yaw), np.sin(yaw)]) * shift_m
    for seg in driver.plan:
        if seg.phase in ("approach", "grasp", "lift"):
            seg.pos[:2] += along
    for _ in range(200):
        obs, _, _, _, info = env.step(driver.act()[0])
        if info["object_poses"][upper][2] > 0.07:
            break
    tcp, _ = u.tcp_pose()
    offset = float(np.linalg.norm(np.asarray(info["object_poses"][upper][:2]) - tcp[:2]))
    labeller = make_expert("stack", 0.0, place_held_object=place_held_object)
    labeller.reset(u, seed)
    for _ in range(300):
        obs, _, terminated, truncated, info = env.step(labeller.act_from_state()[0])
        if terminated or truncated:
            break
    gap = float(np.linalg.norm(np.asarray(info["object_poses"][upper][:2]) - info["object_poses"][lower][:2]))
    return offset, gap, bool(info["success"])


def test_place_held_object_puts_an_off_centre_block_on_its_base():
    """DAgger labels after a policy's off-centre grasp: placing the TCP over the base sets the block
    down beside its centre by the grasp's offset; placing the held block's centre does not."""
    for seed in (4, 5):
        offset, gap_tcp, _ = _off_centre_carry(seed, place_held_object=False)
        _, gap_held, success = _off_centre_carry(seed, place_held_object=True)
        assert offset > 0.008  # the block really sits off-centre in the hand
        assert success and gap_held < 0.004
        assert gap_tcp > gap_held + 0.005


def _off_centre_close(seed: int, regrasp_off_centre_m: float, shift_m: float = 0.015):
    """A driver expert closes the gripper ``shift_m`` off the block's centre along the fingers
    (before lifting); then the labelling expert takes over. Returns (the first label's gripper
    command, the in-hand offset along the fingers once the block is lifted, success)."""
    from sim.experts import make_expert

    env = sim.make_env("stack", render_images=False, image_size=32)
    u = env.unwrapped
    obs, info = env.reset(seed=seed)
    upper = u.spec_task.order[-1]
    driver = make_expert("stack", 0.0)
    driver.reset(u, seed)
    yaw = driver.plan[-1].yaw
    axis = np.array([np.cos(yaw), np.sin(yaw)])
    for seg in driver.plan:
        if seg.phase in ("approach", "grasp", "lift"):
            seg.pos[:2] += axis * shift_m
    for _ in range(200):
        action, phase = driver.act()
        obs, _, _, _, info = env.step(action)
        if driver.plan[driver.k].phase == "grasp" and u.backend.gripper_width() < 0.05:
            break
    labeller = make_expert("stack", 0.0, place_held_object=True, regrasp_off_centre_m=regrasp_off_centre_m)
    labeller.reset(u, seed)
    first_grip, lifted_offset = None, None
    for _ in range(400):
        action, _ = labeller.act_from_state()
        first_grip = float(action[4]) if first_grip is None else first_grip
        obs, _, terminated, truncated, info = env.step(action)
        pos = np.asarray(info["object_poses"][upper])
        if lifted_offset is None and pos[2] > 0.07:
            tcp, tcp_yaw = u.tcp_pose()
            lifted_offset = abs(float(np.dot(pos[:2] - tcp[:2], [np.cos(tcp_yaw), np.sin(tcp_yaw)])))
        if terminated or truncated:
            break
    return first_grip, lifted_offset, bool(info["success"])


def test_regrasp_off_centre_opens_a_grasp_closed_beside_the_block_centre():
    """DAgger labels after a policy closed the gripper 1.5 cm off the block's centre along the
    fingers: the original expert finishes that grasp (and carries the block off-centre); with
    ``regrasp_off_centre_m`` it opens, re-approaches over the centre and grasps there."""
    for seed in (4, 5):
        grip_keep, offset_keep, _ = _off_centre_close(seed, 0.0)
        grip_re, offset_re, success = _off_centre_close(seed, 0.01)
        assert grip_keep > 0.5 and offset_keep > 0.01
        assert grip_re < 0.5 and offset_re < 0.005 and success


def test_regrasp_off_centre_is_range_checked():
    from sim.experts import ScriptedExpert

    with pytest.raises(ValueError, match="regrasp_off_centre_m"):
        ScriptedExpert(regrasp_off_centre_m=0.5)
