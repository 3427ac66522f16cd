"""Golden test vectors shared by the Python and C codecs (``golden_vectors.json``).

``python -m firmware_bridge.golden --write`` regenerates the file from the definitions below;
``--check`` fails if the file differs (run it after any codec change: a diff here is a wire-format
change and needs a protocol version bump). ``message_from_json`` rebuilds a message from a vector.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import struct
import sys
from pathlib import Path
from typing import Any

from firmware_bridge import cobs
from firmware_bridge.crc import (
    CRC16_CHECK,
    CRC16_INIT,
    CRC16_POLY,
    CRC16_XOROUT,
    crc16_ccitt_false,
)
from firmware_bridge.frame_codec import encode_frame, encode_raw
from firmware_bridge.messages import (
    MESSAGE_CLASSES,
    Ack,
    Arm,
    Capabilities,
    ClearFault,
    Disarm,
    Error,
    Estop,
    Heartbeat,
    Hello,
    JointCommand,
    LimitsConfig,
    Message,
    Nack,
    State,
)
from firmware_bridge.wire_constants import (
    MAX_ENCODED_FRAME,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    ErrorCode,
    FaultFlag,
    Flag,
    Mode,
    MsgType,
)

GOLDEN_PATH = Path(__file__).with_name("golden_vectors.json")
MCU = int(Flag.FROM_MCU)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _f32s(*xs: float) -> tuple[float, ...]:
    return tuple(_f32(x) for x in xs)


def _valid_cases() -> list[tuple[str, Message, dict[str, int]]]:
    q6 = _f32s(0.0, 0.5, -1.25, 1.5707964, -0.1, 3.0)
    return [
        ("hello", Hello(1, 1, 0xDEADBEEF), {"seq": 0, "session_id": 0, "t_us": 1000}),
        (
            "capabilities",
            Capabilities(1, 6, (0, 1, 0), 0xDEADBEEF, 50, 1000, 200, 0xED6E0001),
            {"seq": 0, "session_id": 0x1234, "t_us": 5, "flags": MCU},
        ),
        (
            "joint_command_6",
            JointCommand(70_000, q6, _f32s(0.0, 0.25, 0.0, -0.5, 0.0, 0.125)),
            {"seq": 42, "session_id": 0x1234, "t_us": 123_456},
        ),
        (
            "joint_command_seq_wrap",
            JointCommand(0xFFFFFFF0, _f32s(0.25), _f32s(-0.25)),
            {
                "seq": 0xFFFF,
                "session_id": 0xFFFF,
                "t_us": 0xFFFFFFFF,
                "flags": int(Flag.ACK_REQUEST),
            },
        ),
        (
            "state_6",
            State(
                Mode.ARMED,
                0,
                42,
                q6,
                _f32s(0, 0.1, 0, 0, 0, -0.2),
                _f32s(0.3, 0.3, 0.35, 0.3, 0.3, 0.3),
                _f32s(25, 25.5, 26, 25, 25, 31.25),
            ),
            {"seq": 7, "session_id": 0x1234, "t_us": 124_000, "flags": MCU},
        ),
        (
            "state_12_faulted",
            State(
                Mode.FAULT,
                int(FaultFlag.WATCHDOG | FaultFlag.OVER_TEMP),
                0xFFFF,
                _f32s(*[0.1 * i for i in range(12)]),
                (0.0,) * 12,
                (1.0,) * 12,
                _f32s(*[20.0 + i for i in range(12)]),
            ),
            {"seq": 300, "session_id": 0xBEEF, "t_us": 77, "flags": MCU},
        ),
        (
            "heartbeat_host",
            Heartbeat(),
            {"seq": 5, "session_id": 0x1234, "t_us": 2_000_000},
        ),
        (
            "heartbeat_mcu",
            Heartbeat(5, 2_000_000, Mode.DISARMED),
            {"seq": 9, "session_id": 0x1234, "t_us": 310, "flags": MCU},
        ),
        ("estop_any_session", Estop(3), {"seq": 11, "session_id": 0, "t_us": 0}),
        (
            "clear_fault_all",
            ClearFault(0xFFFFFFFF),
            {"seq": 12, "session_id": 0x1234, "t_us": 1},
        ),
        (
            "arm",
            Arm(),
            {
                "seq": 13,
                "session_id": 0x1234,
                "t_us": 2,
                "flags": int(Flag.ACK_REQUEST),
            },
        ),
        ("disarm", Disarm(), {"seq": 14, "session_id": 0x1234, "t_us": 3}),
        (
            "limits_2",
            LimitsConfig(
                _f32s(-1.5, -2.0), _f32s(1.5, 2.0), _f32s(1.0, 0.5), _f32s(3.0, 2.5)
            ),
            {"seq": 15, "session_id": 0x1234, "t_us": 4},
        ),
        (
            "ack",
            Ack(int(MsgType.ARM), 13),
            {"seq": 20, "session_id": 0x1234, "t_us": 9, "flags": MCU},
        ),
        (
            "nack_not_armed",
            Nack(int(MsgType.JOINT_COMMAND), 42, ErrorCode.NOT_ARMED),
            {"seq": 21, "session_id": 0x1234, "t_us": 10, "flags": MCU},
        ),
        (
            "error_watchdog",
            Error(ErrorCode.WATCHDOG_EXPIRED, int(FaultFlag.WATCHDOG), 0),
            {"seq": 22, "session_id": 0x1234, "t_us": 11, "flags": MCU},
        ),
    ]


def _raw(msg_type: int, payload: bytes, **kw: int) -> bytes:
    return encode_raw(
        msg_type, payload, **{"seq": 1, "session_id": 0x1234, "t_us": 0, **kw}
    )


def _raw_unchecked(payload: bytes) -> bytes:
    """A STATE frame with a payload longer than MAX_PAYLOAD (encode_raw refuses to build it)."""
    body = struct.pack(
        "<BBBHHIH", PROTOCOL_VERSION, int(MsgType.STATE), 0, 0x1234, 1, 0, len(payload)
    )
    body += payload
    return body + struct.pack("<H", crc16_ccitt_false(body))


def _wire(raw: bytes) -> bytes:
    return cobs.encode(raw) + b"\x00"


def _invalid_cases() -> list[tuple[str, bytes, str]]:
    hb = encode_raw(
        int(MsgType.HEARTBEAT), Heartbeat().pack(), seq=1, session_id=0x1234, t_us=0
    )
    flipped = bytearray(hb)
    flipped[14] ^= 0x10
    jc = JointCommand(0, _f32s(0.5, 0.5), _f32s(0.0, 0.0)).pack()
    body = bytearray(_raw(int(MsgType.ESTOP), b"\x01")[:-2])
    # Payload_len says 2, frame carries 1; CRC recomputed so LENGTH is reached
    body[11] = 2
    bad_len = bytes(body) + struct.pack("<H", crc16_ccitt_false(body))
    return [
        ("crc_bitflip", _wire(bytes(flipped)), "CRC"),
        ("cobs_code_overruns", bytes([0x05, 0x01, 0x02, 0x00]), "COBS"),
        ("too_short", _wire(b"\x01\x20\x00\x00"), "TOO_SHORT"),
        ("too_long", b"\x01" * (MAX_ENCODED_FRAME + 1) + b"\x00", "TOO_LONG"),
        (
            "version_2",
            _wire(_raw(int(MsgType.HEARTBEAT), Heartbeat().pack(), version=2)),
            "VERSION",
        ),
        ("reserved_flag", _wire(_raw(int(MsgType.ARM), b"", flags=0x80)), "FLAGS"),
        ("unknown_type", _wire(_raw(0x7F, b"")), "TYPE"),
        ("payload_len_mismatch", _wire(bad_len), "LENGTH"),
        (
            "joint_count_13",
            _wire(_raw(int(MsgType.JOINT_COMMAND), b"\x0d" + bytes(4 + 8 * 13))),
            "PAYLOAD",
        ),
        (
            "joint_command_short",
            _wire(_raw(int(MsgType.JOINT_COMMAND), jc[:-4])),
            "PAYLOAD",
        ),
        (
            "state_bad_mode",
            _wire(_raw(int(MsgType.STATE), b"\x01\x09" + bytes(6 + 16))),
            "PAYLOAD",
        ),
        (
            "nack_bad_code",
            _wire(_raw(int(MsgType.NACK), b"\x10\x01\x00\xee")),
            "PAYLOAD",
        ),
        ("arm_with_payload", _wire(_raw(int(MsgType.ARM), b"\x00")), "PAYLOAD"),
        ("payload_241_zeros", _wire(_raw_unchecked(bytes(MAX_PAYLOAD + 1))), "LENGTH"),
        (
            "payload_250_ones",
            _wire(_raw_unchecked(b"\x01" * (MAX_PAYLOAD + 10))),
            "TOO_LONG",
        ),
    ]


def message_to_json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"type": msg.MSG_TYPE.name}
    for f in dataclasses.fields(msg):
        v = getattr(msg, f.name)
        out[f.name] = (
            v.name
            if isinstance(v, enum.Enum)
            else (list(v) if isinstance(v, tuple) else v)
        )
    return out


def message_from_json(d: dict[str, Any]) -> Message:
    cls = MESSAGE_CLASSES[MsgType[d["type"]]]
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        v = d[f.name]
        if f.name == "mode":
            v = Mode[v]
        elif f.name == "error_code":
            v = ErrorCode[v]
        elif isinstance(v, list):
            v = tuple(v)
        kw[f.name] = v
    return cls(**kw)


def _stream_case() -> dict[str, Any]:
    a = encode_frame(Heartbeat(), seq=1, session_id=0x1234, t_us=0)
    b = encode_frame(Arm(), seq=2, session_id=0x1234, t_us=0)
    garbage = bytes([0x11, 0x22, 0x00, 0x33]) + b"\x01" * (MAX_ENCODED_FRAME + 5)
    truncated = a[:6]
    stream = garbage + b"\x00" + a + truncated + b"\x00" + b"\x00" + b
    return {
        "name": "garbage_oversize_truncated_then_valid",
        "stream_hex": stream.hex(),
        "frames": ["COBS", "TOO_LONG", "OK:HEARTBEAT:1", "COBS", "OK:ARM:2"],
        "note": "frames in arrival order; TOO_LONG is reported by the deframer (oversize count 1)",
    }


def build() -> dict[str, Any]:
    valid = []
    for name, msg, kw in _valid_cases():
        wire = encode_frame(msg, **kw)
        header = {
            "version": PROTOCOL_VERSION,
            "msg_type": msg.MSG_TYPE.name,
            "flags": kw.get("flags", 0),
            "session_id": kw["session_id"],
            "seq": kw["seq"],
            "t_us": kw["t_us"],
        }
        raw = cobs.decode(wire[:-1])
        valid.append(
            {
                "name": name,
                "wire_hex": wire.hex(),
                "raw_hex": raw.hex(),
                "payload_hex": msg.pack().hex(),
                "header": header,
                "message": message_to_json(msg),
            }
        )
    invalid = [
        {"name": n, "wire_hex": w.hex(), "error": e} for n, w, e in _invalid_cases()
    ]
    cobs_cases = [
        b"",
        b"\x00",
        b"\x00\x00",
        b"\x11\x22\x00\x33",
        bytes(range(1, 255)),
        bytes(range(1, 256)),
        b"\x01" * 253 + b"\x00" + b"\x02" * 300,
    ]
    return {
        "protocol_version": PROTOCOL_VERSION,
        "max_encoded_frame": MAX_ENCODED_FRAME,
        "max_payload": MAX_PAYLOAD,
        "crc": {
            "name": "CRC-16/CCITT-FALSE",
            "width": 16,
            "poly": f"0x{CRC16_POLY:04X}",
            "init": f"0x{CRC16_INIT:04X}",
            "refin": False,
            "refout": False,
            "xorout": f"0x{CRC16_XOROUT:04X}",
            "check_ascii": "123456789",
            "check": f"0x{CRC16_CHECK:04X}",
        },
        "cobs": [
            {"raw_hex": c.hex(), "encoded_hex": cobs.encode(c).hex()}
            for c in cobs_cases
        ],
        "valid": valid,
        "invalid": invalid,
        "streams": [_stream_case()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.golden")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help=f"write {GOLDEN_PATH.name}")
    group.add_argument(
        "--check", action="store_true", help="exit 1 if the file is out of date"
    )
    args = parser.parse_args(argv)
    text = json.dumps(build(), indent=1) + "\n"
    if args.write:
        GOLDEN_PATH.write_text(text)
        return 0
    if GOLDEN_PATH.read_text() != text:
        print(f"{GOLDEN_PATH} is out of date: wire format changed?", file=sys.stderr)
        return 1
    print(f"{GOLDEN_PATH.name}: up to date with the Python codec")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
