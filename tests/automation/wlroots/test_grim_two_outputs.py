"""The wlroots capture backend with two monitors: each grab is of its own output, the desktop of both.

A second headless output (640x480, right of the first) is added once the Qt window shows on the first.
"""

from __future__ import annotations

import time

import pytest

from bench.rigs.sway_stack import SwayStack
from holodesk.automation.coords import Rect
from holodesk.automation.wlroots.capture import GrimCapture
from tests.automation.wlroots.conftest import SwayTarget
from tests.automation.wlroots.test_grim_capture import shows_pad_at
from tests.support.wayland_target import LAYOUT

pytestmark = [pytest.mark.display, pytest.mark.wlroots]


def test_each_monitor_is_grabbed_from_its_own_output(sway_stack: SwayStack, sway_target: SwayTarget) -> None:
    capture = GrimCapture(sway_stack.env())
    left, top, width, height = LAYOUT["pad"]
    expected = (left, top, left + width, top + height)
    deadline = time.monotonic() + 15
    while shows_pad_at(capture.grab(1)) != expected and time.monotonic() < deadline:
        pass  # sway draws the window once it is mapped
    sway_stack.swaymsg("command", "create_output")
    sway_stack.swaymsg("command", "output HEADLESS-2 resolution 640x480 position 1024 0")
    deadline = time.monotonic() + 15
    while len(capture.monitors()) < 2 or capture.monitors()[1].rect != Rect(1024, 0, 640, 480):
        assert time.monotonic() < deadline, f"sway did not add the second output: {capture.monitors()}"
        time.sleep(0.05)
    first, second, desktop = capture.grab(1), capture.grab(2), capture.grab(None)
    assert shows_pad_at(first) == expected
    assert second.region == Rect(1024, 0, 640, 480) and second.pixels.shape == (480, 640, 4)
    assert shows_pad_at(second) is None, "the second output's grab shows the first output's window"
    assert desktop.region == Rect(0, 0, 1024 + 640, 768)
    assert shows_pad_at(desktop) == expected
