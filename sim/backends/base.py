"""The physics-backend interface every engine implements (MuJoCo, PyBullet).

The env, tasks and experts talk only to this interface, so a task behaves the same in both
engines. Conventions: world frame = robot base frame, table top at z = 0, metres/radians/seconds,
quaternions (w, x, y, z). The arm is the Franka Panda from ``pybullet_data/franka_panda/panda.urdf``
(see :mod:`sim.robot_model`): 7 revolute joints + two prismatic fingers moving symmetrically.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from sim.scene import Scene

# Segmentation ids: background/table/robot are 0/1/2, scene objects 10 + their index in scene.objects.
SEG_BACKGROUND, SEG_TABLE, SEG_ROBOT, SEG_OBJECT0 = 0, 1, 2, 10


class PhysicsBackend(Protocol):
    name: str
    physics_dt_s: float

    def build(self, scene: Scene) -> None:
        """(Re)create the world for ``scene``: table, robot at ``scene.q_home_rad``, objects, cameras, lights."""

    def reset_robot(self, q_rad: np.ndarray, gripper_width_m: float) -> None:
        """Teleport arm joints (7,) and fingers; zero velocities; targets = these positions."""

    def set_arm_targets(self, q_target_rad: np.ndarray) -> None:
        """Joint position targets (7,) for the arm's position servos."""

    def set_gripper_target(self, width_m: float) -> None:
        """Target opening between the fingers in [0, 0.08] m (force-limited, so it squeezes objects)."""

    def step(self, n_substeps: int) -> None:
        """Advance physics by ``n_substeps * physics_dt_s`` seconds."""

    def arm_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Joint positions (7,) rad and velocities (7,) rad/s."""

    def gripper_width(self) -> float:
        """Current opening between the fingers in metres."""

    def object_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Position (3,) m and quaternion (4,) wxyz of an object's centre."""

    def object_pose7(self, name: str) -> np.ndarray:
        """:meth:`object_pose` as one new (7,) array, xyz + wxyz, with the same numbers (the env's
        ``info["object_poses"]`` every step)."""

    def object_velocity(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Linear (3,) m/s in the world frame and angular (3,) rad/s in the object's own frame."""

    def fingers_touch(self, name: str) -> bool:
        """True if either finger is in contact with the object."""

    def render(self, camera: str, height: int, width: int) -> np.ndarray:
        """RGB image (H, W, 3) uint8 from the named camera."""

    def render_segmentation(self, camera: str, height: int, width: int) -> np.ndarray:
        """Per-pixel ids (H, W) int32 using the SEG_* convention above."""

    def render_depth(self, camera: str, height: int, width: int) -> np.ndarray:
        """Per-pixel distance (H, W) float32 in metres from the named camera's image plane (z-depth,
        as an RGB-D camera reports it)."""

    def close(self) -> None:
        """Free engine resources; the backend may not be used afterwards."""
