import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge import cobs
from firmware_bridge.golden import GOLDEN_PATH


def test_known_vectors():
    assert cobs.encode(b"") == b"\x01"
    assert cobs.encode(b"\x00") == b"\x01\x01"
    assert cobs.encode(b"\x11\x22\x00\x33") == b"\x03\x11\x22\x02\x33"
    # 254 non-zero bytes: a full block plus a trailing code byte.
    run = bytes(range(1, 255))
    assert cobs.encode(run) == b"\xff" + run + b"\x01"


def test_golden_cobs_section():
    for case in json.loads(GOLDEN_PATH.read_text())["cobs"]:
        raw, enc = bytes.fromhex(case["raw_hex"]), bytes.fromhex(case["encoded_hex"])
        assert cobs.encode(raw) == enc
        assert cobs.decode(enc) == raw


@settings(deadline=None)
@given(st.binary(max_size=700))
def test_round_trip_without_zeros_and_bounded_overhead(data: bytes):
    enc = cobs.encode(data)
    assert 0 not in enc
    assert len(enc) <= cobs.max_encoded_len(len(data))
    assert cobs.decode(enc) == data


@settings(deadline=None)
@given(st.binary(max_size=300))
def test_decode_arbitrary_bytes_raises_only_cobs_error(data: bytes):
    try:
        cobs.decode(data)
    except cobs.CobsError:
        pass


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\x05\x01\x02", b"\x03\x00\x01"])
def test_malformed(bad: bytes):
    with pytest.raises(cobs.CobsError):
        cobs.decode(bad)
