"""A hidden window's trace: its own opaque pixels, rendered before the hide, at the screen pixels that show them.

Qt runs offscreen here (tests/conftest.py): its windows are real widgets with real geometry and
rendering; that the samples match a compositor's picture is checked end to end by
tests/app/gui/test_overlay_on_wayland.py.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from holodesk.app.gui.capture_hiding import grab_without, hide_windows, window_area, window_trace
from holodesk.app.gui.qt import Qt, QtGui, QtWidgets
from holodesk.automation.coords import Rect
from holodesk.automation.errors import CaptureError
from holodesk.automation.fresh_frames import SAMPLES_PER_WINDOW, windows_still_shown
from holodesk.automation.screen import ScreenFrame

BACKGROUND = (30, 200, 60)
PATCH = (255, 0, 170)


class Painted(QtWidgets.QWidget):
    """A frameless window: a solid background with a patch of another colour at (40, 10), 30x20."""

    def __init__(self) -> None:
        super().__init__(None, Qt.WindowType.FramelessWindowHint)
        self.setGeometry(120, 90, 100, 60)

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:
        painter = QtGui.QPainter(self)
        painter.fillRect(self.rect(), QtGui.QColor(*BACKGROUND))
        painter.fillRect(40, 10, 30, 20, QtGui.QColor(*PATCH))
        painter.end()


def test_a_windows_samples_are_its_own_pixels_in_screen_space(qtbot) -> None:
    window = Painted()
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    area = window_area(window)
    assert area == Rect(120, 90, 100, 60)
    trace = window_trace(window, area)
    assert len(trace.samples) == SAMPLES_PER_WINDOW
    assert {sample.colour for sample in trace.samples} == {BACKGROUND, PATCH}  # spread over both colours
    for sample in trace.samples:
        x, y = sample.at.x - area.left, sample.at.y - area.top
        assert area.contains(sample.at)
        inside_patch = 40 <= x < 70 and 10 <= y < 30
        assert sample.colour == (PATCH if inside_patch else BACKGROUND), (sample, x, y)


def test_a_masked_window_is_sampled_only_where_its_mask_shows_it(qtbot) -> None:
    window = Painted()
    qtbot.addWidget(window)
    window.setMask(QtGui.QRegion(40, 10, 30, 20))  # only the patch shows
    window.show()
    qtbot.waitExposed(window)
    trace = window_trace(window, window_area(window))
    assert trace.samples and {sample.colour for sample in trace.samples} == {PATCH}
    assert all(Rect(160, 100, 30, 20).contains(sample.at) for sample in trace.samples)


def test_hiding_hides_and_leaves_traces_a_picture_of_the_window_matches(qtbot) -> None:
    window = Painted()
    window.setWindowTitle("Holodesk thinking status")
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    shown = window.grab().toImage().convertToFormat(QtGui.QImage.Format.Format_RGB888)
    hidden = hide_windows([window], traced=True)
    assert not window.isVisible() and hidden.windows == [window]
    [trace] = hidden.traces
    assert trace.window == "Holodesk thinking status" and trace.area == hidden.areas[0]
    # A picture of the screen still showing it (its own rendering, at its place) is recognised...
    region = Rect(0, 0, 400, 300)
    picture = np.zeros((region.height, region.width, 4), dtype=np.uint8)
    rgb = np.frombuffer(shown.constBits(), dtype=np.uint8).reshape(shown.height(), shown.bytesPerLine())
    rgb = rgb[:, : shown.width() * 3].reshape(shown.height(), shown.width(), 3)
    picture[90:150, 120:220, :3] = rgb[..., ::-1]
    assert windows_still_shown(picture, region, hidden.traces) == [trace]
    # ... and one without it is not.
    picture[90:150, 120:220, :3] = 0
    assert windows_still_shown(picture, region, hidden.traces) == []
    assert hide_windows([window], traced=True).traces == []  # nothing shown: nothing hidden, nothing traced


def test_outside_a_wayland_session_hiding_traces_the_window_too(qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # An X11 compositor repaints after the unmap, as a Wayland one does: the grab needs the trace to wait.
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("XDG_SESSION_TYPE", "x11")
    monkeypatch.setenv("DISPLAY", ":99")
    window = Painted()
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    hidden = hide_windows([window])
    assert hidden.windows == [window] and len(hidden.traces) == 1 and hidden.traces[0].samples


class LateScreen:
    """A FrameSource whose first `stale` pictures still show a window (as a compositor that has not
    repainted yet would give them), then pictures without it."""

    def __init__(self, with_window: np.ndarray, stale: int) -> None:
        self.with_window = with_window
        self.stale = stale
        self.grabs = 0

    def grab(self, monitor: int | None) -> ScreenFrame:
        self.grabs += 1
        pixels = self.with_window.copy() if self.grabs <= self.stale else np.zeros_like(self.with_window)
        region = Rect(0, 0, pixels.shape[1], pixels.shape[0])
        return ScreenFrame(pixels, region, None, (), time.monotonic())


def screen_showing(window: QtWidgets.QWidget) -> np.ndarray:
    """A 400x300 BGRA picture of the screen with `window`'s own rendering at its place."""
    shown = window.grab().toImage().convertToFormat(QtGui.QImage.Format.Format_RGB888)
    rgb = np.frombuffer(shown.constBits(), dtype=np.uint8).reshape(shown.height(), shown.bytesPerLine())
    rgb = rgb[:, : shown.width() * 3].reshape(shown.height(), shown.width(), 3)
    picture = np.zeros((300, 400, 4), dtype=np.uint8)
    picture[90:150, 120:220, :3] = rgb[..., ::-1]
    return picture


def test_a_grab_after_hiding_waits_for_a_picture_without_the_window(qtbot) -> None:  # type: ignore[no-untyped-def]
    window = Painted()
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    source = LateScreen(screen_showing(window), stale=3)
    frame = grab_without(source, None, hide_windows([window]))
    assert source.grabs == 4  # three pictures still showed it
    assert not frame.pixels.any()


def test_a_window_that_stays_on_the_screen_fails_the_grab_in_words(qtbot) -> None:  # type: ignore[no-untyped-def]
    window = Painted()
    window.setWindowTitle("Holodesk overlay")
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    source = LateScreen(screen_showing(window), stale=10**9)
    hidden = hide_windows([window])
    with pytest.raises(CaptureError, match=r"Holodesk overlay still showed on the screen 0\.3 s after"):
        grab_without(source, None, hidden, timeout_s=0.3)
    assert time.monotonic() - hidden.moment >= 0.3 and source.grabs > 1
