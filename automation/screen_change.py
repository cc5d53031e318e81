"""Has the screen changed? Cheap fingerprints of frames, and waiting for the screen to settle.

A fingerprint is a coarse grey thumbnail: comparing two costs microseconds and ignores noise
smaller than a block (a blinking caret), while any visible change of layout shows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from holodesk.automation.screen import ScreenFrame

# Mean absolute difference (0-255 grey levels, per thumbnail cell) under which two frames look the same.
SAME_SCREEN_THRESHOLD = 0.5
THUMBNAIL_CELLS = 64  # cells along the longer side


@dataclass(frozen=True, slots=True, eq=False)
class Fingerprint:
    """A coarse grey thumbnail of a frame, with the region it shows."""

    region: tuple[int, int, int, int]
    cells: np.ndarray

    def looks_like(self, other: Fingerprint, threshold: float = SAME_SCREEN_THRESHOLD) -> bool:
        if self.region != other.region or self.cells.shape != other.cells.shape:
            return False
        return float(np.abs(self.cells - other.cells).mean()) < threshold


def fingerprint(frame: ScreenFrame) -> Fingerprint:
    """Average grey value over blocks of the frame (strided sampling keeps it under a millisecond)."""
    height, width = frame.pixels.shape[:2]
    block = max(1, max(height, width) // THUMBNAIL_CELLS)
    # Sample every 4th pixel inside each block: enough for averages, a 16th of the memory traffic.
    sampled = frame.pixels[::4, ::4, :3].astype(np.float32)
    grey = sampled.mean(axis=2)
    rows = max(1, grey.shape[0] * 4 // block)
    cols = max(1, grey.shape[1] * 4 // block)
    trimmed = grey[: rows * (grey.shape[0] // rows), : cols * (grey.shape[1] // cols)]
    cells = trimmed.reshape(rows, trimmed.shape[0] // rows, cols, trimmed.shape[1] // cols).mean(axis=(1, 3))
    region = frame.region
    return Fingerprint((region.left, region.top, region.width, region.height), cells)


def wait_for_settle(
    grab: Callable[[], ScreenFrame],
    timeout_s: float,
    poll_s: float,
    sleep: Callable[[float], object] = time.sleep,
) -> tuple[ScreenFrame, bool]:
    """Grab until two consecutive frames are identical or `timeout_s` passes.

    Returns the last frame and whether the screen settled. `sleep` may raise to abort (the engine
    passes its cancel token's sleep), so a stop is honoured while waiting.
    """
    deadline = time.monotonic() + timeout_s
    previous = grab()
    while time.monotonic() < deadline:
        sleep(poll_s)
        current = grab()
        if current.same_pixels(previous):
            return current, True
        previous = current
    return previous, False
