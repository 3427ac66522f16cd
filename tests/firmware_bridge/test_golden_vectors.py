import json

import pytest

from firmware_bridge import golden
from firmware_bridge.frame_codec import (
    FrameError,
    StreamDecoder,
    decode_frame,
    encode_frame,
)
from firmware_bridge.wire_constants import MsgType

VECTORS = json.loads(golden.GOLDEN_PATH.read_text())


def test_file_is_up_to_date_with_the_encoder():
    assert golden.main(["--check"]) == 0, (
        "wire format changed: bump PROTOCOL_VERSION, then --write"
    )


def test_crc_parameters_are_stated():
    crc = VECTORS["crc"]
    assert (crc["poly"], crc["init"], crc["xorout"], crc["check"]) == (
        "0x1021",
        "0xFFFF",
        "0x0000",
        "0x29B1",
    )
    assert crc["refin"] is False and crc["refout"] is False


def test_every_message_type_has_a_valid_vector():
    assert {v["message"]["type"] for v in VECTORS["valid"]} == {t.name for t in MsgType}


@pytest.mark.parametrize("vec", VECTORS["valid"], ids=lambda v: v["name"])
def test_valid_vector_decodes_and_reencodes(vec):
    wire = bytes.fromhex(vec["wire_hex"])
    frame = decode_frame(wire[:-1])
    expected = golden.message_from_json(vec["message"])
    assert frame.message == expected
    h = vec["header"]
    assert (
        frame.header.seq,
        frame.header.session_id,
        frame.header.t_us,
        frame.header.flags,
    ) == (
        h["seq"],
        h["session_id"],
        h["t_us"],
        h["flags"],
    )
    again = encode_frame(
        expected,
        seq=h["seq"],
        session_id=h["session_id"],
        t_us=h["t_us"],
        flags=h["flags"],
    )
    assert again == wire


@pytest.mark.parametrize("vec", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vector_gives_the_stated_error(vec):
    wire = bytes.fromhex(vec["wire_hex"])
    with pytest.raises(FrameError) as info:
        decode_frame(wire[:-1])
    assert info.value.code.value == vec["error"]


@pytest.mark.parametrize("vec", VECTORS["streams"], ids=lambda v: v["name"])
def test_stream_vector(vec):
    out = StreamDecoder().feed(bytes.fromhex(vec["stream_hex"]))
    got = [
        x.code.value
        if isinstance(x, FrameError)
        else f"OK:{x.header.msg_type.name}:{x.header.seq}"
        for x in out
    ]
    assert got == vec["frames"]
