"""Capture on sway: grim (the wlr-screencopy protocol) shows the window the test opened, where it is.

The window (tests/support/wayland_target.py) paints its pad in a colour nothing else on the desktop
has; the frame must hold exactly the pad's rectangle in that colour once the window shows, and none
of it before.
"""

from __future__ import annotations

import io
import subprocess
import time

import numpy as np
import pytest
from PIL import Image

from bench.rigs.sway_stack import SwayStack
from tests.automation.wlroots.conftest import SwayTarget
from tests.support.wayland_target import LAYOUT, PAD_COLOUR

pytestmark = [pytest.mark.display, pytest.mark.wlroots]


def grim_frame(stack: SwayStack) -> np.ndarray:
    """The whole output through grim, as RGB pixels."""
    png = subprocess.run(["grim", "-t", "png", "-"], env=stack.env(), capture_output=True, timeout=20, check=True)
    return np.asarray(Image.open(io.BytesIO(png.stdout)).convert("RGB"))


def pad_box(frame: np.ndarray) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) of the pixels in the pad's colour, or None when there are none."""
    ys, xs = np.nonzero((frame == np.array(PAD_COLOUR, dtype=np.uint8)).all(axis=2))
    if xs.size == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def test_grim_frame_shows_the_window_the_test_opened(sway_stack: SwayStack) -> None:
    before = grim_frame(sway_stack)
    assert before.shape[:2] == (sway_stack.output_size[1], sway_stack.output_size[0])
    assert pad_box(before) is None, "the pad's colour is on the desktop before the window opened"
    target = SwayTarget(sway_stack)
    try:
        left, top, width, height = LAYOUT["pad"]
        expected = (left, top, left + width, top + height)
        found = None
        deadline = time.monotonic() + 15
        while found != expected and time.monotonic() < deadline:  # sway draws the window once it is mapped
            frame = grim_frame(sway_stack)
            found = pad_box(frame)
        assert found == expected, f"grim's frame shows the pad at {found}, the window drew it at {expected}"
        pad = frame[top : top + height, left : left + width]
        assert (pad == np.array(PAD_COLOUR, dtype=np.uint8)).all(), "the pad's rectangle is not whole in the frame"
    finally:
        target.close()
