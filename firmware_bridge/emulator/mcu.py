"""Emulated MCU motor controller: protocol state machine, watchdog, limits, e-stop latch.

Sans-I/O: ``receive(bytes, now_s)`` takes wire bytes, ``tick(now_s)`` advances the firmware by the
elapsed time, ``drain_output()`` returns wire bytes to send. ``service(link, now_s)`` does all three
against a ``ByteLink``; the pty runner and the virtual link both call it. The rules implemented
here are the ones PROTOCOL.md prescribes for real firmware (section "MCU rules").
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from firmware_bridge.emulator.config import McuConfig
from firmware_bridge.emulator.motion import (
    JointLimits,
    check_command,
    check_limits_config,
    detect_faults,
    reference_step,
)
from firmware_bridge.emulator.plant import (
    JointPlant,
    JointSample,
    ServoPlant,
    ServoPlantConfig,
)
from firmware_bridge.frame_codec import (
    FrameError,
    FrameErrorCode,
    StreamDecoder,
    encode_frame,
)
from firmware_bridge.link_stats import LinkStats, SeqTracker, SeqVerdict
from firmware_bridge.messages import (
    Ack,
    Arm,
    Capabilities,
    ClearFault,
    Disarm,
    Error,
    Estop,
    Frame,
    Heartbeat,
    Hello,
    JointCommand,
    LimitsConfig,
    Message,
    Nack,
    State,
)
from firmware_bridge.transport import ByteLink
from firmware_bridge.wire_constants import ErrorCode, FaultFlag, Flag, Mode


@dataclass
class McuCounters:
    commands_applied: int = 0
    commands_rejected: int = 0
    watchdog_trips: int = 0
    estops: int = 0
    reboots: int = 0
    link: LinkStats = field(default_factory=LinkStats)
    windup_resets: list[int] = field(default_factory=list)  # per joint: references restarted (anti-windup)


class McuEmulator:
    """One emulated motor controller with ``config.n_joints`` joints driven by ``plant``."""

    def __init__(
        self,
        config: McuConfig | None = None,
        plant: JointPlant | None = None,
        now_s: float = 0.0,
    ) -> None:
        self.config = config or McuConfig()
        self.plant: JointPlant = plant or ServoPlant(
            ServoPlantConfig(n_joints=self.config.n_joints)
        )
        if len(self.plant.measure().q_rad) != self.config.n_joints:
            raise ValueError("plant joint count differs from McuConfig.n_joints")
        self.counters = McuCounters(windup_resets=[0] * self.config.n_joints)
        self.events: deque[tuple[float, str]] = deque(maxlen=256)
        self._rng = random.Random(self.config.seed)
        self.session_id = 0
        self._boot(now_s)

    # ----------------------------------------------------------------- lifecycle
    def _boot(self, now_s: float) -> None:
        c = self.config
        old = self.session_id
        while self.session_id in (0, old):
            self.session_id = self._rng.randrange(1, 1 << 16)
        self._boot_time_s = now_s
        self._last_tick_s = now_s
        self._next_state_s = now_s
        self._tx_seq = 0
        self._host_seq = SeqTracker()
        self._decoder = StreamDecoder(frozenset(c.supported_versions))
        self._out = bytearray()
        self.handshake_done = False
        self.mode = Mode.DISARMED
        self.fault_flags = 0
        n = c.n_joints
        self.limits = JointLimits.defaults(c)
        self.sample: JointSample = self.plant.measure()
        self.q_ref_rad = list(self.sample.q_rad)
        self.v_ref_rad_s = [0.0] * n
        self.q_cmd_rad = list(self.sample.q_rad)
        self.qd_ff_rad_s = [0.0] * n
        self._cmd_deadline_us = 0
        self.last_cmd_rx_s = now_s
        self.last_cmd_seq = 0
        self._booting_until_s = now_s
        # Boot has no history: a joint measured at rest counts as settled (else wait for hold).
        at_rest = all(abs(v) < c.standstill_rad_s for v in self.sample.qd_rad_s)
        self._still_since_s: float | None = (
            now_s - c.standstill_hold_s if at_rest else None
        )
        self._log(now_s, f"boot session=0x{self.session_id:04X}")

    def reboot(self, now_s: float, boot_delay_s: float = 0.0) -> None:
        """Simulate an MCU reset: new session id, seq restarts, DISARMED, limits back to defaults.

        For ``boot_delay_s`` the MCU is deaf and mute (bytes received are lost).
        """
        self.counters.reboots += 1
        self._boot(now_s)
        self._booting_until_s = now_s + boot_delay_s

    def mcu_time_us(self, now_s: float) -> int:
        return round((now_s - self._boot_time_s) * 1e6) & 0xFFFFFFFF

    # ----------------------------------------------------------------- I/O
    def service(self, link: ByteLink, now_s: float) -> None:
        data = link.read_available()
        if data:
            self.receive(data, now_s)
        self.tick(now_s)
        out = self.drain_output()
        if out:
            link.write(out)

    def drain_output(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def receive(self, data: bytes, now_s: float) -> None:
        if now_s < self._booting_until_s:
            return
        stats = self.counters.link
        stats.bytes_rx += len(data)
        for item in self._decoder.feed(data):
            if isinstance(item, FrameError):
                self._on_decode_error(item, now_s)
            else:
                stats.frames_rx += 1
                self._on_frame(item, now_s)

    def _send(self, message: Message, now_s: float) -> None:
        wire = encode_frame(
            message,
            seq=self._tx_seq,
            session_id=self.session_id,
            t_us=self.mcu_time_us(now_s),
            flags=Flag.FROM_MCU,
        )
        self._tx_seq = (self._tx_seq + 1) & 0xFFFF
        self._out += wire
        self.counters.link.frames_tx += 1
        self.counters.link.bytes_tx += len(wire)

    def _log(self, now_s: float, text: str) -> None:
        self.events.append((now_s, text))

    # ----------------------------------------------------------------- frame handling
    def _on_decode_error(self, err: FrameError, now_s: float) -> None:
        stats = self.counters.link
        if err.code is FrameErrorCode.CRC:
            stats.crc_errors += 1
        elif err.code is FrameErrorCode.VERSION:
            stats.version_errors += 1
            self._send(
                Error(
                    ErrorCode.VERSION_UNSUPPORTED,
                    0,
                    max(self.config.supported_versions),
                ),
                now_s,
            )
        else:
            stats.decode_errors += 1

    def _on_frame(self, frame: Frame, now_s: float) -> None:
        h, msg = frame.header, frame.message
        stats = self.counters.link
        if h.flags & Flag.FROM_MCU:
            # Our own frames echoed back, or two MCUs wired together
            stats.wrong_direction += 1
            return
        if isinstance(msg, Estop):
            # Stopping is always safe: obey from any session and any seq, and always answer.
            if h.session_id == self.session_id and self._host_seq.last is not None:
                self._host_seq.check(h.seq)
            self._latch(
                FaultFlag.ESTOP, Mode.ESTOP, now_s, f"estop reason={msg.reason}"
            )
            self._send(Ack(int(h.msg_type), h.seq), now_s)
            return
        if isinstance(msg, Hello):
            self._on_hello(h.seq, msg, now_s)
            return
        if h.session_id != self.session_id:
            stats.session_mismatch += 1
            self._send(Nack(int(h.msg_type), h.seq, ErrorCode.SESSION_MISMATCH), now_s)
            return
        if not self.handshake_done:
            self._send(Nack(int(h.msg_type), h.seq, ErrorCode.NO_HANDSHAKE), now_s)
            return
        verdict, missed = self._host_seq.check(h.seq)
        if verdict is SeqVerdict.DUPLICATE:
            stats.duplicates += 1  # idempotent: the first copy was already handled
            return
        if verdict is SeqVerdict.STALE:
            stats.out_of_order += 1
            return
        stats.seq_gaps += missed
        code = self._dispatch(frame, now_s)
        if code is not ErrorCode.NONE:
            if isinstance(msg, JointCommand):
                self.counters.commands_rejected += 1
            self._send(Nack(int(h.msg_type), h.seq, code), now_s)
        elif (
            not isinstance(msg, (JointCommand, Heartbeat)) or h.flags & Flag.ACK_REQUEST
        ):
            self._send(Ack(int(h.msg_type), h.seq), now_s)

    def _on_hello(self, seq: int, msg: Hello, now_s: float) -> None:
        common = [
            v
            for v in self.config.supported_versions
            if msg.proto_min <= v <= msg.proto_max
        ]
        if not common:
            self._send(
                Nack(int(Hello.MSG_TYPE), seq, ErrorCode.VERSION_UNSUPPORTED), now_s
            )
            return
        self.handshake_done = True
        self._host_seq.reset(seq)
        if self.mode is Mode.ARMED:
            # A (re)handshake always ends motion: the host that armed us may be gone.
            self.mode = Mode.STOPPING
            self._log(now_s, "hello while armed -> stopping")
        c = self.config
        self._send(
            Capabilities(
                max(common),
                c.n_joints,
                c.fw_version,
                msg.nonce,
                c.watchdog_ms,
                c.max_cmd_rate_hz,
                c.max_deadline_ms,
                c.device_id,
            ),
            now_s,
        )

    def _dispatch(self, frame: Frame, now_s: float) -> ErrorCode:
        msg = frame.message
        if isinstance(msg, JointCommand):
            return self._on_command(frame.header.seq, msg, now_s)
        if isinstance(msg, Heartbeat):
            self._send(Heartbeat(frame.header.seq, frame.header.t_us, self.mode), now_s)
            return ErrorCode.NONE
        if isinstance(msg, Arm):
            return self._on_arm(now_s)
        if isinstance(msg, Disarm):
            if self.mode is Mode.ARMED:
                self.mode = Mode.STOPPING
                self._log(now_s, "disarm -> stopping")
            return ErrorCode.NONE
        if isinstance(msg, ClearFault):
            return self._on_clear(msg, now_s)
        if isinstance(msg, LimitsConfig):
            return self._on_limits(msg, now_s)
        return ErrorCode.UNSUPPORTED_MESSAGE

    def _refusal_for_mode(self) -> ErrorCode:
        return {
            Mode.ESTOP: ErrorCode.ESTOP_LATCHED,
            Mode.FAULT: ErrorCode.FAULT_LATCHED,
        }.get(self.mode, ErrorCode.NOT_ARMED)

    def _on_command(self, seq: int, msg: JointCommand, now_s: float) -> ErrorCode:
        if self.mode is not Mode.ARMED:
            return self._refusal_for_mode()
        if len(msg.q_rad) != self.config.n_joints:
            return ErrorCode.JOINT_COUNT
        ahead_us = _signed32(msg.deadline_us - self.mcu_time_us(now_s))
        if ahead_us < 0:
            return ErrorCode.DEADLINE_EXPIRED
        if ahead_us > self.config.max_deadline_ms * 1000:
            return ErrorCode.DEADLINE_TOO_FAR
        code = check_command(msg.q_rad, msg.qd_rad_s, self.limits)
        if code is not ErrorCode.NONE:
            return code
        self.q_cmd_rad = list(msg.q_rad)
        self.qd_ff_rad_s = list(msg.qd_rad_s)
        self._cmd_deadline_us = msg.deadline_us
        self.last_cmd_rx_s = now_s
        self.last_cmd_seq = seq
        self.counters.commands_applied += 1
        if self.config.state_on_command:
            self._send(self._state_message(), now_s)
        return ErrorCode.NONE

    def _on_arm(self, now_s: float) -> ErrorCode:
        if self.mode is Mode.ARMED:
            # Idempotent: a retried ARM must not reset the setpoint.
            return ErrorCode.NONE
        if self.mode in (Mode.ESTOP, Mode.FAULT) or self.fault_flags:
            return self._refusal_for_mode()
        if self.mode is Mode.STOPPING or not self._standstill():
            return ErrorCode.NOT_STANDSTILL
        # Re-arm starts from where the joints are, never from an old setpoint (no jump).
        self.q_ref_rad = list(self.sample.q_rad)
        self.v_ref_rad_s = [0.0] * self.config.n_joints
        self.q_cmd_rad = list(self.sample.q_rad)
        self.qd_ff_rad_s = [0.0] * self.config.n_joints
        self.last_cmd_rx_s = now_s
        self.mode = Mode.ARMED
        self._log(now_s, "armed")
        return ErrorCode.NONE

    def _on_clear(self, msg: ClearFault, now_s: float) -> ErrorCode:
        if not self._standstill():
            return ErrorCode.NOT_STANDSTILL
        self.fault_flags &= ~msg.fault_mask
        if self.mode is Mode.ESTOP and not self.fault_flags & FaultFlag.ESTOP:
            self.mode = Mode.FAULT if self.fault_flags else Mode.DISARMED
        elif self.mode is Mode.FAULT and not self.fault_flags:
            self.mode = Mode.DISARMED
        self._log(now_s, f"clear 0x{msg.fault_mask:X} -> {self.mode.name}")
        return ErrorCode.NONE

    def _on_limits(self, msg: LimitsConfig, now_s: float) -> ErrorCode:
        if self.mode is not Mode.DISARMED:
            return ErrorCode.INVALID_STATE
        code = check_limits_config(msg, self.config)
        if code is not ErrorCode.NONE:
            return code
        self.limits = JointLimits(
            list(msg.q_min_rad),
            list(msg.q_max_rad),
            list(msg.qd_max_rad_s),
            list(msg.current_max_a),
        )
        self._log(now_s, "limits configured")
        return ErrorCode.NONE

    # ----------------------------------------------------------------- firmware tick
    def tick(self, now_s: float) -> None:
        """Advance reference, plant and fault monitors to ``now_s`` in steps of ``tick_s``."""
        c = self.config
        if now_s < self._booting_until_s:
            self._last_tick_s = now_s
            self.sample = self.plant.step(
                tuple(self.q_ref_rad), (0.0,) * c.n_joints, c.tick_s
            )
            return
        while now_s - self._last_tick_s >= c.tick_s - 1e-12:
            self._last_tick_s += c.tick_s
            self._step(self._last_tick_s)
        if now_s >= self._next_state_s:
            self._next_state_s = max(self._next_state_s + c.state_period_s, now_s)
            self._send(self._state_message(), now_s)

    def _step(self, t_s: float) -> None:
        c = self.config
        if (
            self.mode is Mode.ARMED
            and t_s - self.last_cmd_rx_s > c.watchdog_ms / 1000.0
        ):
            self.counters.watchdog_trips += 1
            self._latch(FaultFlag.WATCHDOG, Mode.FAULT, t_s, "watchdog expired")
        target = None
        if self.mode is Mode.ARMED:
            ff_valid = _signed32(self._cmd_deadline_us - self.mcu_time_us(t_s)) >= 0
            qd_ff = self.qd_ff_rad_s if ff_valid else [0.0] * c.n_joints
            target = (self.q_cmd_rad, qd_ff)
        for i in reference_step(self.q_ref_rad, self.v_ref_rad_s, target, self.limits, c,
                                (self.sample.q_rad, self.sample.qd_rad_s)):
            self.counters.windup_resets[i] += 1
        self.sample = self.plant.step(
            tuple(self.q_ref_rad), tuple(self.v_ref_rad_s), c.tick_s
        )
        self._update_standstill(t_s)
        self._monitor(t_s)
        if self.mode is Mode.STOPPING and self._standstill():
            self.mode = Mode.DISARMED
            self._log(t_s, "stopped -> disarmed")

    def _monitor(self, t_s: float) -> None:
        raised = detect_faults(self.sample, self.q_ref_rad, self.limits, self.config)
        new = raised & ~self.fault_flags
        if new:
            mode = Mode.ESTOP if self.mode is Mode.ESTOP else Mode.FAULT
            self._latch(new, mode, t_s, f"fault 0x{new:X}")

    def _latch(self, flags: int, mode: Mode, now_s: float, why: str) -> None:
        new = flags & ~self.fault_flags
        self.fault_flags |= flags
        if mode is Mode.ESTOP or self.mode is not Mode.ESTOP:
            self.mode = mode
        if flags & FaultFlag.ESTOP:
            self.counters.estops += 1
        self._log(now_s, why)
        if new:
            code = (
                ErrorCode.WATCHDOG_EXPIRED
                if new & FaultFlag.WATCHDOG
                else ErrorCode.FAULT_RAISED
            )
            self._send(Error(code, self.fault_flags, 0), now_s)

    def _update_standstill(self, t_s: float) -> None:
        still = not any(self.v_ref_rad_s) and all(
            abs(v) < self.config.standstill_rad_s for v in self.sample.qd_rad_s
        )
        if not still:
            self._still_since_s = None
        elif self._still_since_s is None:
            self._still_since_s = t_s

    def _standstill(self) -> bool:
        """Reference stopped and every joint slower than the threshold for ``standstill_hold_s``."""
        since = self._still_since_s
        return (
            since is not None
            and self._last_tick_s - since >= self.config.standstill_hold_s - 1e-9
        )

    def _state_message(self) -> State:
        s = self.sample
        return State(
            self.mode,
            self.fault_flags,
            self.last_cmd_seq,
            s.q_rad,
            s.qd_rad_s,
            s.current_a,
            s.temp_c,
        )


def _signed32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x
