"""Wire constants of the edge protocol (version 1): sizes, message types, flags, modes, faults,
error codes. Numeric values are normative (PROTOCOL.md section 3) and shared with c/edge_frame.h.
"""

from __future__ import annotations

import enum

PROTOCOL_VERSION = 1
MAX_JOINTS = 12
# version u8, type u8, flags u8, session u16, seq u16, t_us u32, payload_len u16
HEADER_SIZE = 13
CRC_SIZE = 2
MAX_PAYLOAD = 240
MAX_RAW_FRAME = HEADER_SIZE + MAX_PAYLOAD + CRC_SIZE  # 255
# COBS worst case for MAX_RAW_FRAME, without the delimiter: 257
MAX_ENCODED_FRAME = MAX_RAW_FRAME + MAX_RAW_FRAME // 254 + 1


class MsgType(enum.IntEnum):
    HELLO = 0x01
    CAPABILITIES = 0x02
    JOINT_COMMAND = 0x10
    STATE = 0x11
    HEARTBEAT = 0x20
    ESTOP = 0x30
    CLEAR_FAULT = 0x31
    ARM = 0x32
    DISARM = 0x33
    LIMITS_CONFIG = 0x40
    ACK = 0x50
    NACK = 0x51
    ERROR = 0x52


class Flag(enum.IntFlag):
    # The receiver answers with ACK/NACK even for types that are normally silent.
    ACK_REQUEST = 0x01
    # Set on every MCU->host frame; a host drops frames without it (echo guard).
    FROM_MCU = 0x02


FLAGS_RESERVED_MASK = 0xFC


class Mode(enum.IntEnum):
    DISARMED = 0  # powered, holding, ignores joint commands; the boot state
    ARMED = 1  # follows joint commands; watchdog running
    STOPPING = 2  # normal stop (DISARM) in progress; DISARMED at standstill
    FAULT = 3  # latched fault; controlled stop, hold; CLEAR_FAULT then ARM
    ESTOP = 4  # latched e-stop; controlled stop, hold; CLEAR_FAULT(ESTOP) then ARM


class FaultFlag(enum.IntFlag):
    ESTOP = 1 << 0
    WATCHDOG = 1 << 1
    OVER_TEMP = 1 << 2
    OVER_CURRENT = 1 << 3
    POSITION_LIMIT = 1 << 4
    TRACKING = 1 << 5


class ErrorCode(enum.IntEnum):
    """Codes carried in NACK and ERROR payloads (on the wire)."""

    NONE = 0
    VERSION_UNSUPPORTED = 1
    SESSION_MISMATCH = 2
    NO_HANDSHAKE = 3
    NOT_ARMED = 4
    ESTOP_LATCHED = 5
    FAULT_LATCHED = 6
    DEADLINE_EXPIRED = 7
    DEADLINE_TOO_FAR = 8
    JOINT_COUNT = 9
    NOT_FINITE = 10
    LIMIT_VIOLATION = 11
    NOT_STANDSTILL = 12
    INVALID_STATE = 13
    LIMITS_OUT_OF_RANGE = 14
    UNSUPPORTED_MESSAGE = 15
    WATCHDOG_EXPIRED = 16
    FAULT_RAISED = 17
