"""Whether the approval panel is drawn over the target window: the share of the panel's place that no longer
shows the target's colours (tests/support/wayland_target's background and pad), waited on."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from tests.support.wayland_target import BACKGROUND_COLOUR, PAD_COLOUR


def covered_share(frame: np.ndarray, window: Sequence[int]) -> float:
    """The share of `window` (left, top, width, height) in the RGB `frame` not in the target's colours."""
    left, top, width, height = window
    area = frame[top : top + height, left : left + width, :3].reshape(-1, 3)
    theirs = np.zeros(len(area), dtype=bool)
    for colour in (BACKGROUND_COLOUR, PAD_COLOUR):
        theirs |= (area == np.array(colour, dtype=np.uint8)).all(axis=1)
    return 1.0 - float(theirs.mean())


def wait_until_covered(rgb_frame: Callable[[], np.ndarray], window: Sequence[int], share: float = 0.97) -> None:
    """Wait (5 s at most) until the panel covers `share` of its place in the frames `rgb_frame` grabs."""
    deadline = time.monotonic() + 5
    while (covered := covered_share(rgb_frame(), window)) < share:
        assert time.monotonic() < deadline, f"the panel covers only {covered:.0%} of its place"
        time.sleep(0.05)
