"""Synthetic ScreenFrames for tests that need pixels but no display."""

from __future__ import annotations

import numpy as np

from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.screen import ScreenFrame


def solid_frame(
    width: int = 320,
    height: int = 200,
    colour: tuple[int, int, int] = (40, 80, 120),
    left: int = 0,
    top: int = 0,
    monitors: tuple[Monitor, ...] | None = None,
) -> ScreenFrame:
    """A frame of one colour (RGB) covering a monitor at (left, top)."""
    pixels = np.empty((height, width, 4), np.uint8)
    pixels[:, :, 0], pixels[:, :, 1], pixels[:, :, 2] = colour[2], colour[1], colour[0]
    pixels[:, :, 3] = 255
    rect = Rect(left, top, width, height)
    monitor = Monitor(1, rect)
    return ScreenFrame(pixels, rect, monitor, monitors or (monitor,), captured_at=0.0)


def with_box(frame: ScreenFrame, x: int, y: int, size: int, colour: tuple[int, int, int]) -> ScreenFrame:
    """A copy of `frame` with a filled square (frame-relative position)."""
    pixels = frame.pixels.copy()
    pixels[y : y + size, x : x + size, 0:3] = colour[::-1]
    return ScreenFrame(pixels, frame.region, frame.monitor, frame.monitors, captured_at=frame.captured_at + 1)
