"""Consistent Overhead Byte Stuffing (COBS) with 0x00 as the frame delimiter.

``encode`` never emits 0x00, so a 0x00 on the wire always ends a frame and a receiver that lost
sync recovers at the next delimiter. Overhead: one code byte per started block of 254 data bytes
(``max_encoded_len``). The delimiter itself is added by the frame codec, not here.
"""

from __future__ import annotations


class CobsError(ValueError):
    """The input is not a valid COBS encoding (zero byte inside, or a code overruns the end)."""


def max_encoded_len(raw_len: int) -> int:
    """Worst-case COBS output length for ``raw_len`` input bytes (without delimiter)."""
    return raw_len + raw_len // 254 + 1


def encode(data: bytes | bytearray | memoryview) -> bytes:
    """COBS-encode ``data``; the result contains no 0x00 byte."""
    out = bytearray()
    code_index = 0
    out.append(0)  # placeholder for the first code byte
    code = 1
    for byte in bytes(data):
        if byte == 0:
            out[code_index] = code
            code_index = len(out)
            out.append(0)
            code = 1
            continue
        out.append(byte)
        code += 1
        if code == 0xFF:
            out[code_index] = code
            code_index = len(out)
            out.append(0)
            code = 1
    out[code_index] = code
    return bytes(out)


def decode(data: bytes | bytearray | memoryview) -> bytes:
    """Decode one COBS block (delimiter already stripped). Raises ``CobsError`` if malformed."""
    src = bytes(data)
    n = len(src)
    if n == 0:
        raise CobsError("empty input")
    out = bytearray()
    i = 0
    while i < n:
        code = src[i]
        if code == 0:
            raise CobsError(f"zero byte at offset {i}")
        end = i + code
        if end > n:
            raise CobsError(f"code {code} at offset {i} runs past end ({n} bytes)")
        block = src[i + 1 : end]
        if 0 in block:
            raise CobsError(f"zero byte inside block starting at offset {i}")
        out += block
        i = end
        if code != 0xFF and i < n:
            out.append(0)
    return bytes(out)
