"""The joint plant behind the emulated MCU: a simple servo model, or a simulator's physics.

The MCU firmware produces a safe reference (``q_ref_rad``, ``qd_ref_rad_s``, both ``(n,)``) every
tick; a ``JointPlant`` turns it into measured joint state. ``ServoPlant`` is a second-order,
acceleration-limited servo with a thermal model. A simulator implements ``JointPlant`` (for
example by writing the reference into position actuators and stepping physics for ``dt_s``)
and passes it to ``McuEmulator``.
This is the only coupling point: firmware_bridge never imports the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

Floats = tuple[float, ...]


@dataclass(frozen=True)
class JointSample:
    """Measured state of all joints, each ``(n,)``."""

    q_rad: Floats
    qd_rad_s: Floats
    current_a: Floats
    temp_c: Floats


class JointPlant(Protocol):
    """What the emulator needs from whatever moves the joints."""

    def measure(self) -> JointSample:
        """Current measured state (no time passes)."""
        ...

    def step(self, q_ref_rad: Floats, qd_ref_rad_s: Floats, dt_s: float) -> JointSample:
        """Track the reference for ``dt_s`` seconds and return the new measured state."""
        ...


@dataclass
class ServoPlantConfig:
    n_joints: int = 6
    bandwidth_hz: float = 10.0  # natural frequency of the position loop
    damping_ratio: float = 1.0
    # Torque saturation of the motor, as an acceleration
    accel_max_rad_s2: float = 100.0
    k_current_a_per_rad_s2: float = 0.03  # current from acceleration (inertia)
    k_current_a_per_rad_s: float = 0.2  # current from velocity (viscous friction)
    hold_current_a: float = 0.3  # gravity/holding load
    ambient_c: float = 25.0
    thermal_tau_s: float = 300.0
    heat_c_per_a2_s: float = 0.02

    def __post_init__(self) -> None:
        if self.n_joints < 1:
            raise ValueError(
                f"ServoPlantConfig.n_joints must be >= 1, got {self.n_joints}"
            )
        for name in (
            "bandwidth_hz",
            "damping_ratio",
            "accel_max_rad_s2",
            "thermal_tau_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"ServoPlantConfig.{name} must be > 0, got {getattr(self, name)}"
                )


class ServoPlant:
    """Per joint: a PD position servo on a unit inertia, acceleration-saturated (second order),
    tracking ``q_ref`` with ``qd_ref`` as feed-forward. Semi-implicit Euler; stable for
    ``2*pi*bandwidth_hz*dt_s`` well below 1 (0.06 at 10 Hz and 1 kHz)."""

    def __init__(
        self, config: ServoPlantConfig | None = None, q0_rad: Floats | None = None
    ) -> None:
        self.config = config or ServoPlantConfig()
        n = self.config.n_joints
        self.q_rad = list(q0_rad) if q0_rad is not None else [0.0] * n
        if len(self.q_rad) != n:
            raise ValueError(f"q0_rad has {len(self.q_rad)} entries, n_joints={n}")
        self.qd_rad_s = [0.0] * n
        self.current_a = [self.config.hold_current_a] * n
        self.temp_c = [self.config.ambient_c] * n
        self.temp_offset_c = 0.0  # test hook: added to the reported temperature

    def measure(self) -> JointSample:
        return JointSample(
            tuple(self.q_rad),
            tuple(self.qd_rad_s),
            tuple(self.current_a),
            tuple(t + self.temp_offset_c for t in self.temp_c),
        )

    def step(self, q_ref_rad: Floats, qd_ref_rad_s: Floats, dt_s: float) -> JointSample:
        c = self.config
        w = 2.0 * math.pi * c.bandwidth_hz
        kp, kd = w * w, 2.0 * c.damping_ratio * w
        for i in range(c.n_joints):
            q, qd = self.q_rad[i], self.qd_rad_s[i]
            acc = kp * (q_ref_rad[i] - q) + kd * (qd_ref_rad_s[i] - qd)
            acc = max(-c.accel_max_rad_s2, min(c.accel_max_rad_s2, acc))
            qd += acc * dt_s
            q += qd * dt_s
            cur = c.hold_current_a + c.k_current_a_per_rad_s2 * abs(acc)
            cur += c.k_current_a_per_rad_s * abs(qd)
            heat = (
                c.heat_c_per_a2_s * cur * cur
                - (self.temp_c[i] - c.ambient_c) / c.thermal_tau_s
            )
            self.q_rad[i], self.qd_rad_s[i], self.current_a[i] = q, qd, cur
            self.temp_c[i] += heat * dt_s
        return self.measure()
