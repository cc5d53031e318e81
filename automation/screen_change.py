"""Has the screen changed? Cheap fingerprints of frames, and waiting for the screen to settle.

A fingerprint is a coarse grey thumbnail: comparing two costs microseconds and ignores noise
smaller than a block (a blinking caret), while any visible change of layout shows. Settling
compares whole frames exactly (ScreenFrame.same_pixels).
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
    """Average grey value over blocks of the frame (about a millisecond at 1920x1080).

    Every 4th pixel of every 4th row is enough for block averages and reads a 16th of the frame;
    the blocks are summed in integers straight from the strided view (no float copy of the frame).
    """
    height, width = frame.pixels.shape[:2]
    block = max(1, max(height, width) // THUMBNAIL_CELLS)
    sampled = frame.pixels[::4, ::4, :3]
    # At most one cell per sampled pixel: a frame under 256 pixels a side has blocks under 4 pixels.
    rows = max(1, min(sampled.shape[0], sampled.shape[0] * 4 // block))
    cols = max(1, min(sampled.shape[1], sampled.shape[1] * 4 // block))
    per_row, per_col = sampled.shape[0] // rows, sampled.shape[1] // cols
    trimmed = sampled[: rows * per_row, : cols * per_col]
    sums = trimmed.reshape(rows, per_row, cols, per_col, 3).sum(axis=(1, 3, 4), dtype=np.uint32)
    cells = sums.astype(np.float32) / np.float32(per_row * per_col * 3)
    region = frame.region
    return Fingerprint((region.left, region.top, region.width, region.height), cells)


def wait_for_settle(
    grab: Callable[[], ScreenFrame],
    timeout_s: float,
    poll_s: float,
    sleep: Callable[[float], object] = time.sleep,
    on_candidate: Callable[[ScreenFrame], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[ScreenFrame, bool]:
    """Grab until two consecutive frames, begun `poll_s` apart, are identical or `timeout_s` passes.

    Returns a frame of the settled screen and whether it settled. `sleep` may raise to abort (the
    engine passes its cancel token's sleep), so a stop is honoured while waiting. Each frame that
    may turn out to be the answer is given to `on_candidate` before the wait that decides it (the
    engine starts preparing it for the model meanwhile); when two frames agree, the earlier one, the
    candidate, is returned: its pixels are the later one's, and the work on it is already done.
    """
    deadline = time.monotonic() + timeout_s
    grabbed = clock()
    previous = grab()
    while time.monotonic() < deadline:
        if on_candidate is not None:
            on_candidate(previous)
        # One poll from the start of one grab to the start of the next: the grab's own time and the
        # candidate's hand-over are part of the wait, not added to it.
        sleep(max(0.0, poll_s - (clock() - grabbed)))
        grabbed = clock()
        current = grab()
        if current.same_pixels(previous):
            return previous, True
        previous = current
    return previous, False
