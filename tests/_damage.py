"""Damage a file as a failing disk would, for the tests of the checks that catch it."""

import struct
import zipfile
from pathlib import Path


def flip_a_stored_byte(path) -> None:
    """Flip one byte in the middle of the largest record's stored data of a torch zip archive: the
    record's CRC32 no longer matches, and ``torch.load`` would read the file without noticing."""
    p = Path(path)
    with zipfile.ZipFile(p) as z:
        info = max(z.infolist(), key=lambda i: i.file_size)
    b = bytearray(p.read_bytes())
    name_len, extra_len = struct.unpack("<HH", b[info.header_offset + 26: info.header_offset + 30])
    b[info.header_offset + 30 + name_len + extra_len + info.file_size // 2] ^= 0xFF
    p.write_bytes(bytes(b))
