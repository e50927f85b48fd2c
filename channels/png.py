"""Image samples as a PNG file, with zlib only: how a scanned PDF's
Flate-encoded page image (rows of grey, RGB or palette samples, which is
what PNG holds too) becomes a picture a model takes. No image library:
the two formats share their sample layout, so this is framing only.
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["GREY", "PALETTE", "RGB", "png"]

GREY, RGB, PALETTE = 0, 2, 3  # PNG colour types
_COMPONENTS = {GREY: 1, RGB: 3, PALETTE: 1}
_DEPTHS = {GREY: (1, 2, 4, 8, 16), RGB: (8, 16), PALETTE: (1, 2, 4, 8)}  # what PNG allows (ISO 15948, 11.2.2)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(width: int, height: int, colour: int, depth: int, samples: bytes, palette: bytes = b"") -> bytes | None:
    """``samples`` (rows top to bottom, each padded to a whole byte, as a
    PDF image's are) as a PNG; None when PNG cannot hold them that way
    (a depth it does not allow, too few samples, a palette missing or of
    more than 256 colours)."""
    if width <= 0 or height <= 0 or depth not in _DEPTHS.get(colour, ()):
        return None
    if colour == PALETTE and not (palette and len(palette) % 3 == 0 and len(palette) <= 768):
        return None
    row = (width * _COMPONENTS[colour] * depth + 7) // 8
    if len(samples) < row * height:
        return None
    # Each row gets filter type 0 (none) in front; the deflate does the rest.
    rows = b"".join(b"\x00" + samples[at:at + row] for at in range(0, row * height, row))
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + (_chunk(b"PLTE", palette) if colour == PALETTE else b"")
            + _chunk(b"IDAT", zlib.compress(rows, 6)) + _chunk(b"IEND", b""))
