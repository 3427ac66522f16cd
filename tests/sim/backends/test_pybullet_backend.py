"""PyBullet backend: servo tracking, grasp-and-lift, conventions, rendering, isolation, rebuilds.

Run from the repository root: ``python -m pytest tests/sim/backends/test_pybullet_backend.py``.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np
import pybullet
import pytest

from sim.backends import pybullet_backend
from sim.backends.base import SEG_BACKGROUND, SEG_OBJECT0, SEG_ROBOT, SEG_TABLE
from sim.backends.pybullet_backend import PyBulletBackend, _egl_plugin_path
from sim.robot_model import (
    GRIPPER_MAX_WIDTH_M,
    Q_HOME_RAD,
    down_rotation,
    fk,
    ik_step,
    urdf_path,
)
from sim.scene import BoxObject, Camera, GoalPatch, Light, Scene

SUBSTEPS = 25  # 20 Hz control at the default 2 ms physics step


def make_scene(red_xy=(0.5, 0.0), blue_yaw=0.3) -> Scene:
    return Scene(
        objects=(
            BoxObject("red", (0.025, 0.025, 0.025), (0.9, 0.1, 0.1, 1.0), 0.1, 0.8,
                      (red_xy[0], red_xy[1], 0.025), 0.0, color_name="red"),
            BoxObject("blue", (0.02, 0.02, 0.02), (0.1, 0.2, 0.9, 1.0), 0.08, 0.8,
                      (0.45, 0.15, 0.02), blue_yaw, color_name="blue"),
        ),
        goals=(GoalPatch("goal", (0.55, -0.15), (0.05, 0.05), (0.1, 0.8, 0.1, 1.0)),),
        cameras=(Camera("front", (1.3, 0.0, 0.45), (0.45, 0.0, 0.05), 45.0),
                 Camera("wrist", (0.0, 0.0, 0.0), (0.0, 0.0, -1.0), 75.0)),  # rides on the hand
        lights=(Light((0.5, 0.5, 1.5), 0.7),),
        table_rgba=(0.6, 0.5, 0.4, 1.0),
        q_home_rad=Q_HOME_RAD,
    )


@pytest.fixture(scope="module")
def backend():
    b = PyBulletBackend()
    yield b
    b.close()


def move_tcp(b: PyBulletBackend, q: np.ndarray, target: np.ndarray, grip: float, steps: int,
             max_step_m: float = 0.01) -> np.ndarray:
    """Stream 20 Hz IK targets that walk the TCP toward ``target`` (gripper pointing down)."""
    R = down_rotation(0.0)
    for _ in range(steps):
        p_cmd = fk(q)[0]
        d = target - p_cmd
        n = np.linalg.norm(d)
        q = ik_step(q, p_cmd + (d if n < max_step_m else d / n * max_step_m), R)
        b.set_arm_targets(q)
        b.set_gripper_target(grip)
        b.step(SUBSTEPS)
    return q


def test_build_puts_robot_home_and_objects_on_table(backend):
    scene = make_scene()
    backend.build(scene)
    q, qd = backend.arm_state()
    assert q.shape == (7,) and qd.shape == (7,)
    np.testing.assert_allclose(q, Q_HOME_RAD, atol=1e-9)
    assert backend.gripper_width() == pytest.approx(GRIPPER_MAX_WIDTH_M, abs=1e-9)
    backend.step(100)
    for obj in scene.objects:
        pos, _ = backend.object_pose(obj.name)
        np.testing.assert_allclose(pos, obj.pos_m, atol=1e-3)  # resting on the table top at z = 0
    np.testing.assert_allclose(backend.arm_state()[0], Q_HOME_RAD, atol=1e-3)  # holds against gravity


def test_arm_reaches_joint_target(backend):
    backend.build(make_scene())
    target = np.array(Q_HOME_RAD) + np.array([0.3, 0.2, -0.2, 0.3, 0.3, -0.3, 0.3])
    backend.set_arm_targets(target)
    backend.step(250)  # 0.5 s
    q, qd = backend.arm_state()
    np.testing.assert_allclose(q, target, atol=5e-3)
    assert np.abs(qd).max() < 0.05


def test_reset_robot_teleports_and_sets_targets(backend):
    backend.build(make_scene())
    q = np.array(Q_HOME_RAD) + 0.1
    backend.reset_robot(q, 0.03)
    np.testing.assert_allclose(backend.arm_state()[0], q, atol=1e-9)
    np.testing.assert_allclose(backend.arm_state()[1], 0.0, atol=1e-9)
    assert backend.gripper_width() == pytest.approx(0.03, abs=1e-9)
    backend.step(50)
    np.testing.assert_allclose(backend.arm_state()[0], q, atol=2e-3)
    assert backend.gripper_width() == pytest.approx(0.03, abs=1e-3)


def test_gripper_grasps_and_lifts_cube(backend):
    backend.build(make_scene())
    q = np.array(Q_HOME_RAD)
    cube = np.array(backend.object_pose("red")[0])
    q = move_tcp(backend, q, cube + [0, 0, 0.12], 0.08, 30)
    q = move_tcp(backend, q, cube, 0.08, 20)
    assert not backend.fingers_touch("red")
    q = move_tcp(backend, q, cube, 0.0, 12)  # close: stops on the 5 cm cube, squeezing
    assert backend.fingers_touch("red")
    assert not backend.fingers_touch("blue")
    assert backend.gripper_width() == pytest.approx(0.05, abs=3e-3)
    q = move_tcp(backend, q, cube + [0, 0, 0.15], 0.0, 20)
    pos, quat = backend.object_pose("red")
    tcp = fk(backend.arm_state()[0])[0]
    assert pos[2] > cube[2] + 0.12, "cube did not rise with the gripper"
    np.testing.assert_allclose(pos, tcp, atol=5e-3)  # still centred between the fingertips
    assert abs(quat[0]) > 0.999  # not tilted in the grasp
    # a brisk sideways move along the closing axis must not make it slide
    q = move_tcp(backend, q, cube + [0, 0.15, 0.15], 0.0, 12, max_step_m=0.02)
    backend.step(100)
    np.testing.assert_allclose(backend.object_pose("red")[0], fk(backend.arm_state()[0])[0], atol=5e-3)
    # open: it drops back to the table
    move_tcp(backend, q, cube + [0, 0.15, 0.15], 0.08, 10)
    backend.step(200)
    assert backend.object_pose("red")[0][2] == pytest.approx(0.025, abs=2e-3)


def test_object_pose_is_wxyz_unit_quaternion(backend):
    backend.build(make_scene(blue_yaw=0.3))
    pos, quat = backend.object_pose("blue")
    assert pos.shape == (3,) and quat.shape == (4,)
    assert np.linalg.norm(quat) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(quat, [np.cos(0.15), 0.0, 0.0, np.sin(0.15)], atol=1e-6)  # w first


def test_object_velocity_of_falling_cube(backend):
    scene = make_scene()
    lifted = dataclasses.replace(scene.objects[1], pos_m=(0.45, 0.15, 0.3))
    backend.build(dataclasses.replace(scene, objects=(scene.objects[0], lifted)))
    backend.step(50)  # 0.1 s of free fall
    lin, ang = backend.object_velocity("blue")
    assert lin.shape == (3,) and ang.shape == (3,)
    np.testing.assert_allclose(lin, [0.0, 0.0, -0.981], atol=0.01)
    np.testing.assert_allclose(ang, 0.0, atol=1e-6)
    np.testing.assert_allclose(backend.object_velocity("red")[0], 0.0, atol=1e-3)


def test_angular_velocity_is_in_the_object_frame(backend):
    # Like a MuJoCo free joint: linear velocity in the world frame, angular in the body frame.
    scene = make_scene()
    turned = dataclasses.replace(scene.objects[1], pos_m=(0.45, 0.15, 0.3), yaw_rad=np.pi / 2)
    backend.build(dataclasses.replace(scene, objects=(scene.objects[0], turned)))
    body = backend._objects["blue"]
    pybullet.resetBaseVelocity(body, [0.1, 0.0, 0.0], [1.0, 0.0, 0.0], physicsClientId=backend.client_id)
    lin, ang = backend.object_velocity("blue")
    np.testing.assert_allclose(lin, [0.1, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(ang, [0.0, -1.0, 0.0], atol=1e-9)  # world x = body -y after +90 deg yaw


def test_render_rgb(backend):
    backend.build(make_scene())
    for h, w in ((96, 96), (48, 64)):
        img = backend.render("front", h, w)
        assert img.shape == (h, w, 3) and img.dtype == np.uint8
        assert img.std() > 10, "image is (nearly) constant"
    # empty space is black (as in MuJoCo with the skybox off)
    img, seg = backend.render("front", 96, 96), backend.render_segmentation("front", 96, 96)
    assert (seg == SEG_BACKGROUND).sum() > 50
    assert img[seg == SEG_BACKGROUND].max() == 0


def test_wrist_camera_follows_the_hand(backend):
    backend.build(make_scene())
    q = move_tcp(backend, np.array(Q_HOME_RAD), np.array([0.5, 0.0, 0.2]), 0.08, 25, max_step_m=0.03)
    above = backend.render("wrist", 64, 64)
    seg = backend.render_segmentation("wrist", 64, 64)
    assert above.shape == (64, 64, 3) and above.std() > 10
    # looking down along the fingers (from 8 cm off the TCP axis, as mounted in the MuJoCo
    # backend): the red cube below is in view
    assert (seg == SEG_OBJECT0).sum() > 30
    red_centre = np.argwhere(seg == SEG_OBJECT0).mean(axis=0)
    move_tcp(backend, q, np.array([0.5, -0.1, 0.2]), 0.08, 12, max_step_m=0.03)
    seg = backend.render_segmentation("wrist", 64, 64)
    assert np.abs(np.argwhere(seg == SEG_OBJECT0).mean(axis=0) - red_centre).max() > 10  # it moved in the image


def test_segmentation_ids_and_alignment(backend):
    backend.build(make_scene())
    seg = backend.render_segmentation("front", 96, 96)
    assert seg.shape == (96, 96) and seg.dtype == np.int32
    ids = set(np.unique(seg).tolist())
    assert {SEG_BACKGROUND, SEG_TABLE, SEG_ROBOT, SEG_OBJECT0, SEG_OBJECT0 + 1} == ids
    # the mask lines up with the RGB image: "red" pixels are red, "blue" pixels are blue
    rgb = backend.render("front", 96, 96).astype(float)
    red, blue = rgb[seg == SEG_OBJECT0].mean(axis=0), rgb[seg == SEG_OBJECT0 + 1].mean(axis=0)
    assert red[0] > 2 * red[2] and blue[2] > 2 * blue[0]


def test_unknown_names_raise(backend):
    backend.build(make_scene())
    with pytest.raises(KeyError, match="green"):
        backend.object_pose("green")
    with pytest.raises(KeyError, match="side"):
        backend.render("side", 32, 32)


def test_two_backends_do_not_interfere():
    foreign = pybullet.connect(pybullet.DIRECT)  # someone else's client in the same process
    pybullet.loadURDF(str(urdf_path()), physicsClientId=foreign)
    a, b = PyBulletBackend(), PyBulletBackend()
    try:
        assert a.client_id != b.client_id
        a.build(make_scene())
        b.build(make_scene(red_xy=(0.6, 0.1)))
        a.set_arm_targets(np.array(Q_HOME_RAD) + 0.2)
        a.step(100)
        np.testing.assert_allclose(b.arm_state()[0], Q_HOME_RAD, atol=1e-9)  # b never stepped
        np.testing.assert_allclose(b.object_pose("red")[0], [0.6, 0.1, 0.025], atol=1e-9)
        assert abs(a.object_pose("red")[0][0] - 0.5) < 1e-3
        # interleaved runs of the same commands give identical trajectories
        a.build(make_scene())
        b.build(make_scene())
        for k in range(5):
            target = np.array(Q_HOME_RAD) + 0.05 * k
            a.set_arm_targets(target)
            b.set_arm_targets(target)
            a.step(SUBSTEPS)
            b.step(SUBSTEPS)
        np.testing.assert_array_equal(a.arm_state()[0], b.arm_state()[0])
        assert pybullet.getNumBodies(physicsClientId=foreign) == 1
    finally:
        a.close()
        b.close()
        pybullet.disconnect(physicsClientId=foreign)


def _rollout(b: PyBulletBackend, scene: Scene) -> np.ndarray:
    b.build(scene)
    rows = []
    for k in range(8):
        b.set_arm_targets(np.array(Q_HOME_RAD) + 0.1 * np.sin(0.5 * k))
        b.set_gripper_target(0.02 if k > 4 else 0.08)
        b.step(SUBSTEPS)
        rows.append(np.concatenate([b.arm_state()[0], *b.object_pose("red"), *b.object_pose("blue")]))
    return np.array(rows)


def test_rebuild_repeatedly_without_leaks_and_reproducibly(backend):
    reference = _rollout(backend, make_scene())
    n_bodies = pybullet.getNumBodies(physicsClientId=backend.client_id)
    rng = np.random.default_rng(0)
    for _ in range(40):
        scene = make_scene(red_xy=(0.45 + 0.1 * rng.random(), 0.0), blue_yaw=rng.uniform(-1, 1))
        size = float(rng.uniform(0.018, 0.03))  # new sizes each time
        blue = dataclasses.replace(scene.objects[1], half_size_m=(size, size, size), pos_m=(0.45, 0.15, size))
        backend.build(dataclasses.replace(scene, objects=(scene.objects[0], blue)))
        backend.step(5)
        assert pybullet.getNumBodies(physicsClientId=backend.client_id) == n_bodies
    # the same scene replays bit-identically after other scenes were built
    np.testing.assert_array_equal(_rollout(backend, make_scene()), reference)
    # fewer objects, then more again
    scene = make_scene()
    backend.build(dataclasses.replace(scene, objects=scene.objects[:1], goals=()))
    assert pybullet.getNumBodies(physicsClientId=backend.client_id) == n_bodies - 2
    with pytest.raises(KeyError):
        backend.object_pose("blue")
    backend.build(scene)
    assert pybullet.getNumBodies(physicsClientId=backend.client_id) == n_bodies


def test_world_recreated_when_shape_cache_fills(monkeypatch):
    monkeypatch.setattr(pybullet_backend, "MAX_CACHED_SHAPES", 3)
    b = PyBulletBackend()
    try:
        reference = _rollout(b, make_scene())
        n_bodies = pybullet.getNumBodies(physicsClientId=b.client_id)
        for size in (0.021, 0.022, 0.023, 0.024, 0.026):  # forces resetSimulation + reload once or more
            scene = make_scene()
            blue = dataclasses.replace(scene.objects[1], half_size_m=(size,) * 3, pos_m=(0.45, 0.15, size))
            b.build(dataclasses.replace(scene, objects=(scene.objects[0], blue)))
            assert pybullet.getNumBodies(physicsClientId=b.client_id) == n_bodies
            assert len(b._shapes) <= 4
        np.testing.assert_array_equal(_rollout(b, make_scene()), reference)
    finally:
        b.close()


def test_goal_patch_is_drawn_but_segmented_as_table(backend):
    scene = make_scene()
    white = dataclasses.replace(scene, goals=(dataclasses.replace(scene.goals[0], rgba=(1.0, 1.0, 1.0, 1.0)),))
    backend.build(white)
    with_goal = backend.render("front", 96, 96)
    seg = backend.render_segmentation("front", 96, 96)
    backend.build(dataclasses.replace(scene, goals=()))
    changed = np.abs(with_goal.astype(int) - backend.render("front", 96, 96)).sum(axis=2) > 30
    assert changed.sum() > 20  # the patch is visible...
    assert set(np.unique(seg[changed]).tolist()) == {SEG_TABLE}  # ...and counts as table


def test_goal_patch_does_not_collide(backend):
    scene = make_scene()
    on_goal = dataclasses.replace(scene.objects[0], pos_m=(0.55, -0.15, 0.025))
    backend.build(dataclasses.replace(scene, objects=(on_goal, scene.objects[1])))
    backend.step(100)
    # rests on the table (z = 0), not on top of the patch
    assert backend.object_pose("red")[0][2] == pytest.approx(0.025, abs=1e-3)


def test_close_is_idempotent_and_blocks_use():
    b = PyBulletBackend()
    b.build(make_scene())
    b.close()
    b.close()
    with pytest.raises(RuntimeError):
        b.build(make_scene())


def test_invalid_arguments():
    with pytest.raises(ValueError):
        PyBulletBackend(physics_dt_s=0.0)
    with pytest.raises(ValueError):
        PyBulletBackend(renderer="opengl")


@pytest.mark.skipif(_egl_plugin_path() is None, reason="pybullet EGL plugin not installed")
def test_egl_renderer_optional():
    try:
        b = PyBulletBackend(renderer="egl")
    except RuntimeError as err:
        pytest.skip(f"EGL unavailable here: {err}")
    try:
        b.build(make_scene())
        img = b.render("front", 64, 64)
        seg = b.render_segmentation("front", 64, 64)
        assert img.shape == (64, 64, 3) and img.std() > 10
        assert SEG_OBJECT0 in seg and SEG_ROBOT in seg
    finally:
        b.close()


def test_agrees_with_mujoco_backend():
    """Same scene, same commands: the two engines should put things in the same places."""
    if "mujoco" not in sys.modules:  # mujoco picks its offscreen GL platform when imported
        os.environ.setdefault("MUJOCO_GL", "egl")
    pytest.importorskip("mujoco")
    from sim.backends.mujoco_backend import MuJoCoBackend

    scene = make_scene(blue_yaw=0.4)
    pb, mj = PyBulletBackend(), MuJoCoBackend()
    try:
        for b in (pb, mj):
            b.build(scene)
            b.step(100)
        for name in ("red", "blue"):
            np.testing.assert_allclose(pb.object_pose(name)[0], mj.object_pose(name)[0], atol=2e-3)
            np.testing.assert_allclose(pb.object_pose(name)[1], mj.object_pose(name)[1], atol=2e-3)
        widths = []
        for b in (pb, mj):  # descend onto the red cube and close on it
            q = np.array(Q_HOME_RAD)
            cube = np.array(b.object_pose("red")[0])
            q = move_tcp(b, q, cube + [0, 0, 0.1], 0.08, 20)
            q = move_tcp(b, q, cube, 0.08, 25)
            move_tcp(b, q, cube, 0.0, 15)
            assert b.fingers_touch("red")
            widths.append(b.gripper_width())
        # both stop on the 5 cm cube. PyBullet reads ~5.1 cm; MuJoCo's soft finger contacts sink
        # ~5 mm per side into the light cube and read ~4.0 cm, hence the loose bound.
        assert widths[0] == pytest.approx(0.05, abs=2e-3)
        assert 0.03 < widths[1] < 0.056
        try:
            seg_mj = mj.render_segmentation("front", 64, 64)
        except Exception as err:  # no offscreen GL for MuJoCo here: physics part still checked
            pytest.skip(f"MuJoCo renderer unavailable: {err}")
        pb.build(scene)
        mj.build(scene)
        seg_pb, seg_mj = pb.render_segmentation("front", 64, 64), mj.render_segmentation("front", 64, 64)
        for cls in (SEG_TABLE, SEG_ROBOT, SEG_OBJECT0, SEG_OBJECT0 + 1):
            n_pb, n_mj = (seg_pb == cls).sum(), (seg_mj == cls).sum()
            assert abs(int(n_pb) - int(n_mj)) <= 0.1 * n_mj + 5, (cls, n_pb, n_mj)
        assert (seg_pb == seg_mj).mean() > 0.95
    finally:
        pb.close()
        mj.close()


def test_render_depth_is_z_depth_in_metres(backend):
    backend.build(make_scene())
    d, seg = backend.render_depth("front", 96, 96), backend.render_segmentation("front", 96, 96)
    assert d.shape == (96, 96) and d.dtype == np.float32
    # the optical axis (1.3, 0, 0.45) -> (0.45, 0, 0.05) meets the table (z = 0) 1.057 m away
    # the axis passes between rows 47 and 48, so its depth lies between theirs
    assert d[48, 48] - 0.003 <= 1.0568 <= d[47, 48] + 0.003
    for row in (40, 72, 88):  # z-depth: constant along an image row of the flat table
        table = d[row][seg[row] == SEG_TABLE]
        assert len(table) > 40 and np.ptp(table) < 1e-3
    assert d[seg == SEG_BACKGROUND].min() == pytest.approx(5.0)  # the far plane
    gaps = []  # the red cube stands in front of the table seen in the same image rows
    for row in np.unique(np.nonzero(seg == SEG_OBJECT0)[0]):
        table = d[row][seg[row] == SEG_TABLE]
        if len(table):
            gaps.append(table.min() - d[row][seg[row] == SEG_OBJECT0].max())
    assert len(gaps) > 5 and min(gaps) > -0.005 and np.mean(gaps) > 0.01  # (its foot: the table's depth)
