"""The one kinematic model of the Franka Panda used by both engines, read from the URDF that ships
inside the ``pybullet_data`` wheel (no download). Forward kinematics to the tool centre
point (TCP, midway between the fingertips) and damped-least-squares inverse kinematics, in
plain floats and small numpy arrays (a control step evaluates them several times).

Both MuJoCo and PyBullet load the same URDF, so joint limits and link lengths agree; the env's IK
runs here, not inside either engine, so an end-effector action maps to the same joint targets in
both simulators.
"""

from __future__ import annotations

import functools
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
    for j in arm:
        if not np.allclose(j.axis, (0.0, 0.0, 1.0)):
            raise ValueError(f"{urdf_path()}: joint {j.name} axis {j.axis} is not z; fk() assumes z axes")
    T = js["panda_joint8"].origin_T @ js["panda_hand_joint"].origin_T
    tcp = np.eye(4)
    tcp[2, 3] = TCP_OFFSET_M
    return arm, T @ tcp


@functools.lru_cache(maxsize=1)
def _chain_floats() -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]:
    """:func:`_chain` as plain floats: per joint (R row-major 9, t 3) and the link7 -> TCP transform."""
    arm, T_7_tcp = _chain()
    joints = tuple((*map(float, j.origin_T[:3, :3].reshape(-1)), *map(float, j.origin_T[:3, 3])) for j in arm)
    return joints, (*map(float, T_7_tcp[:3, :3].reshape(-1)), *map(float, T_7_tcp[:3, 3]))


def fk(q_rad) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TCP position (3,), rotation (3, 3) and the 6×7 geometric Jacobian (linear; angular).

    Scalar arithmetic on Python floats: a 7-joint chain of 3×3 products is ~50 tiny operations,
    for which numpy's per-call overhead dominates (this form is ~5x faster than the same
    products on (4, 4) arrays and agrees with them to 1e-16).
    """
    joints, (b0, b1, b2, b3, b4, b5, b6, b7, b8, bx, by, bz) = _chain_floats()
    cos, sin = math.cos, math.sin
    r0 = r4 = r8 = 1.0
    r1 = r2 = r3 = r5 = r6 = r7 = 0.0
    px = py = pz = 0.0
    ox, oy, oz, ax, ay, az = [], [], [], [], [], []
    for (a0, a1, a2, a3, a4, a5, a6, a7, a8, tx, ty, tz), q in zip(joints, q_rad.tolist() if hasattr(q_rad, "tolist") else q_rad):
        # joint frame = parent frame * origin; then the rotation about the joint's local z
        px, py, pz = px + r0 * tx + r1 * ty + r2 * tz, py + r3 * tx + r4 * ty + r5 * tz, pz + r6 * tx + r7 * ty + r8 * tz
        n0, n1, n2 = r0 * a0 + r1 * a3 + r2 * a6, r0 * a1 + r1 * a4 + r2 * a7, r0 * a2 + r1 * a5 + r2 * a8
        n3, n4, n5 = r3 * a0 + r4 * a3 + r5 * a6, r3 * a1 + r4 * a4 + r5 * a7, r3 * a2 + r4 * a5 + r5 * a8
        n6, n7, n8 = r6 * a0 + r7 * a3 + r8 * a6, r6 * a1 + r7 * a4 + r8 * a7, r6 * a2 + r7 * a5 + r8 * a8
        ox.append(px)
        oy.append(py)
        oz.append(pz)
        ax.append(n2)  # every Panda arm joint turns about its local z (checked in _chain)
        ay.append(n5)
        az.append(n8)
        c, s = cos(q), sin(q)
        r0, r1, r2 = c * n0 + s * n1, c * n1 - s * n0, n2
        r3, r4, r5 = c * n3 + s * n4, c * n4 - s * n3, n5
        r6, r7, r8 = c * n6 + s * n7, c * n7 - s * n6, n8
    px, py, pz = px + r0 * bx + r1 * by + r2 * bz, py + r3 * bx + r4 * by + r5 * bz, pz + r6 * bx + r7 * by + r8 * bz
    R = np.array(((r0 * b0 + r1 * b3 + r2 * b6, r0 * b1 + r1 * b4 + r2 * b7, r0 * b2 + r1 * b5 + r2 * b8),
                  (r3 * b0 + r4 * b3 + r5 * b6, r3 * b1 + r4 * b4 + r5 * b7, r3 * b2 + r4 * b5 + r5 * b8),
                  (r6 * b0 + r7 * b3 + r8 * b6, r6 * b1 + r7 * b4 + r8 * b7, r6 * b2 + r7 * b5 + r8 * b8)))
    lin = [(y * (pz - zo) - z * (py - yo), z * (px - xo) - x * (pz - zo), x * (py - yo) - y * (px - xo))
           for x, y, z, xo, yo, zo in zip(ax, ay, az, ox, oy, oz)]
    J = np.array((*zip(*lin), ax, ay, az))
    return np.array((px, py, pz)), R, J


def tcp_yaw(R: np.ndarray) -> float:
    """Yaw of the gripper about world z (the angle of the finger-closing axis, gripper pointing down)."""
    return float(np.arctan2(R[1, 0], R[0, 0]))


def down_rotation(yaw_rad: float) -> np.ndarray:
    """Target TCP orientation: z pointing down, rotated by ``yaw_rad`` about world z."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])


_HOME = np.array(Q_HOME_RAD)
_HOME.flags.writeable = False


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
    """
    lo, hi, _ = _arm_limits()
    q = np.array(q_rad, dtype=float)
    home = _HOME
    d2 = damping**2
    w = np.array((1.0, 1.0, 1.0, rot_weight, rot_weight, rot_weight))[:, None]
    B = np.empty((6, 2))
    for i in range(iters):
        p, R, J = fk_q if (i == 0 and fk_q is not None) else fk(q)
        M = target_R @ R.T  # sum over columns of t_k r_k^T; its skew part is the sum of r_k x t_k
        B[:3, 0] = target_pos_m - p
        B[3:, 0] = (0.5 * rot_weight) * np.array((M[2, 1] - M[1, 2], M[0, 2] - M[2, 0], M[1, 0] - M[0, 1]))
        Jw = J * w
        A = Jw @ Jw.T
        A.flat[::7] += d2
        h = 0.05 * (home - q)  # null-space pull toward the home posture
        # dq = Jw^T A^-1 e and null = (I - Jw^T A^-1 Jw) h: one solve with both right-hand sides
        B[:, 1] = Jw @ h
        x = np.linalg.solve(A, B)
        q = np.minimum(np.maximum(q + Jw.T @ (x[:, 0] - x[:, 1]) + h, lo), hi)
    return q
