"""The one kinematic model of the Franka Panda used by both engines, read from the URDF that ships
inside the ``pybullet_data`` wheel (no download). Forward kinematics to the tool centre
point (TCP, midway between the fingertips) and damped-least-squares inverse kinematics, in
plain floats and small numpy arrays (a control step evaluates them several times): the algorithm is
:class:`edge.kinematics.SerialChain` (shared with the safety layer and the hardware drivers), built
here from the URDF's numbers.

Both MuJoCo and PyBullet load the same URDF, so joint limits and link lengths agree; the env's IK
runs here, not inside either engine, so an end-effector action maps to the same joint targets in
both simulators.
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# the one kinematics algorithm (a numpy-only leaf module; tests/test_layering.py allows exactly this import)
from edge.kinematics import SerialChain, down_rotation, tcp_yaw  # noqa: F401 - down_rotation, tcp_yaw re-exported

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
# Fingertip centre below the hand frame: the URDF's panda_grasptarget frame.
TCP_OFFSET_M = 0.105
GRIPPER_MAX_WIDTH_M = 0.08
# A comfortable pose above the table, gripper pointing down (yaw 0 = fingers open along world y).
Q_HOME_RAD = (0.0, -0.30, 0.0, -2.30, 0.0, 2.00, 0.785398)


def urdf_path() -> Path:
    """Path of the Panda URDF inside the installed pybullet_data package."""
    try:
        import pybullet_data
    except ImportError as err:  # pragma: no cover - dependency of the package
        raise ImportError("pybullet is required for the Panda model: pip install pybullet") from err
    path = Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"
    if not path.is_file():
        raise FileNotFoundError(f"Panda URDF not found at {path}; reinstall pybullet")
    return path


def _rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    c, s, C = np.cos(angle), np.sin(angle), 1 - np.cos(angle)
    return np.array([
        [c + x * x * C, x * y * C - z * s, x * z * C + y * s],
        [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
        [z * x * C - y * s, z * y * C + x * s, c + z * z * C],
    ])


@dataclass(frozen=True)
class Joint:
    name: str
    kind: str
    parent: str
    child: str
    origin_T: np.ndarray  # (4, 4) parent link -> joint frame at q = 0
    axis: np.ndarray  # (3,) in the joint frame
    lower: float
    upper: float
    velocity: float
    effort: float


@functools.lru_cache(maxsize=1)
def load_joints() -> dict[str, Joint]:
    """Parse every joint of the URDF into :class:`Joint` records."""
    root = ET.parse(urdf_path()).getroot()
    joints = {}
    for j in root.findall("joint"):
        origin = j.find("origin")
        xyz = np.array([float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()])
        rpy = np.array([float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()])
        T = np.eye(4)
        T[:3, :3] = _rpy_matrix(rpy)
        T[:3, 3] = xyz
        axis_el = j.find("axis")
        axis = np.array([float(v) for v in axis_el.get("xyz").split()]) if axis_el is not None else np.zeros(3)
        lim = j.find("limit")
        get = (lambda k, d: float(lim.get(k, d))) if lim is not None else (lambda k, d: d)
        joints[j.get("name")] = Joint(
            name=j.get("name"), kind=j.get("type"), parent=j.find("parent").get("link"),
            child=j.find("child").get("link"), origin_T=T, axis=axis,
            lower=get("lower", 0.0), upper=get("upper", 0.0), velocity=get("velocity", 0.0),
            effort=get("effort", 0.0),
        )
    return joints


@functools.lru_cache(maxsize=1)
def _arm_limits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    js = load_joints()
    out = tuple(np.array([getattr(js[n], k) for n in ARM_JOINTS]) for k in ("lower", "upper", "velocity"))
    for a in out:
        a.flags.writeable = False  # shared by every caller
    return out


def arm_limits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower (7,), upper (7,) joint limits in rad and velocity limits (7,) in rad/s (read-only)."""
    return _arm_limits()


@functools.lru_cache(maxsize=1)
def _chain() -> tuple[list[Joint], np.ndarray]:
    """Arm joints in order, and the fixed transform from link7 to the TCP."""
    js = load_joints()
    arm = [js[n] for n in ARM_JOINTS]
    T = js["panda_joint8"].origin_T @ js["panda_hand_joint"].origin_T
    tcp = np.eye(4)
    tcp[2, 3] = TCP_OFFSET_M
    return arm, T @ tcp


@functools.lru_cache(maxsize=1)
def serial_chain() -> SerialChain:
    """The URDF's arm as the :class:`edge.kinematics.SerialChain` that :func:`fk` and :func:`ik_step` use:
    joint origins and link7 -> TCP from :func:`_chain`, URDF joint limits, home :data:`Q_HOME_RAD`."""
    arm, T_7_tcp = _chain()
    lo, hi, _ = _arm_limits()
    try:
        return SerialChain([j.origin_T for j in arm], T_7_tcp, lo, hi, Q_HOME_RAD,
                           joint_names=ARM_JOINTS, axes=[j.axis for j in arm])
    except ValueError as err:
        raise ValueError(f"{urdf_path()}: {err}") from err


def fk(q_rad) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TCP position (3,), rotation (3, 3) and the 6×7 geometric Jacobian (linear; angular).

    :meth:`edge.kinematics.SerialChain.fk` of :func:`serial_chain` (scalar float arithmetic).
    """
    return serial_chain().fk(q_rad)


def ik_step(
    q_rad: np.ndarray,
    target_pos_m: np.ndarray,
    target_R: np.ndarray,
    damping: float = 0.05,
    iters: int = 3,
    rot_weight: float = 0.5,
    fk_q: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Damped least squares IK: joint positions that move the TCP toward the target pose.

    A few Gauss-Newton iterations from ``q_rad``; results are kept inside the URDF limits (the
    env counts how often this bound is active). A null-space term pulls toward the home posture
    so the redundant joint does not drift. ``fk_q`` may pass ``fk(q_rad)`` if the caller has it.
    :meth:`edge.kinematics.SerialChain.ik_step` of :func:`serial_chain`.
    """
    return serial_chain().ik_step(q_rad, target_pos_m, target_R, damping, iters, rot_weight, fk_q)
