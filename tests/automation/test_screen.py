"""Screen capture against a real X server: monitors as xrandr defines them, pixels where the window is.

The target window paints a solid pad at a position it reports; the captured frames must show that
colour on exactly those screen pixels, on one 1920x1080 or 1366x768 screen and on the right-hand
monitor of a two-monitor layout.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from bench.rigs.target_client import TargetWindow
from holodesk.automation.coords import Rect
from holodesk.automation.errors import CaptureError
from holodesk.automation.screen import ScreenCapture, ScreenFrame, identical
from holodesk.automation.virtual_display import FULL_HD, LAPTOP, TWO_MONITORS, XvfbServer
from tests.automation.frames import solid_frame


@pytest.fixture(scope="module")
def capture(xvfb: XvfbServer) -> Iterator[ScreenCapture]:
    screen = ScreenCapture()
    yield screen
    screen.close()


def rgb_of(frame: ScreenFrame, rect: Rect) -> np.ndarray:
    """The RGB pixels of `rect` (screen space) inside `frame`."""
    top, left = rect.top - frame.region.top, rect.left - frame.region.left
    return frame.rgb[top : top + rect.height, left : left + rect.width]


def assert_shows_the_window(frame: ScreenFrame, window: TargetWindow) -> None:
    pad = window.widget_rect("pad")
    pad_colour = tuple(window.ready["pad_colour"])
    background = tuple(window.ready["background_colour"])
    pixels = rgb_of(frame, pad)
    assert pixels.shape == (pad.height, pad.width, 3)
    assert (pixels == pad_colour).all(), "the pad is not one solid colour where the window says it is"
    # One pixel outside each edge of the pad is the window's background: the pad ends exactly there.
    for x, y in (
        (pad.left - 1, pad.top + 10),
        (pad.right, pad.top + 10),
        (pad.left + 10, pad.top - 1),
        (pad.left + 10, pad.bottom),
    ):
        assert frame.pixel_rgb(x, y) == background, (x, y)
    assert frame.pixel_rgb(pad.left, pad.top) == pad_colour
    assert frame.pixel_rgb(pad.right - 1, pad.bottom - 1) == pad_colour


@pytest.mark.display
@pytest.mark.parametrize("xvfb", [FULL_HD, LAPTOP], indirect=True, ids=str, scope="module")
class TestOneScreen:
    def test_the_only_monitor_is_the_whole_screen(self, xvfb: XvfbServer, capture: ScreenCapture) -> None:
        monitors = capture.monitors()
        assert len(monitors) == 1
        assert (monitors[0].index, monitors[0].rect) == (1, Rect(0, 0, xvfb.width, xvfb.height))

    def test_desktop_capture_shows_the_window_where_it_is(
        self, xvfb: XvfbServer, capture: ScreenCapture, target_window: TargetWindow
    ) -> None:
        frame = capture.grab_desktop()
        assert frame.region == Rect(0, 0, xvfb.width, xvfb.height)
        assert frame.pixels.shape == (xvfb.height, xvfb.width, 4)
        assert_shows_the_window(frame, target_window)

    def test_monitor_capture_matches_the_desktop_capture(
        self, capture: ScreenCapture, target_window: TargetWindow
    ) -> None:
        desktop, monitor = capture.grab_desktop(), capture.grab_monitor(1)
        assert monitor.monitor is not None and monitor.region == monitor.monitor.rect
        assert_shows_the_window(monitor, target_window)
        assert monitor.same_pixels(desktop)

    def test_pil_image_has_the_same_pixels(self, capture: ScreenCapture, target_window: TargetWindow) -> None:
        frame = capture.grab_monitor(1)
        image = frame.to_image()
        assert image.size == (frame.width, frame.height)
        pad = target_window.widget_rect("pad")
        assert image.getpixel((pad.left + 3, pad.top + 4)) == tuple(target_window.ready["pad_colour"])

    def test_a_monitor_that_does_not_exist_is_a_capture_error(self, capture: ScreenCapture) -> None:
        with pytest.raises(CaptureError, match="no monitor 2"):
            capture.grab_monitor(2)


@pytest.mark.display
@pytest.mark.parametrize("xvfb", [TWO_MONITORS], indirect=True, ids=str, scope="module")
class TestTwoMonitors:
    def test_both_monitors_are_listed_with_their_geometry(self, capture: ScreenCapture) -> None:
        monitors = capture.monitors()
        assert [(m.index, m.rect) for m in monitors] == [
            (1, Rect(0, 0, 1920, 1080)),
            (2, Rect(1920, 0, 1366, 768)),
        ]

    def test_grab_of_the_second_monitor_covers_exactly_its_region(
        self, capture: ScreenCapture, target_window: TargetWindow
    ) -> None:
        frame = capture.grab_monitor(2)
        assert frame.region == Rect(1920, 0, 1366, 768)
        assert frame.pixels.shape == (768, 1366, 4)
        assert frame.monitor is not None and frame.monitor.index == 2
        # The window sits on the right-hand monitor; its pad shows at monitor-relative pixels.
        pad = target_window.widget_rect("pad")
        assert pad.left >= 1920
        assert_shows_the_window(frame, target_window)
        assert tuple(frame.rgb[pad.top + 5, pad.left - 1920 + 5]) == tuple(target_window.ready["pad_colour"])

    def test_desktop_grab_spans_both_monitors(self, capture: ScreenCapture, target_window: TargetWindow) -> None:
        frame = capture.grab_desktop()
        assert frame.region == Rect(0, 0, 3286, 1080)
        assert_shows_the_window(frame, target_window)
        with pytest.raises(CaptureError):
            frame.pixel_rgb(3286, 0)


def test_identical_compares_bytes_and_shape_contiguous_or_not():
    frame = solid_frame(1920, 1080)
    copy = frame.pixels.copy()
    assert identical(frame.pixels, copy)
    copy[-1, -1, 0] ^= 1  # the very last byte: past every slice but the last
    assert not identical(frame.pixels, copy)
    copy[-1, -1, 0] ^= 1
    copy[0, 0, 3] ^= 1
    assert not identical(frame.pixels, copy)
    assert not identical(frame.pixels, frame.pixels[:-1])
    odd = solid_frame(333, 7).pixels  # a row of 1332 bytes: not whole 64-bit words
    assert identical(odd, odd.copy()) and identical(odd[:, ::2], odd.copy()[:, ::2])
    changed = odd.copy()
    changed[3, 100, 1] += 1
    assert not identical(odd, changed) and not identical(odd[:, ::2], changed[:, ::2])
