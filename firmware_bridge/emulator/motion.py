"""Pure firmware functions of the emulated MCU: limits checks, the reference generator and the
fault monitors. No state of their own, so they are tested directly and a C port is mechanical.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from firmware_bridge.emulator.config import McuConfig
from firmware_bridge.emulator.plant import JointSample
from firmware_bridge.messages import LimitsConfig
from firmware_bridge.wire_constants import ErrorCode, FaultFlag

Floats = tuple[float, ...]


@dataclass
class JointLimits:
    """Limits in force on the MCU, each ``(n,)``."""

    q_min_rad: list[float]
    q_max_rad: list[float]
    qd_max_rad_s: list[float]
    current_max_a: list[float]

    @classmethod
    def defaults(cls, c: McuConfig) -> JointLimits:
        """The limits after boot: hard position limits, default speed and current caps."""
        n = c.n_joints
        return cls(
            [c.hard_q_min_rad] * n,
            [c.hard_q_max_rad] * n,
            [c.default_qd_max_rad_s] * n,
            [c.default_current_max_a] * n,
        )


def check_limits_config(msg: LimitsConfig, c: McuConfig) -> ErrorCode:
    """Why a LIMITS_CONFIG must be refused (NONE if acceptable). Never clamps."""
    if len(msg.q_min_rad) != c.n_joints:
        return ErrorCode.JOINT_COUNT
    values = (*msg.q_min_rad, *msg.q_max_rad, *msg.qd_max_rad_s, *msg.current_max_a)
    if not all(math.isfinite(v) for v in values):
        return ErrorCode.NOT_FINITE
    rows = zip(msg.q_min_rad, msg.q_max_rad, msg.qd_max_rad_s, msg.current_max_a)
    for lo, hi, qd, cur in rows:
        if not c.hard_q_min_rad <= lo < hi <= c.hard_q_max_rad:
            return ErrorCode.LIMITS_OUT_OF_RANGE
        if not 0 < qd <= c.hard_qd_max_rad_s or not 0 < cur <= c.hard_current_max_a:
            return ErrorCode.LIMITS_OUT_OF_RANGE
    return ErrorCode.NONE


def check_command(q_rad: Floats, qd_rad_s: Floats, lim: JointLimits) -> ErrorCode:
    """Why joint targets must be refused (NONE if acceptable). The whole command is rejected
    if any joint is out of range: the MCU never clamps silently."""
    if len(q_rad) != len(lim.q_min_rad):
        return ErrorCode.JOINT_COUNT
    if not all(math.isfinite(x) for x in (*q_rad, *qd_rad_s)):
        return ErrorCode.NOT_FINITE
    for i, (q, qd) in enumerate(zip(q_rad, qd_rad_s)):
        if not lim.q_min_rad[i] <= q <= lim.q_max_rad[i]:
            return ErrorCode.LIMIT_VIOLATION
        if abs(qd) > lim.qd_max_rad_s[i]:
            return ErrorCode.LIMIT_VIOLATION
    return ErrorCode.NONE


def approach(value: float, target: float, max_step: float) -> float:
    """Move ``value`` toward ``target`` by at most ``max_step``."""
    if abs(target - value) <= max_step:
        return target
    return value + math.copysign(max_step, target - value)


def windup_reset(q_ref: float, q_meas: float, qd_meas: float, q_cmd: float, threshold: float,
                 still: float) -> bool:
    """True when a channel is wound up — held still (``|qd_meas| < still``) with its reference more
    than ``threshold`` (> 0) past its measured position — and the command lies beyond the measured
    position the other way: the reference then restarts from the measured position at rest. That
    moves the reference toward both the measurement and the command, and the joint is still, so no
    velocity jumps; a joint that moves (lagging its reference in a fast move) is never reset."""
    if threshold <= 0 or abs(qd_meas) >= still:
        return False
    gap = q_ref - q_meas
    return abs(gap) > threshold and (q_cmd - q_meas) * gap < 0


def reference_step(
    q_ref_rad: list[float],
    v_ref_rad_s: list[float],
    target: tuple[list[float], list[float]] | None,
    lim: JointLimits,
    c: McuConfig,
    measured: tuple[Floats, Floats] | None = None,
) -> list[int]:
    """Advance the reference by one tick, in place.

    ``target`` = (q_cmd_rad, qd_ff_rad_s) while tracking (ARMED), ``None`` for a controlled stop:
    the reference velocity ramps to zero at ``stop_decel_rad_s2`` and then holds. While tracking,
    velocity is bounded by ``qd_max`` and its change by ``track_accel_rad_s2``. The reference
    never leaves the position limits.

    Anti-windup (``measured`` = the measured positions and velocities, ``windup_reset_rad`` > 0):
    while tracking, a channel held still (``|qd| < standstill_rad_s``) whose reference lies more than
    ``windup_reset_rad`` past the measured position, with the measured position between the reference
    and the command, restarts from the measured position at rest (:func:`windup_reset`) before it
    moves on. Returns the channels so restarted.

    Step channels (the last ``step_channels``): while tracking the reference is the command itself
    (within the position limits) at zero reference velocity. On a controlled stop a step channel that
    still moves (``|qd| >= standstill_rad_s``) takes its measured position as its reference, so its
    servo brakes where it is; a still one holds its reference (fingers on an object keep their squeeze).
    """
    dt = c.tick_s
    reset: list[int] = []
    first_step = len(q_ref_rad) - c.step_channels
    for i in range(len(q_ref_rad)):
        if i >= first_step:
            if target is not None:
                q_ref_rad[i] = target[0][i]
            elif measured is not None and abs(measured[1][i]) >= c.standstill_rad_s:
                q_ref_rad[i] = measured[0][i]
            q_ref_rad[i] = min(max(q_ref_rad[i], lim.q_min_rad[i]), lim.q_max_rad[i])
            v_ref_rad_s[i] = 0.0
            continue
        if target is not None:
            q_cmd, qd_ff = target[0][i], target[1][i]
            if measured is not None and windup_reset(q_ref_rad[i], measured[0][i], measured[1][i], q_cmd,
                                                     c.windup_reset_rad, c.standstill_rad_s):
                q_ref_rad[i], v_ref_rad_s[i] = measured[0][i], 0.0
                reset.append(i)
            v_des = qd_ff + c.kp_1_s * (q_cmd - q_ref_rad[i])
            v_des = max(-lim.qd_max_rad_s[i], min(lim.qd_max_rad_s[i], v_des))
            accel = c.track_accel_rad_s2
        else:
            v_des, accel = 0.0, c.stop_decel_rad_s2
        v = approach(v_ref_rad_s[i], v_des, accel * dt)
        q = q_ref_rad[i] + v * dt
        if not lim.q_min_rad[i] <= q <= lim.q_max_rad[i]:
            q, v = min(max(q, lim.q_min_rad[i]), lim.q_max_rad[i]), 0.0
        q_ref_rad[i], v_ref_rad_s[i] = q, v
    return reset


def detect_faults(
    s: JointSample, q_ref_rad: list[float], lim: JointLimits, c: McuConfig
) -> int:
    """Fault bits raised by this measurement (over-temperature, over-current, position
    outside limits + margin, tracking error)."""
    raised = 0
    for i in range(len(q_ref_rad)):
        if s.temp_c[i] > c.temp_max_c:
            raised |= FaultFlag.OVER_TEMP
        if abs(s.current_a[i]) > lim.current_max_a[i]:
            raised |= FaultFlag.OVER_CURRENT
        q = s.q_rad[i]
        margin = c.limit_margin_rad
        if q < lim.q_min_rad[i] - margin or q > lim.q_max_rad[i] + margin:
            raised |= FaultFlag.POSITION_LIMIT
        if abs(q - q_ref_rad[i]) > c.tracking_max_rad:
            raised |= FaultFlag.TRACKING
    return int(raised)
