"""What the runtime must know about a robot arm: limits, workspace, control rate, action layout and a
small kinematic chain for forward kinematics. Loaded from ``configs/robots/<name>.yaml`` (values
only) and validated before anything moves.

Frames: base frame = world frame; x forward, y left, z up; table top at ``table_z_m`` (0 for the
shipped scenes). The chain is a list of revolute joints rotating about their local z axis, each with
an origin ``xyz``/``rpy`` relative to the previous joint frame (URDF convention), then a fixed
flange -> tool-centre-point (TCP) transform; :attr:`RobotSpec.kinematics` is that chain as an
:class:`edge.kinematics.SerialChain` (the runtime's one FK/Jacobian/IK implementation).

Example::

    spec = load_robot_spec("panda")
    p_m, R = spec.fk(spec.q_home())          # TCP position (3,) and rotation (3, 3)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge.config import ConfigError, cfg, check_fields, load_config
from edge.contracts import ACTION_LAYOUTS
from edge.kinematics import SerialChain, tcp_yaw
from edge.resources import config_dir

ROBOTS_DIR = config_dir("robots")
Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class RobotSpec:
    """A robot arm's limits and conventions (one YAML file per robot)."""

    name: str = cfg("robot", "robot name (used in run records)")
    joint_names: tuple[str, ...] = cfg((), "arm joint names, base to tip")
    q_min_rad: tuple[float, ...] = cfg((), "lower joint position limits", range=(-7.0, 7.0))
    q_max_rad: tuple[float, ...] = cfg((), "upper joint position limits", range=(-7.0, 7.0))
    qd_max_rad_s: tuple[float, ...] = cfg((), "joint velocity limits", range=(0.0, 50.0))
    qdd_max_rad_s2: tuple[float, ...] = cfg((), "joint acceleration limits", range=(0.0, 500.0))
    q_home_rad: tuple[float, ...] = cfg((), "home posture", range=(-7.0, 7.0))
    workspace_min_m: Vec3 = cfg((0.0, 0.0, 0.0), "TCP workspace box, lower corner (base frame)")
    workspace_max_m: Vec3 = cfg((1.0, 1.0, 1.0), "TCP workspace box, upper corner (base frame)")
    table_z_m: float = cfg(0.0, "height of the table plane the TCP must stay above", range=(-2.0, 2.0))
    control_rate_hz: float = cfg(20.0, "control rate the policy and loop must use", range=(1.0, 2000.0))
    action_layout: str = cfg("ee_delta", "action layout the robot is driven with", choices=ACTION_LAYOUTS)
    action_names: tuple[str, ...] = cfg((), "names of the action dimensions (empty: from the layout)")
    gripper_range: tuple[float, float] = cfg((0.0, 1.0), "allowed gripper command (0 open .. 1 closed)")
    joint_origin_xyz_m: tuple[tuple[float, ...], ...] = cfg((), "per joint: origin offset (URDF)")
    joint_origin_rpy_rad: tuple[tuple[float, ...], ...] = cfg((), "per joint: origin roll/pitch/yaw")
    tcp_xyz_m: Vec3 = cfg((0.0, 0.0, 0.0), "last joint frame -> TCP offset")
    tcp_rpy_rad: Vec3 = cfg((0.0, 0.0, 0.0), "last joint frame -> TCP rotation")

    def __post_init__(self) -> None:
        check_fields(self)
        n = len(self.joint_names)
        if n == 0:
            raise ConfigError(f"robot {self.name!r}: joint_names is empty")
        for key in (
            "q_min_rad",
            "q_max_rad",
            "qd_max_rad_s",
            "qdd_max_rad_s2",
            "q_home_rad",
            "joint_origin_xyz_m",
            "joint_origin_rpy_rad",
        ):
            if len(getattr(self, key)) != n:
                raise ConfigError(
                    f"robot {self.name!r}: {key} has {len(getattr(self, key))} "
                    f"values, expected one per joint ({n})"
                )
        for key in ("joint_origin_xyz_m", "joint_origin_rpy_rad"):
            if any(len(v) != 3 for v in getattr(self, key)):
                raise ConfigError(f"robot {self.name!r}: every entry of {key} needs 3 values")
        lo, hi = np.array(self.q_min_rad), np.array(self.q_max_rad)
        if np.any(lo >= hi):
            j = int(np.argmax(lo >= hi))
            raise ConfigError(f"robot {self.name!r}: q_min_rad[{j}]={lo[j]} >= q_max_rad[{j}]={hi[j]}")
        home = np.array(self.q_home_rad)
        if np.any(home < lo) or np.any(home > hi):
            raise ConfigError(f"robot {self.name!r}: q_home_rad {list(home)} is outside the limits")
        if any(a >= b for a, b in zip(self.workspace_min_m, self.workspace_max_m, strict=True)):
            raise ConfigError(
                f"robot {self.name!r}: workspace_min_m {self.workspace_min_m} must be "
                f"below workspace_max_m {self.workspace_max_m} on every axis"
            )
        if self.gripper_range[0] >= self.gripper_range[1]:
            raise ConfigError(f"robot {self.name!r}: gripper_range {self.gripper_range} is empty")
        if not self.action_names:
            object.__setattr__(self, "action_names", default_action_names(self.action_layout, n))
        if len(self.action_names) != self.action_dim:
            raise ConfigError(
                f"robot {self.name!r}: action_names has {len(self.action_names)} names "
                f"but layout {self.action_layout!r} has {self.action_dim} dimensions"
            )
        try:
            self.kinematics  # noqa: B018 - build (and cache) the chain now: a bad one fails at load
        except ValueError as err:
            raise ConfigError(f"robot {self.name!r}: kinematic chain: {err}") from err

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)

    @property
    def action_dim(self) -> int:
        """5 for ``ee_delta``; joints + 1 (gripper) for ``joint_pos``."""
        return 5 if self.action_layout == "ee_delta" else self.n_joints + 1

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_rate_hz

    def q_home(self) -> np.ndarray:
        return np.array(self.q_home_rad, dtype=np.float64)

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper joint limits (n,) in rad."""
        return np.array(self.q_min_rad), np.array(self.q_max_rad)

    def fk(self, q_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP position (3,) in metres and rotation (3, 3) in the base frame for joints (n,)."""
        return self.kinematics.fk_pose(q_rad)

    @functools.cached_property
    def kinematics(self) -> SerialChain:
        """The arm's :class:`edge.kinematics.SerialChain` (FK, Jacobian, IK step), built once per spec."""
        return SerialChain.from_spec(self)

    def tcp_yaw(self, q_rad: np.ndarray) -> float:
        """Yaw of the TCP about world z (angle of its x axis), for a gripper pointing down."""
        _, R = self.fk(q_rad)
        return tcp_yaw(R)


def default_action_names(layout: str, n_joints: int) -> tuple[str, ...]:
    """``ee_delta``: dx_m, dy_m, dz_m, dyaw_rad, gripper; ``joint_pos``: q0_rad .. q{n-1}_rad, gripper."""
    if layout == "ee_delta":
        return ("dx_m", "dy_m", "dz_m", "dyaw_rad", "gripper")
    return tuple(f"q{i}_rad" for i in range(n_joints)) + ("gripper",)


def load_robot_spec(name_or_path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RobotSpec:
    """Load ``configs/robots/<name>.yaml`` (or a YAML path) with ``key=value`` overrides."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = ROBOTS_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in ROBOTS_DIR.glob("*.yaml"))
            raise ConfigError(
                f"unknown robot {str(name_or_path)!r}; known robots: {', '.join(known)} "
                f"(or pass a path to a robot YAML)"
            )
    return load_config(RobotSpec, path, overrides)
