"""The wlroots capture backend (automation/wlroots/capture.py): Holodesk's own ScreenFrame of sway, read back.

The Qt window on sway paints its pad in a colour nothing else has; the backend's frame (BGRA, screen
space) must show the pad exactly where the window drew it, for one monitor and for the whole desktop.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from bench.rigs.sway_stack import SwayStack
from holodesk.automation.coords import Rect
from holodesk.automation.errors import CaptureError
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.wlroots.capture import GrimCapture
from tests.automation.wlroots.conftest import SwayTarget
from tests.automation.wlroots.test_sway_capture import pad_box
from tests.support.wayland_target import LAYOUT


def shows_pad_at(frame: ScreenFrame) -> tuple[int, int, int, int] | None:
    return pad_box(np.ascontiguousarray(frame.pixels[:, :, 2::-1]))  # BGRA to RGB


@pytest.mark.display
@pytest.mark.wlroots
@pytest.mark.parametrize("monitor", [1, None])
def test_the_frame_shows_the_window_where_it_drew_itself(
    sway_stack: SwayStack, sway_target: SwayTarget, monitor: int | None
) -> None:
    capture = GrimCapture(sway_stack.env())
    left, top, width, height = LAYOUT["pad"]
    expected = (left, top, left + width, top + height)
    deadline = time.monotonic() + 15
    frame = capture.grab(monitor)
    while shows_pad_at(frame) != expected and time.monotonic() < deadline:  # sway draws it once mapped
        frame = capture.grab(monitor)
    assert shows_pad_at(frame) == expected
    size = sway_stack.output_size
    assert frame.region == Rect(0, 0, *size)
    assert frame.pixels.shape == (size[1], size[0], 4)
    assert [m.name for m in frame.monitors] == ["HEADLESS-1"]
    assert (frame.monitor is None) == (monitor is None)


@pytest.mark.display
@pytest.mark.wlroots
def test_a_monitor_sway_lacks_is_refused_in_words(sway_stack: SwayStack) -> None:
    with pytest.raises(CaptureError, match="there is no monitor 2; sway has 1"):
        GrimCapture(sway_stack.env()).grab(2)


def test_without_grim_capture_is_refused_naming_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CaptureError, match="need grim: sudo apt install grim"):
        GrimCapture({"SWAYSOCK": "/nonexistent"}).grab(1)
