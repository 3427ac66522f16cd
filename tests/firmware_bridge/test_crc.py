from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge.crc import CRC16_CHECK, crc16_ccitt_false


def _bitwise_reference(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = (
                ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
            )
    return crc


def test_check_value_of_the_catalogue():
    assert crc16_ccitt_false(b"123456789") == CRC16_CHECK == 0x29B1


def test_empty_input_is_init():
    assert crc16_ccitt_false(b"") == 0xFFFF


@settings(deadline=None)
@given(st.binary(max_size=300))
def test_matches_bitwise_reference(data: bytes):
    assert crc16_ccitt_false(data) == _bitwise_reference(data)


@settings(deadline=None)
@given(st.binary(max_size=100), st.binary(max_size=100))
def test_streaming_continuation(a: bytes, b: bytes):
    assert crc16_ccitt_false(b, crc16_ccitt_false(a)) == crc16_ccitt_false(a + b)


@settings(deadline=None)
@given(st.binary(min_size=1, max_size=255), st.data())
def test_detects_every_single_bit_flip(data: bytes, draw: st.DataObject):
    bit = draw.draw(st.integers(0, len(data) * 8 - 1))
    flipped = bytearray(data)
    flipped[bit // 8] ^= 1 << (bit % 8)
    assert crc16_ccitt_false(bytes(flipped)) != crc16_ccitt_false(data)
