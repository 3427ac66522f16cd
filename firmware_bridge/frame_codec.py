"""Frames: header + payload + CRC-16, COBS-encoded, 0x00-terminated. Pure bytes, no I/O.

Raw frame (before COBS), little-endian::

    off size field
    0   1    version        (PROTOCOL_VERSION)
    1   1    msg_type       (MsgType)
    2   1    flags          (Flag; reserved bits must be 0)
    3   2    session_id     (u16, chosen by the MCU at boot)
    5   2    seq            (u16, per sender and session, +1 per frame, wraps)
    7   4    t_us           (u32, sender clock)
    11  2    payload_len    (u16, <= MAX_PAYLOAD)
    13  n    payload
    13+n 2   crc            (CRC-16/CCITT-FALSE over bytes 0..13+n-1)

``decode_frame`` raises only ``FrameError``; checks run in the order of ``FrameErrorCode`` so the
Python and C decoders report the same error for the same bytes (see golden_vectors.json).
"""

from __future__ import annotations

import enum
import struct

from firmware_bridge import cobs
from firmware_bridge.crc import crc16_ccitt_false
from firmware_bridge.messages import (
    MESSAGE_CLASSES,
    Frame,
    Header,
    Message,
    PayloadError,
)
from firmware_bridge.wire_constants import (
    CRC_SIZE,
    FLAGS_RESERVED_MASK,
    HEADER_SIZE,
    MAX_ENCODED_FRAME,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    MsgType,
)

_HEADER = struct.Struct("<BBBHHIH")
_CRC = struct.Struct("<H")
assert _HEADER.size == HEADER_SIZE


_MSG_TYPES = {int(t): t for t in MsgType}


class FrameErrorCode(enum.Enum):
    """Why a frame was rejected, in the order the checks run."""

    TOO_LONG = "TOO_LONG"  # encoded frame longer than MAX_ENCODED_FRAME (checked before decoding)
    COBS = "COBS"  # not a valid COBS block
    TOO_SHORT = "TOO_SHORT"  # fewer bytes than header + CRC
    CRC = "CRC"  # CRC mismatch
    VERSION = "VERSION"  # unsupported protocol version (CRC was good)
    FLAGS = "FLAGS"  # reserved flag bits set
    TYPE = "TYPE"  # unknown message type
    LENGTH = "LENGTH"  # payload_len field disagrees with the frame length or exceeds MAX_PAYLOAD
    PAYLOAD = "PAYLOAD"  # payload malformed for its type


class FrameError(ValueError):
    """The only exception the decoder raises. ``code`` says which check failed."""

    def __init__(
        self, code: FrameErrorCode, detail: str, version: int | None = None
    ) -> None:
        super().__init__(f"{code.value}: {detail}")
        self.code = code
        self.detail = detail
        self.version = version  # the peer's version byte, for VERSION errors


def encode_raw(
    msg_type: int,
    payload: bytes,
    *,
    seq: int,
    session_id: int,
    t_us: int,
    flags: int = 0,
    version: int = PROTOCOL_VERSION,
) -> bytes:
    """Header + payload + CRC, not COBS-encoded. Low level: no check that payload fits the type."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(
            f"payload {len(payload)} B exceeds MAX_PAYLOAD={MAX_PAYLOAD} B"
        )
    head = _HEADER.pack(
        version,
        msg_type,
        flags,
        session_id & 0xFFFF,
        seq & 0xFFFF,
        t_us & 0xFFFFFFFF,
        len(payload),
    )
    body = head + payload
    return body + _CRC.pack(crc16_ccitt_false(body))


def encode_frame(
    message: Message,
    *,
    seq: int,
    session_id: int,
    t_us: int,
    flags: int = 0,
    version: int = PROTOCOL_VERSION,
) -> bytes:
    """Encode ``message`` into wire bytes: COBS(raw frame) followed by the 0x00 delimiter."""
    raw = encode_raw(
        int(message.MSG_TYPE),
        message.pack(),
        seq=seq,
        session_id=session_id,
        t_us=t_us,
        flags=flags,
        version=version,
    )
    return cobs.encode(raw) + b"\x00"


def decode_raw(
    raw: bytes, supported_versions: frozenset[int] = frozenset({PROTOCOL_VERSION})
) -> Frame:
    """Decode a raw (already COBS-decoded) frame. Raises ``FrameError`` only."""
    n = len(raw)
    if n < HEADER_SIZE + CRC_SIZE:
        raise FrameError(
            FrameErrorCode.TOO_SHORT, f"{n} B < {HEADER_SIZE + CRC_SIZE} B"
        )
    (want_crc,) = _CRC.unpack_from(raw, n - CRC_SIZE)
    got_crc = crc16_ccitt_false(memoryview(raw)[: n - CRC_SIZE])
    if got_crc != want_crc:
        raise FrameError(
            FrameErrorCode.CRC, f"computed 0x{got_crc:04X}, frame says 0x{want_crc:04X}"
        )
    version, msg_type, flags, session, seq, t_us, payload_len = _HEADER.unpack_from(raw)
    if version not in supported_versions:
        raise FrameError(
            FrameErrorCode.VERSION, f"version {version} unsupported", version=version
        )
    if flags & FLAGS_RESERVED_MASK:
        raise FrameError(FrameErrorCode.FLAGS, f"reserved flag bits set: 0x{flags:02X}")
    mtype = _MSG_TYPES.get(msg_type)
    if mtype is None:
        raise FrameError(FrameErrorCode.TYPE, f"unknown message type 0x{msg_type:02X}")
    actual = n - HEADER_SIZE - CRC_SIZE
    if payload_len != actual or payload_len > MAX_PAYLOAD:
        raise FrameError(
            FrameErrorCode.LENGTH,
            f"payload_len={payload_len}, frame carries {actual} B",
        )
    payload = bytes(raw[HEADER_SIZE : n - CRC_SIZE])
    # Raise outside the except block: raising inside it would chain the PayloadError and, through
    # the traceback, form a reference cycle that only the cyclic GC frees (memory creep).
    try:
        message = MESSAGE_CLASSES[mtype].unpack(payload)
    except (PayloadError, struct.error) as exc:
        problem = str(exc)
    else:
        return Frame(Header(mtype, seq, session, t_us, flags, version), message)
    raise FrameError(FrameErrorCode.PAYLOAD, problem)


def decode_frame(
    encoded: bytes, supported_versions: frozenset[int] = frozenset({PROTOCOL_VERSION})
) -> Frame:
    """Decode one COBS-encoded frame (delimiter stripped). Raises ``FrameError`` only."""
    if len(encoded) > MAX_ENCODED_FRAME:
        raise FrameError(
            FrameErrorCode.TOO_LONG, f"{len(encoded)} B > {MAX_ENCODED_FRAME} B"
        )
    try:
        raw = cobs.decode(encoded)
    except cobs.CobsError as exc:
        problem = str(exc)
    else:
        return decode_raw(raw, supported_versions)
    raise FrameError(FrameErrorCode.COBS, problem)


class Deframer:
    """Split a byte stream at 0x00 delimiters, with a hard cap on buffered bytes.

    A run longer than ``max_encoded`` is discarded up to the next delimiter (counted in
    ``oversize``), so memory stays bounded whatever arrives. Empty frames (consecutive 0x00) are
    idle fill and ignored.
    """

    def __init__(self, max_encoded: int = MAX_ENCODED_FRAME) -> None:
        self.max_encoded = max_encoded
        self._buf = bytearray()
        self._discarding = False
        self.oversize = 0
        self.bytes_discarded = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | FrameError]:
        """Complete encoded frames (without delimiter) in arrival order; an oversize run shows
        up in its place as ``FrameError(TOO_LONG)``."""
        parts = bytes(data).split(b"\x00")
        out: list[bytes | FrameError] = []
        last_index = len(parts) - 1
        for i, part in enumerate(parts):
            if self._discarding:
                self.bytes_discarded += len(part)
                if i < last_index:
                    self._discarding = False
                continue
            if len(self._buf) + len(part) > self.max_encoded:
                self.oversize += 1
                self.bytes_discarded += len(self._buf) + len(part)
                self._buf.clear()
                self._discarding = i == last_index
                out.append(
                    FrameError(
                        FrameErrorCode.TOO_LONG,
                        f"no delimiter within {self.max_encoded} B",
                    )
                )
                continue
            self._buf += part
            if i < last_index and self._buf:
                out.append(bytes(self._buf))
                self._buf.clear()
        return out

    def reset(self) -> None:
        self._buf.clear()
        self._discarding = False

    @property
    def pending(self) -> int:
        """Bytes buffered for an incomplete frame (always <= max_encoded)."""
        return len(self._buf)


class StreamDecoder:
    """Deframer + decoder: bytes in, ``Frame`` or ``FrameError`` out (never raises)."""

    def __init__(
        self, supported_versions: frozenset[int] = frozenset({PROTOCOL_VERSION})
    ) -> None:
        self.deframer = Deframer()
        self.supported_versions = supported_versions

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame | FrameError]:
        out: list[Frame | FrameError] = []
        for item in self.deframer.feed(data):
            if isinstance(item, FrameError):
                out.append(item)
                continue
            try:
                out.append(decode_frame(item, self.supported_versions))
            except FrameError as exc:
                # Drop the traceback: it would pin this frame (and ``out``) in a cycle.
                out.append(exc.with_traceback(None))
        return out
