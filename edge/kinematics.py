"""The one kinematic model of a serial arm: forward kinematics to the tool centre point (TCP), the
geometric Jacobian, and one damped-least-squares inverse-kinematics step.

Used by the safety layer (via :meth:`edge.robot_spec.RobotSpec.fk`), the hardware drivers (built from
their :class:`~edge.robot_spec.RobotSpec`) and the simulator (``sim.robot_model`` builds one from the
URDF numbers), so the algorithm exists once.

Model: ``n`` revolute joints, each turning about the local z axis of its joint frame. Joint ``i``'s
frame at ``q_i = 0`` is the previous joint frame (the base frame for the first joint) times the fixed
origin transform ``joint_origins[i]`` (URDF convention); then a fixed transform from the last joint
frame to the TCP. Positions in metres, angles in radians, all in the base frame.

This module is a leaf: it imports only the standard library and numpy (``sim`` may import it;
tests/test_layering.py checks both).

Example::

    chain = SerialChain.from_spec(load_robot_spec("panda"))
    p_m, R, J = chain.fk(chain.q_home)  # (3,), (3, 3), (6, 7) [linear; angular]
    q = chain.ik_step(chain.q_home, p_m + [0.0, 0.0, -0.02], down_rotation(0.0))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

NULL_SPACE_GAIN = 0.05  # ik_step: fraction of (home - q) added per iteration, projected into the null space


def origin_transform(xyz: Sequence[float], rpy: Sequence[float]) -> np.ndarray:
    """Homogeneous transform (4, 4) from a URDF origin: R = Rz(yaw) Ry(pitch) Rx(roll), then xyz."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    T = np.eye(4)
    T[:3, :3] = np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )
    T[:3, 3] = xyz
    return T


def tcp_yaw(R: np.ndarray) -> float:
    """Yaw of the gripper about world z (the angle of the TCP x axis, gripper pointing down)."""
    return float(np.arctan2(R[1, 0], R[0, 0]))


def down_rotation(yaw_rad: float) -> np.ndarray:
    """Target TCP orientation: z pointing down, rotated by ``yaw_rad`` about world z."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _check_transform(T: Any, what: str) -> np.ndarray:
    T = np.array(T, dtype=np.float64)
    if T.shape != (4, 4):
        raise ValueError(f"{what}: expected a (4, 4) homogeneous transform, got shape {T.shape}")
    if not np.all(np.isfinite(T)):
        raise ValueError(f"{what}: transform has non-finite (NaN/inf) entries")
    if not np.array_equal(T[3], (0.0, 0.0, 0.0, 1.0)):
        raise ValueError(f"{what}: last row of a homogeneous transform must be [0, 0, 0, 1], got {T[3]}")
    R = T[:3, :3]
    if not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0.0:
        raise ValueError(f"{what}: rotation part is not a proper rotation matrix:\n{R}")
    return T


def _floats(T: np.ndarray) -> tuple[float, ...]:
    """(R row-major 9, t 3) as plain Python floats."""
    return (*map(float, T[:3, :3].reshape(-1)), *map(float, T[:3, 3]))


class SerialChain:
    """A chain of revolute joints about their local z axes, ending in a fixed TCP transform.

    ``joint_origins``: per joint, the (4, 4) transform parent joint frame -> this joint frame at q = 0.
    ``tcp``: (4, 4) last joint frame -> TCP. ``q_min``/``q_max``/``q_home``: (n,) rad.
    ``axes``: optional per-joint rotation axes in the joint frame (e.g. read from a URDF), checked to
    be +z; any other axis is refused with ``ValueError`` (the algorithm assumes z).
    Instances are immutable; the arrays they expose are read-only.
    """

    tcp_yaw = staticmethod(tcp_yaw)
    down_rotation = staticmethod(down_rotation)

    def __init__(
        self,
        joint_origins: Sequence[np.ndarray],
        tcp: np.ndarray,
        q_min: Sequence[float],
        q_max: Sequence[float],
        q_home: Sequence[float],
        *,
        joint_names: Sequence[str] | None = None,
        axes: Sequence[Sequence[float]] | None = None,
    ) -> None:
        n = len(joint_origins)
        if n == 0:
            raise ValueError("SerialChain needs at least one joint")
        names = tuple(joint_names) if joint_names is not None else tuple(f"joint{i}" for i in range(n))
        if len(names) != n:
            raise ValueError(f"{len(names)} joint names for {n} joint origins")
        if axes is not None:
            if len(axes) != n:
                raise ValueError(f"{len(axes)} joint axes for {n} joint origins")
            for name, axis in zip(names, axes, strict=True):
                a = np.asarray(axis, dtype=np.float64)
                if a.shape != (3,) or not np.allclose(a, (0.0, 0.0, 1.0)):
                    raise ValueError(
                        f"joint {name}: axis {a.tolist()} is not the local z axis [0, 0, 1]; SerialChain models "
                        f"only revolute joints about their local z (rotate the joint origin so the axis is z)"
                    )
        origins = tuple(_read_only(_check_transform(T, f"joint {nm} origin")) for nm, T in zip(names, joint_origins))
        tcp_T = _read_only(_check_transform(tcp, "TCP transform"))
        arrays = []
        for key, v in (("q_min", q_min), ("q_max", q_max), ("q_home", q_home)):
            a = np.array(v, dtype=np.float64)
            if a.shape != (n,) or not np.all(np.isfinite(a)):
                raise ValueError(f"{key}: expected {n} finite values (one per joint), got {v!r}")
            arrays.append(_read_only(a))
        lo, hi, home = arrays
        if np.any(lo >= hi):
            j = int(np.argmax(lo >= hi))
            raise ValueError(f"joint {names[j]}: q_min {lo[j]} >= q_max {hi[j]}")
        if np.any(home < lo) or np.any(home > hi):
            raise ValueError(f"q_home {home.tolist()} is outside the joint limits")
        self.n_joints = n
        self.joint_names = names
        self.joint_origins = origins
        self.tcp = tcp_T
        self.q_min, self.q_max, self.q_home = lo, hi, home
        self._joints = tuple(_floats(T) for T in origins)
        self._tcp = _floats(tcp_T)

    @classmethod
    def from_spec(cls, spec: Any) -> SerialChain:
        """The chain of a :class:`edge.robot_spec.RobotSpec` (duck-typed: this module imports no project code).

        Reads ``joint_origin_xyz_m``/``joint_origin_rpy_rad`` (URDF origins), ``tcp_xyz_m``/``tcp_rpy_rad``,
        ``q_min_rad``/``q_max_rad``, ``q_home_rad`` and ``joint_names``.
        """
        xyz, rpy = spec.joint_origin_xyz_m, spec.joint_origin_rpy_rad
        if len(xyz) != len(rpy):
            raise ValueError(f"{len(xyz)} joint origin offsets but {len(rpy)} joint origin rotations")
        return cls(
            [origin_transform(x, r) for x, r in zip(xyz, rpy, strict=True)],
            origin_transform(spec.tcp_xyz_m, spec.tcp_rpy_rad),
            spec.q_min_rad,
            spec.q_max_rad,
            spec.q_home_rad,
            joint_names=spec.joint_names,
        )

    def __repr__(self) -> str:
        return f"SerialChain({self.n_joints} joints: {', '.join(self.joint_names)})"

    def fk(self, q_rad: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """TCP position (3,), rotation (3, 3) and the 6×n geometric Jacobian (linear; angular).

        Scalar arithmetic on Python floats: a 7-joint chain of 3×3 products is ~50 tiny operations,
        for which numpy's per-call overhead dominates (this form is ~5x faster than the same
        products on (4, 4) arrays and agrees with them to 1e-16). ``q_rad``: (n,) array or sequence.
        """
        joints, (b0, b1, b2, b3, b4, b5, b6, b7, b8, bx, by, bz) = self._joints, self._tcp
        qs = q_rad.tolist() if hasattr(q_rad, "tolist") else q_rad
        if len(qs) != self.n_joints:
            raise ValueError(f"fk: got {len(qs)} joint positions, the chain has {self.n_joints} joints")
        cos, sin = math.cos, math.sin
        r0 = r4 = r8 = 1.0
        r1 = r2 = r3 = r5 = r6 = r7 = 0.0
        px = py = pz = 0.0
        ox, oy, oz, ax, ay, az = [], [], [], [], [], []
        for (a0, a1, a2, a3, a4, a5, a6, a7, a8, tx, ty, tz), q in zip(joints, qs):
            # joint frame = parent frame * origin; then the rotation about the joint's local z
            px, py, pz = px + r0 * tx + r1 * ty + r2 * tz, py + r3 * tx + r4 * ty + r5 * tz, pz + r6 * tx + r7 * ty + r8 * tz
            n0, n1, n2 = r0 * a0 + r1 * a3 + r2 * a6, r0 * a1 + r1 * a4 + r2 * a7, r0 * a2 + r1 * a5 + r2 * a8
            n3, n4, n5 = r3 * a0 + r4 * a3 + r5 * a6, r3 * a1 + r4 * a4 + r5 * a7, r3 * a2 + r4 * a5 + r5 * a8
            n6, n7, n8 = r6 * a0 + r7 * a3 + r8 * a6, r6 * a1 + r7 * a4 + r8 * a7, r6 * a2 + r7 * a5 + r8 * a8
            ox.append(px)
            oy.append(py)
            oz.append(pz)
            ax.append(n2)  # every joint turns about its local z (checked in __init__ when axes are given)
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

    def fk_pose(self, q_rad: Any) -> tuple[np.ndarray, np.ndarray]:
        """TCP position (3,) m and rotation (3, 3) in the base frame (the same numbers as :meth:`fk`)."""
        p, R, _ = self.fk(q_rad)
        return p, R

    def ik_step(
        self,
        q_rad: np.ndarray,
        target_pos_m: np.ndarray,
        target_R: np.ndarray,
        damping: float = 0.05,
        iters: int = 3,
        rot_weight: float = 0.5,
        fk_q: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """Damped least squares IK: joint positions (n,) that move the TCP toward the target pose.

        A few Gauss-Newton iterations from ``q_rad``; results are kept inside the joint limits. A
        null-space term pulls toward the home posture so a redundant joint does not drift.
        ``fk_q`` may pass ``self.fk(q_rad)`` if the caller has it.
        """
        lo, hi = self.q_min, self.q_max
        q = np.array(q_rad, dtype=float)
        home = self.q_home
        d2 = damping**2
        w = np.array((1.0, 1.0, 1.0, rot_weight, rot_weight, rot_weight))[:, None]
        B = np.empty((6, 2))
        for i in range(iters):
            p, R, J = fk_q if (i == 0 and fk_q is not None) else self.fk(q)
            M = target_R @ R.T  # sum over columns of t_k r_k^T; its skew part is the sum of r_k x t_k
            B[:3, 0] = target_pos_m - p
            B[3:, 0] = (0.5 * rot_weight) * np.array((M[2, 1] - M[1, 2], M[0, 2] - M[2, 0], M[1, 0] - M[0, 1]))
            Jw = J * w
            A = Jw @ Jw.T
            A.flat[::7] += d2  # the diagonal of the 6x6 A
            h = NULL_SPACE_GAIN * (home - q)  # null-space pull toward the home posture
            # dq = Jw^T A^-1 e and null = (I - Jw^T A^-1 Jw) h: one solve with both right-hand sides
            B[:, 1] = Jw @ h
            x = np.linalg.solve(A, B)
            q = np.minimum(np.maximum(q + Jw.T @ (x[:, 0] - x[:, 1]) + h, lo), hi)
        return q
