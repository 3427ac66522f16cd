"""PyBullet implementation of :class:`sim.backends.base.PhysicsBackend`.

Every call goes to this backend's own ``p.DIRECT`` physics client (never pybullet's global default
client), so several backends can live in one process.

World: the Panda from :func:`sim.robot_model.urdf_path` (fixed base at the origin, no self
collision), a static table box whose top face is z = 0, the scene's cubes (dynamic boxes) and goal
patches (thin boxes that collide with nothing). The robot and table are created once per backend;
``build()`` resets the robot, recolours the table and removes/re-adds cubes and patches, which
costs ~1 ms instead of ~15-60 ms for ``resetSimulation`` + reloading the URDF.

Rendering: TinyRenderer (CPU) by default. By default the robot is *drawn* with its collision meshes
(~3.5k triangles) instead of the URDF's visual meshes (~100k triangles): TinyRenderer time is
dominated by the robot's triangles, so this is ~10x faster, looks nearly the same at policy
resolutions, and is what the MuJoCo backend draws by default too. Physics is unaffected: collision
shapes and inertials come from the same URDF. Lighting, background and the wrist-camera mount
follow the MuJoCo backend so images from the two engines look alike. pybullet's EGL plugin
(OpenGL; Mesa llvmpipe on a CPU-only machine) can be chosen with ``renderer="egl"``; it loads on a
CPU-only machine but is slower there than TinyRenderer and shades differently (its own light).
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pybullet as p

from sim.backends.base import SEG_BACKGROUND, SEG_OBJECT0, SEG_ROBOT, SEG_TABLE
from sim.robot_model import ARM_JOINTS, FINGER_JOINTS, GRIPPER_MAX_WIDTH_M, urdf_path
from sim.scene import BoxObject, Camera, GoalPatch, Scene

# Table: a static box whose top face is at z = 0 (same size and place as the MuJoCo backend's).
TABLE_HALF_SIZE_M = (0.6, 0.6, 0.02)
TABLE_CENTER_XY_M = (0.5, 0.0)
TABLE_FRICTION = 1.0
# Goal patches: visual-only slabs just above the table (no z-fighting); segmented as table.
GOAL_HALF_THICKNESS_M = 0.0005
GOAL_CENTER_Z_M = 0.0006

# Arm servo: pybullet's POSITION_CONTROL motor asks each joint for velocity
# kp * (q_target - q) / dt + kd * (0 - qdot) relative to its current velocity, capped by the URDF
# effort. kp = dt / tau makes the tracking time constant tau independent of physics_dt_s.
ARM_TRACK_TAU_S = 0.02
ARM_VELOCITY_GAIN = 1.0
ARM_JOINT_DAMPING = 0.5  # N m s / rad, on top of the servo
# Gripper: both fingers servo to width/2 with at most this force each, at most the URDF speed of
# 0.2 m/s. pybullet's motor always squeezes with the full force once blocked; MuJoCo's P servo
# (kp 800 N/m, limit 30 N) squeezes a 4-5 cm cube with ~16-20 N, so 20 N (the URDF effort) keeps
# the two engines' grasps alike.
GRIPPER_FORCE_N = 20.0
GRIPPER_TRACK_TAU_S = 0.02
GRIPPER_MAX_SPEED_M_S = 0.2
FINGER_COUPLING_ERP = 0.1
FINGER_COUPLING_FORCE_N = 100.0
# Friction. Bullet combines lateral friction as the product a*b and spinning (torsional) friction
# as s_a*f_b + s_b*f_a; MuJoCo takes the max. With these values cube-table = the cube's own
# coefficient, finger-cube = 1.5x it (MuJoCo: max(1.5, mu)), and every torsional coefficient is
# ~0.01 m like MuJoCo's condim-4 contacts.
FINGER_FRICTION = 1.5
SPINNING_FRICTION = 0.005  # fingers, table and cubes alike
SOLVER_ITERATIONS = 50
# pybullet never frees a collision shape once a body used it; shapes are reused per size, and the
# world is recreated from scratch when this many distinct sizes have piled up.
MAX_CACHED_SHAPES = 256

CAMERA_NEAR_M = 0.01
CAMERA_FAR_M = 5.0
# A scene camera named "wrist" rides on the hand (its pos/target are ignored, its fovy is used),
# mounted like the MuJoCo backend's: in the panda_hand frame 8 cm along x and 2 cm toward the
# fingertips, looking along the fingers (+z), image up = -x.
WRIST_CAMERA = "wrist"
WRIST_CAM_POS_IN_HAND_M = (0.08, 0.0, 0.02)
WRIST_CAM_FORWARD_IN_HAND = (0.0, 0.0, 1.0)
WRIST_CAM_UP_IN_HAND = (-1.0, 0.0, 0.0)
# TinyRenderer has one directional light: the scene lights are merged into it (directions from
# the workspace centre toward each light, weighted by diffuse; diffuse summed), plus ambient.
# Ambient/scale were fitted so per-class mean colours (table, robot, cubes) match the MuJoCo
# backend's images within ~7/255 on randomised train scenes.
LIGHT_AIM_M = (0.5, 0.0, 0.0)
LIGHT_AMBIENT = 0.4
LIGHT_DIFFUSE_SCALE = 0.7
LIGHT_SPECULAR = 0.0
# Pixels that hit nothing (TinyRenderer clears to white) get MuJoCo's black (skybox off).
BACKGROUND_RGB = (0, 0, 0)

_RENDERERS = ("tiny", "egl")
_ROBOT_MESHES = ("collision", "visual")


def _robot_urdf(meshes: str) -> str:
    """URDF to load: the shared one, or a copy whose <visual> meshes are the collision meshes."""
    src = urdf_path()
    if meshes == "visual":
        return str(src)
    path = _PROXY_URDF.get(src)
    if path is None or not os.path.isfile(path):
        mesh_dir = src.parent.as_posix() + "/"
        text = src.read_text().replace("package://meshes/visual/", "package://meshes/collision/")
        text = text.replace("package://", mesh_dir)  # absolute paths: the copy lives elsewhere
        fd, path = tempfile.mkstemp(prefix="panda_collision_visuals_", suffix=".urdf")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        atexit.register(_remove_quietly, path)
        _PROXY_URDF[src] = path
    return path


_PROXY_URDF: dict[Path, str] = {}


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _egl_plugin_path() -> str | None:
    spec = importlib.util.find_spec("eglRenderer")
    return spec.origin if spec is not None and spec.origin else None


class PyBulletBackend:
    """The Franka tabletop world in PyBullet (see the module docstring)."""

    name = "pybullet"

    def __init__(
        self, physics_dt_s: float = 0.002, renderer: str | None = None, robot_meshes: str | None = None,
    ) -> None:
        """``renderer``: "tiny" (default) or "egl"; ``robot_meshes``: what the robot is drawn with,
        "collision" (default, fast) or "visual" (the URDF's detailed meshes). Defaults can be set with
        the environment variables SIM_PYBULLET_RENDERER and SIM_PYBULLET_ROBOT_MESHES."""
        if not physics_dt_s > 0:
            raise ValueError(f"physics_dt_s must be positive, got {physics_dt_s}")
        renderer = renderer or os.environ.get("SIM_PYBULLET_RENDERER") or "tiny"
        robot_meshes = robot_meshes or os.environ.get("SIM_PYBULLET_ROBOT_MESHES") or "collision"
        if renderer not in _RENDERERS:
            raise ValueError(f"renderer must be one of {_RENDERERS}, got {renderer!r}")
        if robot_meshes not in _ROBOT_MESHES:
            raise ValueError(f"robot_meshes must be one of {_ROBOT_MESHES}, got {robot_meshes!r}")
        self.physics_dt_s = float(physics_dt_s)
        self.renderer = renderer
        self.robot_meshes = robot_meshes
        self._closed = True
        self._cid = p.connect(p.DIRECT)
        if self._cid < 0:
            raise RuntimeError("pybullet could not create a DIRECT physics client")
        self._closed = False
        self._egl_plugin = -1
        if renderer == "egl":
            plugin = _egl_plugin_path()
            self._egl_plugin = p.loadPlugin(plugin, "_eglRendererPlugin", physicsClientId=self._cid) if plugin else -1
            if self._egl_plugin < 0:
                self.close()
                raise RuntimeError("pybullet's EGL renderer plugin did not load; use renderer='tiny'")
        self._robot = -1
        self._table = -1
        self._shapes: dict[tuple, int] = {}  # rounded box half extents -> collision shape id
        self._objects: dict[str, int] = {}  # name -> body id
        self._goals: list[int] = []
        self._cameras: dict[str, Camera] = {}
        self._view: dict[str, list[float]] = {}
        self._light: dict = {}
        self._seg_lut = np.zeros(1, dtype=np.int32)

    @property
    def client_id(self) -> int:
        """This backend's pybullet physics client id (for diagnostics and tests)."""
        return self._cid

    # ----------------------------------------------------------------- setup
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("PyBulletBackend used after close()")

    def _create_world(self) -> None:
        """Engine settings, table and robot (once per backend, or when the shape cache is full)."""
        c = self._cid
        p.resetSimulation(physicsClientId=c)
        self._shapes, self._objects, self._goals = {}, {}, []
        p.setGravity(0.0, 0.0, -9.81, physicsClientId=c)
        p.setPhysicsEngineParameter(
            fixedTimeStep=self.physics_dt_s, numSubSteps=0, numSolverIterations=SOLVER_ITERATIONS,
            deterministicOverlappingPairs=1, physicsClientId=c,
        )
        hx, hy, hz = TABLE_HALF_SIZE_M
        col = p.createCollisionShape(p.GEOM_BOX, halfExtents=[hx, hy, hz], physicsClientId=c)
        self._table = p.createMultiBody(
            baseMass=0.0, baseCollisionShapeIndex=col, baseVisualShapeIndex=-1,
            basePosition=[TABLE_CENTER_XY_M[0], TABLE_CENTER_XY_M[1], -hz], physicsClientId=c,
        )
        p.changeDynamics(self._table, -1, lateralFriction=TABLE_FRICTION, spinningFriction=SPINNING_FRICTION,
                         restitution=0.0, physicsClientId=c)

        # No URDF_USE_SELF_COLLISION flag: links (fingers included) never collide with each other.
        self._robot = p.loadURDF(
            _robot_urdf(self.robot_meshes), basePosition=[0, 0, 0], useFixedBase=True,
            flags=p.URDF_ENABLE_CACHED_GRAPHICS_SHAPES, physicsClientId=c,
        )
        n_joints = p.getNumJoints(self._robot, physicsClientId=c)
        info = [p.getJointInfo(self._robot, j, physicsClientId=c) for j in range(n_joints)]
        index = {i[1].decode(): i[0] for i in info}
        self._arm = [index[n] for n in ARM_JOINTS]
        self._fingers = [index[n] for n in FINGER_JOINTS]
        self._arm_effort = [info[j][10] for j in self._arm]
        self._hand = index["panda_hand_joint"]  # a link's index is that of its parent joint
        for j in self._arm:
            p.changeDynamics(self._robot, j, jointDamping=ARM_JOINT_DAMPING, physicsClientId=c)
        for j in self._fingers:
            p.changeDynamics(self._robot, j, lateralFriction=FINGER_FRICTION,
                             spinningFriction=SPINNING_FRICTION, frictionAnchor=True,
                             physicsClientId=c)
        # Couple the fingers like the real hand's mechanism: q_finger1 = q_finger2, so a grasped
        # cube stays centred instead of sliding along the closing axis under inertial loads.
        gear = p.createConstraint(
            self._robot, self._fingers[0], self._robot, self._fingers[1], jointType=p.JOINT_GEAR,
            jointAxis=[1, 0, 0], parentFramePosition=[0, 0, 0], childFramePosition=[0, 0, 0],
            physicsClientId=c,
        )
        p.changeConstraint(gear, gearRatio=-1, erp=FINGER_COUPLING_ERP, maxForce=FINGER_COUPLING_FORCE_N,
                           physicsClientId=c)
        self._arm_kp = [min(1.0, self.physics_dt_s / ARM_TRACK_TAU_S)] * 7
        self._arm_kd = [ARM_VELOCITY_GAIN] * 7
        self._finger_kp = min(1.0, self.physics_dt_s / GRIPPER_TRACK_TAU_S)

    def build(self, scene: Scene) -> None:
        self._check_open()
        if len(scene.q_home_rad) != 7:
            raise ValueError(f"scene.q_home_rad needs 7 joint angles, got {len(scene.q_home_rad)}")
        names = [o.name for o in scene.objects]
        if len(set(names)) != len(names):
            raise ValueError(f"scene object names must be unique, got {names}")
        c = self._cid
        if self._robot < 0 or len(self._shapes) > MAX_CACHED_SHAPES:
            self._create_world()
        else:
            for body in (*self._objects.values(), *self._goals):
                p.removeBody(body, physicsClientId=c)
            self._objects, self._goals = {}, []

        p.changeVisualShape(self._table, -1, rgbaColor=list(scene.table_rgba), physicsClientId=c)
        self.reset_robot(np.asarray(scene.q_home_rad, dtype=float), GRIPPER_MAX_WIDTH_M)
        for obj in scene.objects:
            self._objects[obj.name] = self._add_box(obj)
        for goal in scene.goals:
            self._goals.append(self._add_goal(goal))

        self._cameras = {cam.name: cam for cam in scene.cameras}
        self._view = {
            cam.name: p.computeViewMatrix(list(cam.pos_m), list(cam.target_m), list(cam.up), physicsClientId=c)
            for cam in scene.cameras if cam.name != WRIST_CAMERA
        }
        self._light = {"lightAmbientCoeff": LIGHT_AMBIENT, "lightSpecularCoeff": LIGHT_SPECULAR}
        if scene.lights:
            direction = np.zeros(3)
            for light in scene.lights:
                d = np.array(light.pos_m, dtype=float) - np.array(LIGHT_AIM_M)
                direction += float(light.diffuse) * d / max(np.linalg.norm(d), 1e-9)
            if np.linalg.norm(direction) > 1e-9:
                self._light["lightDirection"] = (direction / np.linalg.norm(direction)).tolist()
            total = min(1.0, sum(float(lt.diffuse) for lt in scene.lights))
            self._light["lightDiffuseCoeff"] = LIGHT_DIFFUSE_SCALE * total
        else:
            self._light["lightDiffuseCoeff"] = 0.0
        # Segmentation: (pybullet body id + 1) -> SEG_* id; pybullet's -1 (nothing) maps to index 0.
        lut = np.full(max(self._robot, self._table, *self._objects.values(), *self._goals) + 2,
                      SEG_BACKGROUND, dtype=np.int32)
        lut[self._table + 1] = SEG_TABLE
        for goal in self._goals:
            lut[goal + 1] = SEG_TABLE  # a patch is marked on the table (as in the MuJoCo backend)
        lut[self._robot + 1] = SEG_ROBOT
        for i, obj in enumerate(scene.objects):
            lut[self._objects[obj.name] + 1] = SEG_OBJECT0 + i
        self._seg_lut = lut

    def _box_shape(self, half: tuple[float, float, float]) -> int:
        key = tuple(round(float(v), 6) for v in half)
        shape = self._shapes.get(key)
        if shape is None:
            shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=list(key), physicsClientId=self._cid)
            self._shapes[key] = shape
        return shape

    def _add_box(self, obj: BoxObject) -> int:
        c = self._cid
        # Collision shape only: both renderers draw it, and changeVisualShape colours it (no
        # per-build visual shapes, which pybullet could never free).
        body = p.createMultiBody(
            baseMass=float(obj.mass_kg), baseCollisionShapeIndex=self._box_shape(obj.half_size_m),
            baseVisualShapeIndex=-1, basePosition=[float(v) for v in obj.pos_m],
            baseOrientation=p.getQuaternionFromEuler([0.0, 0.0, float(obj.yaw_rad)]), physicsClientId=c,
        )
        p.changeVisualShape(body, -1, rgbaColor=list(obj.rgba), physicsClientId=c)
        p.changeDynamics(
            body, -1, lateralFriction=float(obj.friction), spinningFriction=SPINNING_FRICTION,
            rollingFriction=0.0, restitution=0.0, linearDamping=0.0, angularDamping=0.0,
            frictionAnchor=True, physicsClientId=c,
        )
        return body

    def _add_goal(self, goal: GoalPatch) -> int:
        c = self._cid
        hx, hy = (float(v) for v in goal.half_size_m)
        body = p.createMultiBody(
            baseMass=0.0, baseCollisionShapeIndex=self._box_shape((hx, hy, GOAL_HALF_THICKNESS_M)),
            baseVisualShapeIndex=-1, basePosition=[float(goal.center_m[0]), float(goal.center_m[1]), GOAL_CENTER_Z_M],
            physicsClientId=c,
        )
        p.setCollisionFilterGroupMask(body, -1, 0, 0, physicsClientId=c)  # visual only
        p.changeVisualShape(body, -1, rgbaColor=list(goal.rgba), physicsClientId=c)
        return body

    # ----------------------------------------------------------------- robot
    def reset_robot(self, q_rad: np.ndarray, gripper_width_m: float) -> None:
        self._check_open()
        q = np.asarray(q_rad, dtype=float).reshape(7)
        half = float(np.clip(gripper_width_m, 0.0, GRIPPER_MAX_WIDTH_M)) / 2
        for j, qj in zip(self._arm, q, strict=True):
            p.resetJointState(self._robot, j, float(qj), 0.0, physicsClientId=self._cid)
        for j in self._fingers:
            p.resetJointState(self._robot, j, half, 0.0, physicsClientId=self._cid)
        self.set_arm_targets(q)
        self.set_gripper_target(2 * half)

    def set_arm_targets(self, q_target_rad: np.ndarray) -> None:
        q = np.asarray(q_target_rad, dtype=float).reshape(7)
        p.setJointMotorControlArray(
            self._robot, self._arm, p.POSITION_CONTROL, targetPositions=q.tolist(),
            targetVelocities=[0.0] * 7, forces=self._arm_effort, positionGains=self._arm_kp,
            velocityGains=self._arm_kd, physicsClientId=self._cid,
        )

    def set_gripper_target(self, width_m: float) -> None:
        # np.clip returns a value inside the bounds unchanged, so it is only called outside them
        w = width_m if 0.0 <= width_m <= GRIPPER_MAX_WIDTH_M else np.clip(width_m, 0.0, GRIPPER_MAX_WIDTH_M)
        half = float(w) / 2
        for j in self._fingers:
            p.setJointMotorControl2(
                self._robot, j, p.POSITION_CONTROL, targetPosition=half, targetVelocity=0.0,
                force=GRIPPER_FORCE_N, positionGain=self._finger_kp, velocityGain=1.0,
                maxVelocity=GRIPPER_MAX_SPEED_M_S, physicsClientId=self._cid,
            )

    def step(self, n_substeps: int) -> None:
        c = self._cid
        for _ in range(int(n_substeps)):
            p.stepSimulation(physicsClientId=c)

    def arm_state(self) -> tuple[np.ndarray, np.ndarray]:
        states = p.getJointStates(self._robot, self._arm, physicsClientId=self._cid)
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])

    def gripper_width(self) -> float:
        states = p.getJointStates(self._robot, self._fingers, physicsClientId=self._cid)
        return float(states[0][0] + states[1][0])

    # --------------------------------------------------------------- objects
    def _body(self, name: str) -> int:
        try:
            return self._objects[name]
        except KeyError:
            raise KeyError(f"no object {name!r}; objects: {list(self._objects)}") from None

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        pos, (x, y, z, w) = p.getBasePositionAndOrientation(self._body(name), physicsClientId=self._cid)
        quat = np.array([w, x, y, z])  # pybullet is xyzw
        return np.array(pos), quat / math.sqrt(quat.dot(quat))  # sqrt(dot): np.linalg.norm's own formula

    def object_pose7(self, name: str) -> np.ndarray:
        """:meth:`object_pose` as one (7,) array, xyz + wxyz (the same numbers)."""
        pos, (x, y, z, w) = p.getBasePositionAndOrientation(self._body(name), physicsClientId=self._cid)
        out = np.array([*pos, w, x, y, z])
        quat = out[3:]
        quat /= math.sqrt(quat.dot(quat))
        return out

    def object_velocity(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Linear velocity in the world frame, angular velocity in the object's own frame (what a
        MuJoCo free joint reports, so both backends agree)."""
        body = self._body(name)
        lin, ang_world = p.getBaseVelocity(body, physicsClientId=self._cid)
        _, orn = p.getBasePositionAndOrientation(body, physicsClientId=self._cid)
        R = np.array(p.getMatrixFromQuaternion(orn)).reshape(3, 3)
        return np.array(lin), R.T @ np.array(ang_world)

    def fingers_touch(self, name: str) -> bool:
        body = self._body(name)
        return any(
            len(p.getContactPoints(self._robot, body, linkIndexA=j, physicsClientId=self._cid)) > 0
            for j in self._fingers
        )

    # ------------------------------------------------------------- rendering
    def _wrist_view(self) -> list[float]:
        state = p.getLinkState(self._robot, self._hand, computeForwardKinematics=True, physicsClientId=self._cid)
        pos, orn = np.array(state[4]), state[5]  # the URDF link frame (not the inertial frame)
        R = np.array(p.getMatrixFromQuaternion(orn)).reshape(3, 3)
        eye = pos + R @ np.array(WRIST_CAM_POS_IN_HAND_M)
        target = eye + R @ np.array(WRIST_CAM_FORWARD_IN_HAND)
        return p.computeViewMatrix(eye.tolist(), target.tolist(), (R @ np.array(WRIST_CAM_UP_IN_HAND)).tolist(),
                                   physicsClientId=self._cid)

    def _camera_image(self, camera: str, height: int, width: int, segmentation: bool,
                      depth: bool = False) -> tuple:
        self._check_open()
        if camera not in self._cameras:
            raise KeyError(f"no camera {camera!r}; cameras: {list(self._cameras)}")
        view = self._wrist_view() if camera == WRIST_CAMERA else self._view[camera]
        proj = p.computeProjectionMatrixFOV(
            fov=float(self._cameras[camera].fovy_deg), aspect=width / height,
            nearVal=CAMERA_NEAR_M, farVal=CAMERA_FAR_M, physicsClientId=self._cid,
        )
        _, _, rgba, zbuf, seg = p.getCameraImage(
            width, height, viewMatrix=view, projectionMatrix=proj,
            renderer=p.ER_BULLET_HARDWARE_OPENGL if self.renderer == "egl" else p.ER_TINY_RENDERER,
            flags=0 if segmentation else p.ER_NO_SEGMENTATION_MASK, shadow=0,
            physicsClientId=self._cid, **self._light,
        )
        return (rgba, seg, zbuf) if depth else (rgba, seg)

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        height, width = int(height), int(width)
        rgba, seg = self._camera_image(camera, height, width, segmentation=True)
        rgb = np.asarray(rgba, dtype=np.uint8).reshape(height, width, 4)[:, :, :3].copy()
        rgb[np.asarray(seg).reshape(height, width) < 0] = BACKGROUND_RGB
        return rgb

    def render_depth(self, camera: str, height: int, width: int) -> np.ndarray:
        height, width = int(height), int(width)
        _, _, zbuf = self._camera_image(camera, height, width, segmentation=False, depth=True)
        z = np.asarray(zbuf, dtype=np.float64).reshape(height, width)  # OpenGL depth buffer in [0, 1]
        n, f = CAMERA_NEAR_M, CAMERA_FAR_M
        return (f * n / (f - (f - n) * z)).astype(np.float32)  # linearised: metres from the image plane

    def render_segmentation(self, camera: str, height: int, width: int) -> np.ndarray:
        height, width = int(height), int(width)
        _, seg = self._camera_image(camera, height, width, segmentation=True)
        ids = np.asarray(seg, dtype=np.int64).reshape(height, width) + 1
        ids[(ids < 0) | (ids >= len(self._seg_lut))] = 0
        return self._seg_lut[ids]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._egl_plugin >= 0:
                p.unloadPlugin(self._egl_plugin, physicsClientId=self._cid)
            p.disconnect(physicsClientId=self._cid)
        except p.error:
            pass

    def __del__(self) -> None:  # a forgotten backend must not keep its physics client alive
        try:
            self.close()
        except Exception:
            pass
