"""Real PNG files whose header names far more pixels than their bytes suggest (decompression bombs).

One-bit grey rows of a single colour compress about a thousandfold: a 30000x30000 picture is a file
of about 110 KB that decodes to 900 million pixels (2.7 GB as RGB), as issue 48 found one.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_bomb_png(path: Path, width: int, height: int, *, cut: bool = False) -> int:
    """Write a one-colour PNG of `width` x `height` (1-bit grey) to `path`; returns its size in bytes.

    With `cut`, the picture data stops a few bytes in: a decoder that starts decoding fails on it, so
    a refusal that names the size shows the size was read first.
    """
    row = b"\x00" + b"\x00" * ((width + 7) // 8)  # filter byte "none", then black pixels
    packer = zlib.compressobj(9)
    data = bytearray()
    for _ in range(height):
        data += packer.compress(row)
    data += packer.flush()
    if cut:
        data = data[:16]
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", bytes(data)) + _chunk(b"IEND", b"")
    path.write_bytes(png)
    return len(png)
