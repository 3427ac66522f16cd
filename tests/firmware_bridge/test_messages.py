import struct

import pytest

from firmware_bridge.messages import (
    MESSAGE_CLASSES,
    Capabilities,
    Heartbeat,
    JointCommand,
    LimitsConfig,
    Nack,
    PayloadError,
    State,
)
from firmware_bridge.wire_constants import (
    MAX_JOINTS,
    MAX_PAYLOAD,
    ErrorCode,
    Mode,
    MsgType,
)


def test_every_type_has_a_class():
    assert set(MESSAGE_CLASSES) == set(MsgType)


def test_largest_payloads_fit():
    n = MAX_JOINTS
    big_state = State(
        Mode.ARMED, 0, 0, (0.0,) * n, (0.0,) * n, (0.0,) * n, (0.0,) * n
    ).pack()
    big_limits = LimitsConfig((0.0,) * n, (1.0,) * n, (1.0,) * n, (1.0,) * n).pack()
    assert len(big_state) == 8 + 16 * n <= MAX_PAYLOAD
    assert len(big_limits) == 1 + 16 * n <= MAX_PAYLOAD


def test_joint_command_layout_is_little_endian():
    p = JointCommand(0x01020304, (1.0,), (-2.0,)).pack()
    assert p == b"\x01" + b"\x04\x03\x02\x01" + struct.pack("<f", 1.0) + struct.pack(
        "<f", -2.0
    )


@pytest.mark.parametrize(
    "cls, payload",
    [
        (JointCommand, b""),
        (JointCommand, b"\x00" + bytes(4)),  # n = 0
        (JointCommand, b"\x0d" + bytes(4 + 8 * 13)),  # n = 13
        (JointCommand, b"\x02" + bytes(4 + 8)),  # one joint short
        (State, b"\x01\x05" + bytes(6 + 16)),  # mode 5 unknown
        (Heartbeat, bytes(6)),
        (Nack, b"\x10\x00\x00\x63"),  # error code 99 unknown
        (Capabilities, bytes(19)),  # n_joints = 0
    ],
)
def test_malformed_payloads_raise_payload_error(cls, payload):
    with pytest.raises(PayloadError):
        cls.unpack(payload)


def test_pack_refuses_inconsistent_arrays():
    with pytest.raises(PayloadError):
        JointCommand(0, (0.0, 1.0), (0.0,)).pack()
    with pytest.raises(PayloadError):
        JointCommand(0, (), ()).pack()
    with pytest.raises(PayloadError):
        JointCommand(0, (0.0,) * 13, (0.0,) * 13).pack()


def test_enums_decode_to_enums():
    n = Nack.unpack(Nack(0x10, 5, ErrorCode.LIMIT_VIOLATION).pack())
    assert n.error_code is ErrorCode.LIMIT_VIOLATION
    s = State.unpack(State(Mode.ESTOP, 1, 2, (0.0,), (0.0,), (0.0,), (0.0,)).pack())
    assert s.mode is Mode.ESTOP
