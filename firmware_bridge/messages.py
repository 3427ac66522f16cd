"""Typed payloads of the edge wire protocol (version 1); constants live in ``wire_constants``.

Every payload is little-endian and packed without padding; floats are IEEE-754 binary32.
Per-joint arrays are ``(n,)`` with ``n = n_joints`` (1..MAX_JOINTS). See PROTOCOL.md for the
meaning of each field; this module only knows how to turn payload bytes into dataclasses and back.
``unpack`` raises ``PayloadError`` (a ``ValueError``) on any malformed payload, never anything else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from firmware_bridge.wire_constants import (
    MAX_JOINTS,
    PROTOCOL_VERSION,
    ErrorCode,
    Mode,
    MsgType,
)


class PayloadError(ValueError):
    """A payload does not match the layout of its message type."""


Floats = tuple[float, ...]

# Precompiled f32 array layouts, one per length: no per-call format parsing, and no growth of
# struct's internal format cache while decoding arbitrary input.
_F32_ARRAYS = tuple(struct.Struct(f"<{k}f") for k in range(4 * MAX_JOINTS + 1))


def _f32(count: int) -> struct.Struct:
    return _F32_ARRAYS[count]


def _count_arrays(payload: bytes, head: int, n_arrays: int, name: str) -> int:
    """Validate ``payload`` = ``head`` bytes + ``n_arrays`` f32[n] and return ``n`` (byte 0)."""
    if len(payload) < head:
        raise PayloadError(
            f"{name}: payload {len(payload)} B shorter than fixed part {head} B"
        )
    n = payload[0]
    if not 1 <= n <= MAX_JOINTS:
        raise PayloadError(f"{name}: n_joints={n} outside 1..{MAX_JOINTS}")
    want = head + 4 * n * n_arrays
    if len(payload) != want:
        raise PayloadError(
            f"{name}: payload {len(payload)} B, expected {want} B for n={n}"
        )
    return n


def _check_arrays(name: str, *arrays: Floats) -> int:
    n = len(arrays[0])
    if not 1 <= n <= MAX_JOINTS or any(len(a) != n for a in arrays):
        raise PayloadError(
            f"{name}: per-joint arrays must share a length in 1..{MAX_JOINTS}"
        )
    return n


@dataclass(frozen=True)
class Hello:
    """Host -> MCU: start a handshake; ``nonce`` is echoed in CAPABILITIES."""

    proto_min: int = PROTOCOL_VERSION
    proto_max: int = PROTOCOL_VERSION
    nonce: int = 0
    MSG_TYPE: ClassVar[MsgType] = MsgType.HELLO
    _FMT: ClassVar[struct.Struct] = struct.Struct("<BBI")

    def pack(self) -> bytes:
        return self._FMT.pack(self.proto_min, self.proto_max, self.nonce)

    @classmethod
    def unpack(cls, payload: bytes) -> Hello:
        if len(payload) != cls._FMT.size:
            raise PayloadError(
                f"HELLO: payload {len(payload)} B, expected {cls._FMT.size} B"
            )
        return cls(*cls._FMT.unpack(payload))


@dataclass(frozen=True)
class Capabilities:
    """MCU -> host: answer to HELLO; fixes protocol version and session for this boot."""

    proto_version: int
    n_joints: int
    fw_version: tuple[int, int, int]
    nonce: int
    watchdog_ms: int
    max_cmd_rate_hz: int
    max_deadline_ms: int
    device_id: int
    MSG_TYPE: ClassVar[MsgType] = MsgType.CAPABILITIES
    _FMT: ClassVar[struct.Struct] = struct.Struct("<BBBBBIHHHI")

    def pack(self) -> bytes:
        return self._FMT.pack(
            self.proto_version,
            self.n_joints,
            *self.fw_version,
            self.nonce,
            self.watchdog_ms,
            self.max_cmd_rate_hz,
            self.max_deadline_ms,
            self.device_id,
        )

    @classmethod
    def unpack(cls, payload: bytes) -> Capabilities:
        if len(payload) != cls._FMT.size:
            raise PayloadError(
                f"CAPABILITIES: payload {len(payload)} B, expected {cls._FMT.size}"
            )
        v, n, fw0, fw1, fw2, nonce, wd, rate, dl, dev = cls._FMT.unpack(payload)
        if not 1 <= n <= MAX_JOINTS:
            raise PayloadError(f"CAPABILITIES: n_joints={n} outside 1..{MAX_JOINTS}")
        return cls(v, n, (fw0, fw1, fw2), nonce, wd, rate, dl, dev)


@dataclass(frozen=True)
class JointCommand:
    """Host -> MCU: position targets ``q_rad (n,)`` and velocity feed-forward ``qd_rad_s (n,)``.

    ``deadline_us`` is in the MCU's clock (u32, wraps): the MCU rejects the command if it arrives
    after that time, and drops the velocity feed-forward once it has passed.
    """

    deadline_us: int
    q_rad: Floats
    qd_rad_s: Floats
    MSG_TYPE: ClassVar[MsgType] = MsgType.JOINT_COMMAND
    _HEAD: ClassVar[struct.Struct] = struct.Struct("<BI")

    def pack(self) -> bytes:
        n = _check_arrays("JOINT_COMMAND", self.q_rad, self.qd_rad_s)
        body = _f32(2 * n).pack(*self.q_rad, *self.qd_rad_s)
        return self._HEAD.pack(n, self.deadline_us) + body

    @classmethod
    def unpack(cls, payload: bytes) -> JointCommand:
        n = _count_arrays(payload, cls._HEAD.size, 2, "JOINT_COMMAND")
        _, deadline = cls._HEAD.unpack_from(payload)
        v = _f32(2 * n).unpack_from(payload, cls._HEAD.size)
        return cls(deadline, v[:n], v[n:])


@dataclass(frozen=True)
class State:
    """MCU -> host: measured joint state; ``last_cmd_seq`` = seq of the last applied command."""

    mode: Mode
    fault_flags: int
    last_cmd_seq: int
    q_rad: Floats
    qd_rad_s: Floats
    current_a: Floats
    temp_c: Floats
    MSG_TYPE: ClassVar[MsgType] = MsgType.STATE
    _HEAD: ClassVar[struct.Struct] = struct.Struct("<BBIH")

    def pack(self) -> bytes:
        n = _check_arrays(
            "STATE", self.q_rad, self.qd_rad_s, self.current_a, self.temp_c
        )
        head = self._HEAD.pack(n, int(self.mode), self.fault_flags, self.last_cmd_seq)
        body = _f32(4 * n).pack(
            *self.q_rad, *self.qd_rad_s, *self.current_a, *self.temp_c
        )
        return head + body

    @classmethod
    def unpack(cls, payload: bytes) -> State:
        n = _count_arrays(payload, cls._HEAD.size, 4, "STATE")
        _, mode, faults, last_seq = cls._HEAD.unpack_from(payload)
        v = _f32(4 * n).unpack_from(payload, cls._HEAD.size)
        return cls(
            _mode(mode),
            faults,
            last_seq,
            v[:n],
            v[n : 2 * n],
            v[2 * n : 3 * n],
            v[3 * n :],
        )


@dataclass(frozen=True)
class Heartbeat:
    """Both ways. The MCU answers a host heartbeat, echoing the host's ``seq`` and ``t_us``."""

    echo_seq: int = 0
    echo_t_us: int = 0
    mode: Mode = Mode.DISARMED
    MSG_TYPE: ClassVar[MsgType] = MsgType.HEARTBEAT
    _FMT: ClassVar[struct.Struct] = struct.Struct("<HIB")

    def pack(self) -> bytes:
        return self._FMT.pack(self.echo_seq, self.echo_t_us, int(self.mode))

    @classmethod
    def unpack(cls, payload: bytes) -> Heartbeat:
        if len(payload) != cls._FMT.size:
            raise PayloadError(
                f"HEARTBEAT: payload {len(payload)} B, expected {cls._FMT.size} B"
            )
        seq, t_us, mode = cls._FMT.unpack(payload)
        return cls(seq, t_us, _mode(mode))


@dataclass(frozen=True)
class Estop:
    """Host -> MCU: latch an e-stop. Always obeyed (any session, any seq) if the CRC is good."""

    reason: int = 0
    MSG_TYPE: ClassVar[MsgType] = MsgType.ESTOP

    def pack(self) -> bytes:
        return bytes((self.reason,))

    @classmethod
    def unpack(cls, payload: bytes) -> Estop:
        if len(payload) != 1:
            raise PayloadError(f"ESTOP: payload {len(payload)} B, expected 1 B")
        return cls(payload[0])


@dataclass(frozen=True)
class ClearFault:
    """Host -> MCU: clear latched faults in ``fault_mask`` (only at standstill)."""

    fault_mask: int
    MSG_TYPE: ClassVar[MsgType] = MsgType.CLEAR_FAULT

    def pack(self) -> bytes:
        return struct.pack("<I", self.fault_mask)

    @classmethod
    def unpack(cls, payload: bytes) -> ClearFault:
        if len(payload) != 4:
            raise PayloadError(f"CLEAR_FAULT: payload {len(payload)} B, expected 4 B")
        return cls(struct.unpack("<I", payload)[0])


@dataclass(frozen=True)
class Arm:
    """Host -> MCU: DISARMED -> ARMED; the setpoint is reset to the measured position."""

    MSG_TYPE: ClassVar[MsgType] = MsgType.ARM

    def pack(self) -> bytes:
        return b""

    @classmethod
    def unpack(cls, payload: bytes) -> Arm:
        if payload:
            raise PayloadError(f"ARM: payload {len(payload)} B, expected 0 B")
        return cls()


@dataclass(frozen=True)
class Disarm:
    """Host -> MCU: normal stop (decelerate, hold) then DISARMED."""

    MSG_TYPE: ClassVar[MsgType] = MsgType.DISARM

    def pack(self) -> bytes:
        return b""

    @classmethod
    def unpack(cls, payload: bytes) -> Disarm:
        if payload:
            raise PayloadError(f"DISARM: payload {len(payload)} B, expected 0 B")
        return cls()


@dataclass(frozen=True)
class LimitsConfig:
    """Host -> MCU (DISARMED only): per-joint limits, each ``(n,)``, inside firmware hard limits."""

    q_min_rad: Floats
    q_max_rad: Floats
    qd_max_rad_s: Floats
    current_max_a: Floats
    MSG_TYPE: ClassVar[MsgType] = MsgType.LIMITS_CONFIG

    def pack(self) -> bytes:
        arrays = (self.q_min_rad, self.q_max_rad, self.qd_max_rad_s, self.current_max_a)
        n = _check_arrays("LIMITS_CONFIG", *arrays)
        return bytes((n,)) + _f32(4 * n).pack(*(x for a in arrays for x in a))

    @classmethod
    def unpack(cls, payload: bytes) -> LimitsConfig:
        n = _count_arrays(payload, 1, 4, "LIMITS_CONFIG")
        v = _f32(4 * n).unpack_from(payload, 1)
        return cls(v[:n], v[n : 2 * n], v[2 * n : 3 * n], v[3 * n :])


@dataclass(frozen=True)
class Ack:
    """MCU -> host: the frame (``acked_type``, ``acked_seq``) was accepted and acted on."""

    acked_type: int
    acked_seq: int
    MSG_TYPE: ClassVar[MsgType] = MsgType.ACK
    _FMT: ClassVar[struct.Struct] = struct.Struct("<BH")

    def pack(self) -> bytes:
        return self._FMT.pack(self.acked_type, self.acked_seq)

    @classmethod
    def unpack(cls, payload: bytes) -> Ack:
        if len(payload) != cls._FMT.size:
            raise PayloadError(
                f"ACK: payload {len(payload)} B, expected {cls._FMT.size} B"
            )
        return cls(*cls._FMT.unpack(payload))


@dataclass(frozen=True)
class Nack:
    """MCU -> host: the frame was understood but refused for ``error_code``."""

    nacked_type: int
    nacked_seq: int
    error_code: ErrorCode
    MSG_TYPE: ClassVar[MsgType] = MsgType.NACK
    _FMT: ClassVar[struct.Struct] = struct.Struct("<BHB")

    def pack(self) -> bytes:
        return self._FMT.pack(self.nacked_type, self.nacked_seq, int(self.error_code))

    @classmethod
    def unpack(cls, payload: bytes) -> Nack:
        if len(payload) != cls._FMT.size:
            raise PayloadError(
                f"NACK: payload {len(payload)} B, expected {cls._FMT.size} B"
            )
        t, seq, code = cls._FMT.unpack(payload)
        return cls(t, seq, _error_code(code))


@dataclass(frozen=True)
class Error:
    """MCU -> host, unsolicited: a fault was raised or a frame could not be answered otherwise."""

    error_code: ErrorCode
    fault_flags: int = 0
    detail: int = 0
    MSG_TYPE: ClassVar[MsgType] = MsgType.ERROR
    _FMT: ClassVar[struct.Struct] = struct.Struct("<BII")

    def pack(self) -> bytes:
        return self._FMT.pack(int(self.error_code), self.fault_flags, self.detail)

    @classmethod
    def unpack(cls, payload: bytes) -> Error:
        if len(payload) != cls._FMT.size:
            raise PayloadError(
                f"ERROR: payload {len(payload)} B, expected {cls._FMT.size} B"
            )
        code, faults, detail = cls._FMT.unpack(payload)
        return cls(_error_code(code), faults, detail)


_MODES = {int(m): m for m in Mode}
_ERROR_CODES = {int(c): c for c in ErrorCode}


def _mode(value: int) -> Mode:
    mode = _MODES.get(value)
    if mode is None:
        raise PayloadError(f"unknown mode {value}")
    return mode


def _error_code(value: int) -> ErrorCode:
    code = _ERROR_CODES.get(value)
    if code is None:
        raise PayloadError(f"unknown error code {value}")
    return code


Message = (
    Hello
    | Capabilities
    | JointCommand
    | State
    | Heartbeat
    | Estop
    | ClearFault
    | Arm
    | Disarm
    | LimitsConfig
    | Ack
    | Nack
    | Error
)

MESSAGE_CLASSES: dict[MsgType, type] = {
    cls.MSG_TYPE: cls
    for cls in (
        Hello,
        Capabilities,
        JointCommand,
        State,
        Heartbeat,
        Estop,
        ClearFault,
        Arm,
        Disarm,
        LimitsConfig,
        Ack,
        Nack,
        Error,
    )
}


@dataclass(frozen=True)
class Header:
    """Frame header; ``t_us`` is the sender's clock in microseconds (u32, wraps after ~71.6 min)."""

    msg_type: MsgType
    seq: int
    session_id: int
    t_us: int
    flags: int = 0
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Frame:
    """A decoded frame: header plus typed message."""

    header: Header
    message: Message
