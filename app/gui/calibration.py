"""`holodesk doctor --calibrate`: click known points on every monitor as a run would, and read where they land.

On each monitor Holodesk shows a window of its own and, for a few known screen points inside it,
does what a run does with a target: the point as a model would give it on that monitor's screenshot
(image pixels of the full-size frame, so nothing is lost to rounding), mapped back to the screen by
`automation.coords.action_to_screen`, clicked by the real `InputPerformer`. The window reads where each
press arrived (Qt's position, converted to screen pixels by `qt_screens`), and the report gives the
offset per monitor; exact is green. An offset means the mapping, the input injection and the
window system disagree about where pixels are: clicks of a real run would miss by as much.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from holodesk.app.gui.qt import Qt, QtCore, QtGui, QtWidgets
from holodesk.app.gui.qt_screens import (
    global_logical_to_screen_or_none,
    qt_monitors,
    screen_point_to_global_logical,
)
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import FrameMapping, ImagePixelSpace, Monitor, Rect, action_to_screen
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.screen import ScreenCapture

WINDOW_SIZE = (360, 240)  # physical pixels (at most half the monitor)
INSET = 30  # known points sit this far inside the window's corners
PRESS_TIMEOUT_S = 3.0
GREEN, RED, RESET = "\x1b[32m", "\x1b[31m", "\x1b[0m"


class CalibrationWindow(QtWidgets.QWidget):
    """A plain window that remembers where each mouse press landed, in screen pixels."""

    def __init__(self) -> None:
        flags = (
            Qt.WindowType.FramelessWindowHint
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.X11BypassWindowManagerHint  # exactly where asked, no frame to click
        )
        super().__init__(None, flags)
        self.setStyleSheet("background: #2d6cdf;")
        self.presses: list[Point | None] = []

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:
        self.presses.append(global_logical_to_screen_or_none(event.globalPosition()))


@dataclass(frozen=True, slots=True)
class MonitorReport:
    monitor: Monitor
    offsets: list[tuple[int, int] | None]  # None: the click never reached the window
    qt_scale: float = 1.0  # the device-pixel ratio Qt uses on this monitor

    @property
    def exact(self) -> bool:
        return all(offset == (0, 0) for offset in self.offsets)

    def line(self, colour: bool) -> str:
        rect = self.monitor.rect
        size = f"{rect.width}x{rect.height} at {rect.left},{rect.top}"
        where = f"monitor {self.monitor.index} ({size}, scale {self.monitor.scale:g}, Qt {self.qt_scale:g})"
        missed = sum(offset is None for offset in self.offsets)
        landed = [offset for offset in self.offsets if offset is not None]
        worst = max((max(abs(dx), abs(dy)) for dx, dy in landed), default=0)
        if self.exact:
            verdict = "exact"
        elif missed:
            verdict = f"{missed} of {len(self.offsets)} clicks missed the window"
        else:
            verdict = f"off by up to {worst} px: " + ", ".join(f"({dx:+d},{dy:+d})" for dx, dy in landed)
        text = f"{'OK  ' if self.exact else 'FAIL'} {where}: {len(self.offsets)} clicks, {verdict}"
        if colour:
            return f"{GREEN if self.exact else RED}{text}{RESET}"
        return text


def known_points(region: Rect) -> list[Point]:
    """The centre and four points inset from the corners of `region`."""
    left, top = region.left + INSET, region.top + INSET
    right, bottom = region.right - 1 - INSET, region.bottom - 1 - INSET
    centre = Point(region.left + region.width // 2, region.top + region.height // 2)
    return [centre, Point(left, top), Point(right, top), Point(left, bottom), Point(right, bottom)]


def _wait(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        QtWidgets.QApplication.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 20)
        if condition():
            return True
        time.sleep(0.005)
    return condition()


def calibrate_monitor(monitor: Monitor, capture: ScreenCapture, performer: InputPerformer) -> MonitorReport:
    rect = monitor.rect
    width, height = min(WINDOW_SIZE[0], rect.width // 2), min(WINDOW_SIZE[1], rect.height // 2)
    region = Rect(rect.left + (rect.width - width) // 2, rect.top + (rect.height - height) // 2, width, height)
    # Qt may scale this monitor otherwise than the capture says (QT_SCREEN_SCALE_FACTORS): size by Qt's.
    qt_scale = next((m.scale for _, m in qt_monitors() if m.rect.left == rect.left and m.rect.top == rect.top), 1.0)
    window = CalibrationWindow()
    top_left = screen_point_to_global_logical(Point(region.left, region.top))
    window.move(QtCore.QPoint(round(top_left.x() - 0.5 / qt_scale), round(top_left.y() - 0.5 / qt_scale)))
    window.resize(round(width / qt_scale), round(height / qt_scale))
    window.show()
    _wait(lambda: window.isVisible() and window.windowHandle() is not None and window.windowHandle().isExposed(), 3.0)
    QtGui.QGuiApplication.sync()
    try:
        frame = capture.grab(monitor.index)
        mapping = FrameMapping(frame.region, frame.width, frame.height)
        offsets: list[tuple[int, int] | None] = []
        for known in known_points(region):
            # What a run does with a target: model space (full-size image pixels) -> screen -> click.
            model = mapping.screen_to_model(known, ImagePixelSpace())
            action = action_to_screen(Click(model), ImagePixelSpace(), mapping, frame.monitors)
            before = len(window.presses)
            performer.execute(action)

            def pressed(count: int = before) -> bool:
                return len(window.presses) > count

            if not _wait(pressed, PRESS_TIMEOUT_S):
                offsets.append(None)
                continue
            landed = window.presses[-1]
            offsets.append(None if landed is None else (landed.x - known.x, landed.y - known.y))
            time.sleep(0.3)  # two clicks close together would make a double click
        return MonitorReport(monitor, offsets, qt_scale)
    finally:
        window.close()
        window.deleteLater()


def run_calibration(out: TextIO = sys.stdout, colour: bool | None = None) -> int:
    """Calibrate every monitor; print one line each. 0 when every click landed exactly, 1 otherwise."""
    colour = out.isatty() if colour is None else colour
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    capture = ScreenCapture()
    performer = InputPerformer(X11Input(capture=capture))
    reports = []
    try:
        monitors = capture.monitors()
        out.write(f"holodesk doctor --calibrate: {len(monitors)} monitor(s)\n")
        for monitor in monitors:
            report = calibrate_monitor(monitor, capture, performer)
            reports.append(report)
            out.write(report.line(colour) + "\n")
            out.flush()
    finally:
        capture.close()
    del app
    exact = all(report.exact for report in reports)
    out.write("calibration exact: clicks land where the model points\n" if exact else "calibration OFF: see above\n")
    return 0 if exact else 1
