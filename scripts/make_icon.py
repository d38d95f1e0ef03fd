"""Draw Clavain's 512 px square icon (a key-like glyph on a dark tile) as a PNG, stdlib only.

Run: python scripts/make_icon.py .claude-plugin/icon.png
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

SIZE = 512
BACKGROUND = (24, 28, 38)
ACCENT = (232, 176, 64)
LIGHT = (240, 236, 226)


def pixel(x: int, y: int) -> tuple[int, int, int]:
    cx, cy = SIZE / 2, SIZE / 2
    ring = ((x - cx + 70) ** 2 + (y - cy + 40) ** 2) ** 0.5
    if 70 <= ring <= 110:
        return ACCENT
    in_shaft = cx - 25 <= y + 40 <= cx + 15 and cx + 30 <= x <= cx + 190
    if in_shaft:
        return ACCENT
    tooth = (cx + 120 <= x <= cx + 150 or cx + 165 <= x <= cx + 190) and cy - 25 <= y <= cy + 45
    if tooth:
        return LIGHT
    return BACKGROUND


def png_bytes() -> bytes:
    rows = bytearray()
    for y in range(SIZE):
        rows.append(0)
        for x in range(SIZE):
            rows.extend(pixel(x, y))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", SIZE, SIZE, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    Path(sys.argv[1] if len(sys.argv) > 1 else ".claude-plugin/icon.png").write_bytes(png_bytes())
