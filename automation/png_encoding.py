"""Lossless PNG bytes for a screen frame, as fast as the machine allows.

A step's screenshot is encoded while the next step runs, on the same few cores, so the encoder's cost
is the engine's cost: fpng (a fast PNG writer, standard PNG out) takes ~15 ms for a 1920x1080 frame
where Pillow's zlib at level 1 takes ~90 ms, for files about a third larger. Pillow stays as the
encoder where the fpng wheel cannot be imported (a platform it was not built for).
"""

from __future__ import annotations

import io

import numpy as np

from holodesk.automation.screen import ScreenFrame

try:
    import fpng
except ImportError:  # the Pillow path below is complete on its own
    fpng = None


def encode_png(frame: ScreenFrame) -> bytes:
    """The frame as an 8-bit RGB PNG file's bytes (alpha dropped: screens are opaque)."""
    if fpng is not None:
        return bytes(fpng.from_ndarray(np.ascontiguousarray(frame.rgb)))
    return encode_png_with_pillow(frame)


def encode_png_with_pillow(frame: ScreenFrame) -> bytes:
    """Pillow's encoder at level 1: lossless and slower; the fallback, and the reference in tests."""
    buffer = io.BytesIO()
    frame.to_image().save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()
