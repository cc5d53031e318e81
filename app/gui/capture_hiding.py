"""Hiding Holodesk's own windows before a screenshot, in a way every frame source can honour.

`hide_windows` hides top-level windows on the GUI thread and waits for the window system to have
unmapped them (a round trip); it returns `HiddenWindows`: what was hidden, where (screen space), when,
and a trace of each (a few of its opaque pixels, rendered just before the hide: `window_trace`).

An unmapped window can still be on the screen for a while: a compositor (xcompmgr, picom, mutter)
repaints the area when it gets to it, and without one the windows below must repaint what the hidden
one covered. `grab_without` is the grab that honours the hide: a source whose pictures trail the
screen (the Wayland portal's stream, automation.fresh_frames) is told when and where (`tell_source_about`)
and picks a later picture itself; an X11 grab, which reads the screen as it is now, is repeated until
the picture no longer shows the traced windows, bounded (a stalled compositor is a CaptureError).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets
from holodesk.app.gui.qt_screens import global_logical_to_screen_or_none, screen_monitor, widget_screen_rect
from holodesk.automation.coords import Rect
from holodesk.automation.engine_protocols import FrameSource
from holodesk.automation.errors import CaptureError, OffScreenError
from holodesk.automation.fresh_frames import (
    FreshFrameSource,
    PixelSample,
    WindowTrace,
    drop_covered_samples,
    pick_samples,
    windows_still_shown,
)
from holodesk.automation.screen import ScreenFrame

# How long hidden windows may still show in grabs before the grab gives up: a compositor repaints in
# a frame or two; one that takes seconds has stalled, and a screenshot showing them must not be used.
GONE_TIMEOUT_S = 5.0
GONE_POLL_S = 0.01


@dataclass(frozen=True)
class HiddenWindows:
    """Windows hidden for a grab, where they were, when the window system had them gone, their traces."""

    windows: list[QtWidgets.QWidget] = field(default_factory=list)
    areas: list[Rect] = field(default_factory=list)
    moment: float = 0.0  # time.monotonic()
    traces: list[WindowTrace] = field(default_factory=list)

    def joined(self, other: HiddenWindows) -> HiddenWindows:
        """Both hides as one: a grab must wait for the later of the two and show neither."""
        return HiddenWindows(
            self.windows + other.windows,
            self.areas + other.areas,
            max(self.moment, other.moment),
            self.traces + other.traces,
        )


def window_area(window: QtWidgets.QWidget) -> Rect:
    """Where a window covers the screen (screen space); its whole screen when it straddles an edge."""
    try:
        return widget_screen_rect(window)
    except OffScreenError:
        screen = window.screen() or QtGui.QGuiApplication.primaryScreen()
        index = QtGui.QGuiApplication.screens().index(screen) + 1
        return screen_monitor(screen, index).rect


def window_trace(window: QtWidgets.QWidget, area: Rect) -> WindowTrace:
    """A few of a shown window's opaque pixels in screen space, as the window draws them now (GUI thread).

    Only the part its mask lets through is rendered (an overlay window is masked to what it draws)."""
    mask = window.mask()
    rect = mask.boundingRect() if not mask.isEmpty() else window.rect()
    image = window.grab(rect).toImage().convertToFormat(QtGui.QImage.Format.Format_RGBA8888)
    ratio = image.devicePixelRatio()
    height, width = image.height(), image.width()
    rows = np.frombuffer(image.constBits(), dtype=np.uint8).reshape(height, image.bytesPerLine())
    rgba = rows[:, : width * 4].reshape(height, width, 4).copy()
    if not mask.isEmpty():
        shown = np.zeros((height, width), dtype=bool)
        # PySide6's QRegion iterates over its rectangles (logical); its stubs do not say so.
        for part in cast("Iterable[QtCore.QRect]", mask):
            top, left = (part.y() - rect.y()) * ratio, (part.x() - rect.x()) * ratio
            bottom, right = top + part.height() * ratio, left + part.width() * ratio
            shown[int(np.ceil(top)) : int(bottom), int(np.ceil(left)) : int(right)] = True
        rgba[~shown, 3] = 0
    samples = []
    for picked in pick_samples(rgba):
        centre = QtCore.QPointF(rect.x() + (picked.at.x + 0.5) / ratio, rect.y() + (picked.at.y + 0.5) / ratio)
        point = global_logical_to_screen_or_none(window.mapToGlobal(centre))
        if point is not None:
            samples.append(PixelSample(point, picked.colour))
    return WindowTrace(window.windowTitle() or type(window).__name__, area, tuple(samples))


def hide_windows(windows: Sequence[QtWidgets.QWidget], traced: bool = True) -> HiddenWindows:
    """Hide the shown ones among `windows` and wait until the window system has unmapped them (GUI thread).

    `traced`: sample their pixels first, so that a grab can tell a picture that still shows them
    (`grab_without`); without traces a grab cannot wait for the screen to be repainted."""
    shown = [window for window in windows if window.isVisible()]
    if not shown:
        return HiddenWindows()
    areas = [window_area(window) for window in shown]
    traces = (
        drop_covered_samples([window_trace(window, area) for window, area in zip(shown, areas, strict=True)])
        if traced
        else []
    )
    for window in shown:
        window.hide()
    QtGui.QGuiApplication.sync()  # a round trip: the unmaps have reached the window system
    return HiddenWindows(shown, areas, time.monotonic(), traces)


def tell_source_about(source: object, hidden: HiddenWindows) -> None:
    """Make a source whose pictures trail the screen grab only a picture painted after the hide."""
    if hidden.areas and isinstance(source, FreshFrameSource):
        source.require_frame_after(hidden.moment, hidden.areas, hidden.traces)


def grab_without(
    source: FrameSource, monitor: int | None, hidden: HiddenWindows, timeout_s: float = GONE_TIMEOUT_S
) -> ScreenFrame:
    """A grab of `monitor` from `source` that does not show the `hidden` windows (see the module docstring).

    Any thread. A CaptureError when they still show `timeout_s` after the hide, naming them."""
    if isinstance(source, FreshFrameSource) or not hidden.traces:
        tell_source_about(source, hidden)
        return source.grab(monitor)
    deadline = hidden.moment + timeout_s
    while True:
        frame = source.grab(monitor)
        shown = windows_still_shown(frame.pixels, frame.region, hidden.traces)
        if not shown:
            return frame
        if time.monotonic() >= deadline:
            names = ", ".join(sorted({trace.window for trace in shown}))
            raise CaptureError(
                f"{names} still showed on the screen {timeout_s:g} s after being hidden for the screenshot"
                " (the compositor did not repaint): no screenshot was taken with it in"
            )
        time.sleep(GONE_POLL_S)
