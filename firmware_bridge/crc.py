"""CRC-16/CCITT-FALSE, the frame check sequence of the edge wire protocol.

Parameters (Rocksoft model): width 16, poly 0x1021, init 0xFFFF, refin false, refout false,
xorout 0x0000, check 0x29B1 (CRC of ASCII "123456789").

``binascii.crc_hqx`` is exactly this polynomial, MSB first and unreflected, with the initial value
as its argument, so it computes CCITT-FALSE when started from 0xFFFF (and does it in C). The C
codec in ``c/edge_frame.c`` computes the same function bit by bit; the tests cross-check both
against an independent bitwise Python reference.
"""

from __future__ import annotations

import binascii

CRC16_POLY = 0x1021
CRC16_INIT = 0xFFFF
CRC16_XOROUT = 0x0000
CRC16_CHECK = 0x29B1


def crc16_ccitt_false(
    data: bytes | bytearray | memoryview, crc: int = CRC16_INIT
) -> int:
    """CRC-16/CCITT-FALSE of ``data``; pass a previous result as ``crc`` to continue a stream."""
    return binascii.crc_hqx(data, crc) ^ CRC16_XOROUT
