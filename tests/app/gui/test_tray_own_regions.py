"""The tray icon's own region, which the tray app's capture names to the engine, is where the icon is drawn.

Under a real tray host (trayer) on Xvfb, the indicator's icon changes with the state; every pixel
that changes on the X server's screen when it does must lie inside `own_regions()`, or a routine
would record the icon's change as a step's effect.
"""

from __future__ import annotations

import time

import pytest

from holodesk.automation.routines.effects import changed_box
from holodesk.automation.screen import ScreenCapture
from tests.app.gui.test_tray import TrayProcess, tray_host  # noqa: F401  (tray_host is a fixture)

pytestmark = pytest.mark.display


def test_every_pixel_the_tray_icon_changes_is_inside_its_own_region(tray_host):  # noqa: F811
    tray = TrayProcess()
    capture = ScreenCapture()
    try:
        assert tray.next() == "kind tray"
        tray.next()  # its geometry
        tray.send("own")
        words = tray.next().split()
        assert words[0] == "own" and len(words) == 5, words
        left, top, width, height = (int(v) for v in words[1:])
        assert width > 0 and height > 0
        before = capture.grab(None)
        tray.send("state acting")
        tray.next()  # the tooltip: the state is set
        deadline = time.monotonic() + 10
        box = None
        while box is None and time.monotonic() < deadline:  # the icon is repainted a moment later
            box = changed_box(before.pixels, capture.grab(None).pixels)
            time.sleep(0.05)
        assert box is not None, "the icon did not change on the screen"
        x, y, w, h = box[0] + before.region.left, box[1] + before.region.top, box[2], box[3]
        assert left <= x and top <= y and x + w <= left + width and y + h <= top + height, (box, words)
    finally:
        capture.close()
        tray.close()
