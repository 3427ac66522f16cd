"""The simulator's physics as the joint plant behind the emulated MCU (hardware-in-the-loop).

``firmware_bridge`` never imports the simulator; it moves joints through its small ``JointPlant``
protocol (``measure()``, ``step(q_ref_rad, qd_ref_rad_s, dt_s)``). :class:`SimJointPlant` implements
it on a ``sim`` physics backend (MuJoCo or PyBullet): every firmware tick the MCU's safe reference
is written into the arm's position actuators and the gripper's width target, and physics advances
in whole physics periods as firmware time accumulates (1 ms firmware tick, 2 ms physics step: one
physics step every other tick). The MCU therefore sees the same arm, contacts and objects the
policy's camera sees.

Joint layout (what the MCU reports): 7 Panda joints in rad, then the gripper opening in metres
(sum of both finger positions). Velocities: the backend's joint velocities; the gripper's by finite
difference. Currents: actuator torque / ``torque_constant_nm_per_a`` where the backend exposes
actuator forces (MuJoCo), else a constant holding current. Temperatures: constant (no thermal model).

Not thread-safe: the HIL bench calls it from the MCU service thread under the rig lock; anyone
else touching the same backend (camera rendering, an oracle policy) must hold that lock too.
"""

from __future__ import annotations

import numpy as np

from firmware_bridge.emulator.plant import JointSample


class SimJointPlant:
    """``JointPlant`` over a ``sim.backends`` PhysicsBackend (7 arm joints + gripper width)."""

    def __init__(
        self,
        backend,
        physics_dt_s: float,
        torque_constant_nm_per_a: float = 10.0,
        finger_n_per_a: float = 10.0,
        hold_current_a: float = 0.3,
        temp_c: float = 30.0,
    ) -> None:
        if physics_dt_s <= 0:
            raise ValueError(f"physics_dt_s must be > 0, got {physics_dt_s}")
        self.backend = backend
        self.physics_dt_s = float(physics_dt_s)
        self.kt = float(torque_constant_nm_per_a)
        self.kf = float(finger_n_per_a)
        self.hold_current_a = float(hold_current_a)
        self.temp_c = float(temp_c)
        self._acc_s = 0.0
        self._width = float(backend.gripper_width())
        self._width_rate = 0.0
        self.physics_steps = 0
        self._sample: JointSample | None = None

    def measure(self) -> JointSample:
        if self._sample is None:  # cached between physics steps (the state cannot change)
            self._sample = self._read()
        return self._sample

    def _read(self) -> JointSample:
        q, qd = self.backend.arm_state()
        data = getattr(self.backend, "data", None)
        if data is not None and getattr(data, "actuator_force", None) is not None and len(data.actuator_force) >= 9:
            f = np.abs(np.asarray(data.actuator_force[:9], float))
            cur = tuple(float(x) for x in f[:7] / self.kt) + (float(f[7:9].max() / self.kf),)
        else:
            cur = (self.hold_current_a,) * 8
        return JointSample(
            tuple(float(x) for x in q) + (self._width,),
            tuple(float(x) for x in qd) + (self._width_rate,),
            cur,
            (self.temp_c,) * 8,
        )

    def step(self, q_ref_rad, qd_ref_rad_s, dt_s: float) -> JointSample:
        self.backend.set_arm_targets(np.asarray(q_ref_rad[:7], float))
        self.backend.set_gripper_target(float(q_ref_rad[7]))
        self._acc_s += dt_s
        n = int((self._acc_s + 1e-9) // self.physics_dt_s)
        if n > 0:
            self._acc_s -= n * self.physics_dt_s
            self.backend.step(n)
            self.physics_steps += n
            width = float(self.backend.gripper_width())
            self._width_rate = (width - self._width) / (n * self.physics_dt_s)
            self._width = width
            self._sample = None
        return self.measure()
