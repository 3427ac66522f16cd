"""Pure command conversions used by the firmware-bridge arm (no I/O, no state of their own).

* :func:`clamp_to_limits` — the last joint-limit clamp before anything is written to a motor
  controller; returns which joints it changed so the caller can count and log them.
* :func:`ee_delta_to_joints` — integrate an ``ee_delta`` action ``[dx_m, dy_m, dz_m, dyaw_rad]`` into
  the TCP target (kept in the workspace box and within ``max_lead_m`` of the measured TCP, as the
  simulator does, so a blocked arm does not wind the target up) and turn it into joint targets by
  one damped-least-squares step (:meth:`edge.kinematics.SerialChain.ik_step`) from the *measured* joints.

Kinematics: ``chain`` is the robot's :class:`edge.kinematics.SerialChain` (``RobotSpec.kinematics``;
the driver passes its own robot spec's); left out, the shipped Panda spec's (``configs/robots/panda.yaml``).
No simulator code is involved.

Shapes: joints (n,) rad, (7,) for the Panda; positions (3,) m in the robot base frame.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from edge.kinematics import SerialChain, down_rotation, tcp_yaw
from edge.robot_spec import load_robot_spec


@functools.lru_cache(maxsize=1)
def panda_chain() -> SerialChain:
    """The default chain: the shipped Panda robot spec's kinematics."""
    return load_robot_spec("panda").kinematics


def clamp_to_limits(q_rad: np.ndarray, lo_rad: np.ndarray, hi_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise clamp; returns (clamped (n,), mask (n,) of the joints that were changed)."""
    q = np.asarray(q_rad, float)
    out = np.minimum(np.maximum(q, lo_rad), hi_rad)
    return out, out != q


@dataclass(frozen=True)
class TcpTarget:
    """Integrated TCP target: position (3,) m (base frame) and yaw rad (gripper pointing down)."""

    pos_m: np.ndarray
    yaw_rad: float

    @classmethod
    def at(cls, q_rad: np.ndarray, chain: SerialChain | None = None) -> TcpTarget:
        """The target that holds the arm where the joints ``q_rad`` (n,) put the TCP."""
        p, R = (chain if chain is not None else panda_chain()).fk_pose(np.asarray(q_rad, float))
        return cls(p, tcp_yaw(R))


@dataclass(frozen=True)
class EeStep:
    target: TcpTarget  # the new integrated target
    q_rad: np.ndarray  # (n,) joint targets from one IK step
    sent: np.ndarray  # (4,) the TCP delta actually applied: [dx, dy, dz, dyaw] after the clips
    workspace_clipped: bool
    lead_limited: bool


def ee_delta_to_joints(
    target: TcpTarget,
    delta: np.ndarray,
    q_meas_rad: np.ndarray,
    box_lo_m: np.ndarray,
    box_hi_m: np.ndarray,
    max_lead_m: float,
    yaw_range_rad: tuple[float, float],
    chain: SerialChain | None = None,
) -> EeStep:
    """One ``ee_delta`` command -> joint targets (see the module docstring)."""
    kin = chain if chain is not None else panda_chain()
    d = np.asarray(delta, float)
    want = target.pos_m + d[:3]
    new = np.clip(want, box_lo_m, box_hi_m)
    clipped = bool(np.any(new != want))
    p_meas, _ = kin.fk_pose(np.asarray(q_meas_rad, float))
    off = new - p_meas
    dist = float(np.linalg.norm(off))
    lead = dist > max_lead_m
    if lead:
        new = p_meas + off * (max_lead_m / dist)
    yaw = float(np.clip(target.yaw_rad + d[3], *yaw_range_rad))
    q = kin.ik_step(np.asarray(q_meas_rad, float), new, down_rotation(yaw))
    sent = np.append(new - target.pos_m, yaw - target.yaw_rad)
    return EeStep(TcpTarget(new, yaw), q, sent, clipped, lead)
