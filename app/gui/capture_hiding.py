"""Hiding Holodesk's own windows before a screenshot, in a way every frame source can honour.

`hide_windows` hides top-level windows on the GUI thread and waits for the window system to have
unmapped them (a round trip); it returns `HiddenWindows`: what was hidden, where (screen space) and
when. `tell_source_about` passes that on to a source whose pictures trail the screen (the Wayland
portal's stream, automation.fresh_frames), so its next grab uses only a picture painted after.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from holodesk.app.gui.qt import QtGui, QtWidgets
from holodesk.app.gui.qt_screens import screen_monitor, widget_screen_rect
from holodesk.automation.coords import Rect
from holodesk.automation.errors import OffScreenError
from holodesk.automation.fresh_frames import FreshFrameSource


@dataclass(frozen=True)
class HiddenWindows:
    """Windows hidden for a grab, where they were and when the window system had them gone."""

    windows: list[QtWidgets.QWidget] = field(default_factory=list)
    areas: list[Rect] = field(default_factory=list)
    moment: float = 0.0  # time.monotonic()


def window_area(window: QtWidgets.QWidget) -> Rect:
    """Where a window covers the screen (screen space); its whole screen when it straddles an edge."""
    try:
        return widget_screen_rect(window)
    except OffScreenError:
        screen = window.screen() or QtGui.QGuiApplication.primaryScreen()
        index = QtGui.QGuiApplication.screens().index(screen) + 1
        return screen_monitor(screen, index).rect


def hide_windows(windows: Sequence[QtWidgets.QWidget]) -> HiddenWindows:
    """Hide the shown ones among `windows` and wait until the window system has unmapped them (GUI thread)."""
    shown = [window for window in windows if window.isVisible()]
    if not shown:
        return HiddenWindows()
    areas = [window_area(window) for window in shown]
    for window in shown:
        window.hide()
    QtGui.QGuiApplication.sync()  # a round trip: the unmaps have reached the window system
    return HiddenWindows(shown, areas, time.monotonic())


def tell_source_about(source: object, hidden: HiddenWindows) -> None:
    """Make a source whose pictures trail the screen grab only a picture painted after the hide."""
    if hidden.areas and isinstance(source, FreshFrameSource):
        source.require_frame_after(hidden.moment, hidden.areas)
