"""Configuration of the emulated MCU motor controller (values a real firmware would compile in)."""

from __future__ import annotations

from dataclasses import dataclass

from firmware_bridge.wire_constants import MAX_JOINTS, PROTOCOL_VERSION


@dataclass
class McuConfig:
    """Emulated firmware settings. Hard limits bound anything a LIMITS_CONFIG may set."""

    n_joints: int = 6
    tick_s: float = 0.001  # control/reference period of the firmware (1 kHz)
    # ARMED and no valid JOINT_COMMAND for this long -> FAULT(WATCHDOG)
    watchdog_ms: int = 50
    state_period_s: float = 0.005  # periodic STATE telemetry (200 Hz)
    # Also answer every applied JOINT_COMMAND with a STATE
    state_on_command: bool = True
    max_deadline_ms: int = 200  # a command's deadline may lie at most this far ahead
    max_cmd_rate_hz: int = 1000  # advertised in CAPABILITIES
    hard_q_min_rad: float = -3.0
    hard_q_max_rad: float = 3.0
    hard_qd_max_rad_s: float = 4.0
    hard_current_max_a: float = 10.0
    # Limits in force after boot, before any LIMITS_CONFIG
    default_qd_max_rad_s: float = 1.0
    default_current_max_a: float = 5.0
    kp_1_s: float = 30.0  # reference gain towards the commanded position
    track_accel_rad_s2: float = 50.0  # reference acceleration bound while ARMED
    # Anti-windup: a channel held still (|qd| < standstill_rad_s) whose reference ran more than this past
    # the measured position (a stalled joint, fingers closed on an object) and whose command now lies
    # beyond the measured position the other way restarts its reference from the measured position at
    # rest, so the wound-up travel is not unwound first. 0 turns it off.
    windup_reset_rad: float = 0.01
    # The last this many channels (a gripper with its own servo) take each accepted command as their
    # reference at once: no speed, acceleration or gain shaping, the joint's own servo shapes the move. On
    # a controlled stop a moving one brakes where it is, a still one holds (fingers on an object keep their
    # squeeze). 0: none.
    step_channels: int = 0
    # Deceleration of controlled stops (watchdog, e-stop, disarm)
    stop_decel_rad_s2: float = 20.0
    standstill_rad_s: float = 0.02  # |qd| below this on every joint ...
    # ... for this long (and reference stopped) is standstill
    standstill_hold_s: float = 0.02
    temp_max_c: float = 70.0
    tracking_max_rad: float = 0.5  # |q_measured - q_ref| above this -> FAULT(TRACKING)
    # Measured q beyond configured limits + margin -> FAULT
    limit_margin_rad: float = 0.05
    fw_version: tuple[int, int, int] = (0, 1, 0)
    device_id: int = 0xED6E0001
    supported_versions: tuple[int, ...] = (PROTOCOL_VERSION,)
    # Seeds the session-id generator (a real MCU would use a hardware RNG)
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.n_joints <= MAX_JOINTS:
            raise ValueError(
                f"McuConfig.n_joints={self.n_joints} outside 1..{MAX_JOINTS}"
            )
        if not 0 < self.tick_s <= 0.01:
            raise ValueError(f"McuConfig.tick_s={self.tick_s} must be in (0, 0.01] s")
        if not 1 <= self.watchdog_ms <= 60_000:
            raise ValueError(
                f"McuConfig.watchdog_ms={self.watchdog_ms} must be in 1..60000"
            )
        if self.hard_q_min_rad >= self.hard_q_max_rad:
            raise ValueError("McuConfig.hard_q_min_rad must be < hard_q_max_rad")
        for name in (
            "state_period_s",
            "hard_qd_max_rad_s",
            "hard_current_max_a",
            "default_qd_max_rad_s",
            "default_current_max_a",
            "kp_1_s",
            "track_accel_rad_s2",
            "stop_decel_rad_s2",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"McuConfig.{name} must be > 0, got {getattr(self, name)}"
                )
        if not self.windup_reset_rad >= 0:
            raise ValueError(f"McuConfig.windup_reset_rad must be >= 0 (0: off), got {self.windup_reset_rad}")
        if not 0 <= self.step_channels <= self.n_joints:
            raise ValueError(f"McuConfig.step_channels={self.step_channels} must be in 0..n_joints={self.n_joints}")
        if self.default_qd_max_rad_s > self.hard_qd_max_rad_s:
            raise ValueError("McuConfig.default_qd_max_rad_s exceeds hard_qd_max_rad_s")
        if self.default_current_max_a > self.hard_current_max_a:
            raise ValueError(
                "McuConfig.default_current_max_a exceeds hard_current_max_a"
            )
        if not 1 <= self.max_deadline_ms <= 60_000:
            raise ValueError(
                f"McuConfig.max_deadline_ms={self.max_deadline_ms} outside 1..60000"
            )
