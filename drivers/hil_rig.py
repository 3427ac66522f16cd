"""The HIL bench: an emulated MCU behind the fault proxy on a pty, its joints driven by the
simulator's physics, in real time, with the trace every HIL check needs.

Real time, not lock-step: the MCU firmware (its tick is the rig's ``mcu_tick_s``, 2 ms in
configs/hil/rig.yaml; the emulator's own default is 1 ms), the fault proxy and the physics run on the
bench's service thread on the monotonic clock, and the host talks to them through a pseudo-terminal
exactly as it would talk to ``/dev/ttyACM0``. Physics advances with firmware time (the simulator's
steps for the firmware time each tick covers), so the arm moves in wall-clock time whatever the host does: a host that
stalls, dies or floods the link meets the same watchdog a real board has. The price is that runs
are not bit-reproducible and share the CPU with the host; the service thread's overruns are
recorded (a late tick is caught up in firmware time, the MCU clock never jumps).

Trace (:meth:`HilBench.trace`), all times on ``time.monotonic`` (shared with a host subprocess):

* ``modes``    every MCU mode change: ``(t_s, mode, fault_flags, what)`` (boot, armed, watchdog, ...)
* ``applied``  every joint command the MCU *applied* (passed CRC, session, seq, deadline and limit
  checks): ``(t_s, session, seq, host_t_us, deadline_us, mcu_t_us, q, qd, t_wall_s)``; ``host_t_us``
  is the host's send time from the frame header (host monotonic µs, wrapped at 2^32), ``t_wall_s``
  the monotonic time it was applied (``t_s`` is the service call's time, read before its lock)
* ``nacks``    NACK codes the MCU sent, counted; ``errors``: ERROR frames it sent
* ``samples``  every ``sample_every_ticks`` firmware ticks: ``(t_s, mode, q_ref, q, qd)``
* ``counters`` MCU counters and link statistics; ``proxy`` faults the proxy applied, by direction
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from typing import Any, Self

from drivers.sim_plant import SimJointPlant
from firmware_bridge.emulator.config import McuConfig
from firmware_bridge.emulator.mcu import McuEmulator
from firmware_bridge.emulator.plant import JointPlant
from firmware_bridge.fault_proxy import FaultSchedule
from firmware_bridge.messages import Error, Frame, JointCommand, Message, Nack
from firmware_bridge.rig import PtyRig
from firmware_bridge.wire_constants import ErrorCode


class RecordingMcu(McuEmulator):
    """An ``McuEmulator`` that keeps a full trace. Behaviour is unchanged: every override calls the
    emulator's own rule first and only records the outcome."""

    def __init__(
        self, config: McuConfig, plant: JointPlant, now_s: float, sample_every_ticks: int = 5
    ) -> None:
        self.modes: list[tuple[float, int, int, str]] = []
        self.applied: list[tuple] = []
        self.nacks: Counter[str] = Counter()
        self.errors: list[tuple[float, str, int]] = []
        self.samples: list[tuple[float, int, tuple, tuple, tuple]] = []
        self._sample_every = max(1, int(sample_every_ticks))
        self._ticks = 0
        self._header = None
        super().__init__(config, plant, now_s)

    def _log(self, now_s: float, text: str) -> None:
        super()._log(now_s, text)
        self.modes.append((now_s, int(self.mode), int(self.fault_flags), text))

    def _on_frame(self, frame: Frame, now_s: float) -> None:
        self._header = frame.header
        super()._on_frame(frame, now_s)

    def _on_command(self, seq: int, msg: JointCommand, now_s: float) -> ErrorCode:
        code = super()._on_command(seq, msg, now_s)
        if code is ErrorCode.NONE:
            h = self._header
            # t_wall: when it really took effect (now_s was read before the service lock was taken)
            self.applied.append(
                (now_s, self.session_id, seq, h.t_us if h else -1, msg.deadline_us,
                 self.mcu_time_us(now_s), tuple(msg.q_rad), tuple(msg.qd_rad_s), time.monotonic())
            )
        return code

    def _send(self, message: Message, now_s: float) -> None:
        if isinstance(message, Nack):
            self.nacks[message.error_code.name] += 1
        elif isinstance(message, Error):
            self.errors.append((now_s, message.error_code.name, int(message.fault_flags)))
        super()._send(message, now_s)

    def _step(self, t_s: float) -> None:
        super()._step(t_s)
        self._ticks += 1
        if self._ticks % self._sample_every == 0:
            s = self.sample
            self.samples.append((t_s, int(self.mode), tuple(self.q_ref_rad), s.q_rad, s.qd_rad_s))


class HilBench:
    """MCU emulator + fault proxy on a pty, joints = the sim env's arm. Use as a context manager.

    ``env``: a ``sim`` TabletopEnv already reset to its scene. Fault rules with time windows are
    measured from :meth:`set_fault_origin` (motion start); before that no time-windowed rule fires.
    """

    def __init__(
        self,
        env: Any,
        mcu_config: McuConfig,
        schedule: FaultSchedule | None = None,
        sample_every_ticks: int = 5,
    ) -> None:
        u = env.unwrapped if hasattr(env, "unwrapped") else env
        self.plant = SimJointPlant(u.backend, u.cfg.physics_step_s)
        self.rig = PtyRig(mcu_config, plant=self.plant, schedule=schedule or FaultSchedule())
        self.lock = self.rig.lock
        self.path = self.rig.path
        with self.lock:
            self.mcu = RecordingMcu(mcu_config, self.plant, time.monotonic(), sample_every_ticks)
            self.rig.mcu = self.mcu  # the rig services whatever its ``mcu`` attribute holds
            if self.rig.proxy is not None:
                self.rig.proxy.core.start_s = math.inf  # no time-windowed fault before motion starts
        self._started = False

    def start(self) -> Self:
        self.rig.start()
        self._started = True
        return self

    def set_fault_origin(self, t0_s: float) -> None:
        """Time-windowed fault rules count from ``t0_s`` (monotonic) on."""
        with self.lock:
            if self.rig.proxy is not None:
                self.rig.proxy.core.start_s = t0_s

    def reboot(self) -> None:
        self.rig.reboot()

    def close(self) -> None:
        """Stop the service thread and close the pty; re-raises an error of the service thread."""
        if self._started:
            self._started = False
            self.rig.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def error(self) -> BaseException | None:
        return self.rig.error

    def trace(self) -> dict[str, Any]:
        """A snapshot of everything recorded so far (plain Python data, JSON-serialisable)."""
        with self.lock:
            m = self.mcu
            counters = dataclasses.asdict(m.counters)
            counters["link"] = m.counters.link.as_dict()
            proxy = {}
            if self.rig.proxy is not None:
                proxy = {f"{d}:{k}": n for (d, k), n in sorted(self.rig.proxy.core.applied.items())}
            return {
                "modes": list(m.modes),
                "applied": list(m.applied),
                "nacks": dict(m.nacks),
                "errors": list(m.errors),
                "samples": list(m.samples),
                "counters": counters,
                "proxy": proxy,
                "rig_overruns": self.rig.overruns,
                "physics_steps": self.plant.physics_steps,
                "session_id": m.session_id,
                "limits": dataclasses.asdict(m.limits),
            }
