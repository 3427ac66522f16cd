"""Wire protocol to MCU motor controllers: spec, codec (Python and C), serial client, emulator.

Imports nothing from the rest of the project (see README.md). Pure codec pieces live in
``crc``, ``cobs``, ``messages`` and ``frame_codec``; I/O lives in ``client``, ``transport``,
``virtual_link``, ``rig``; the MCU side in ``emulator`` and ``fault_proxy``.
"""

from firmware_bridge.frame_codec import (
    Deframer,
    FrameError,
    FrameErrorCode,
    StreamDecoder,
    decode_frame,
    encode_frame,
)
from firmware_bridge.messages import Frame, Header
from firmware_bridge.wire_constants import (
    MAX_ENCODED_FRAME,
    MAX_JOINTS,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    ErrorCode,
    FaultFlag,
    Flag,
    Mode,
    MsgType,
)

__all__ = [
    "MAX_ENCODED_FRAME",
    "MAX_JOINTS",
    "MAX_PAYLOAD",
    "PROTOCOL_VERSION",
    "Deframer",
    "ErrorCode",
    "FaultFlag",
    "Flag",
    "Frame",
    "FrameError",
    "FrameErrorCode",
    "Header",
    "Mode",
    "MsgType",
    "StreamDecoder",
    "decode_frame",
    "encode_frame",
]
