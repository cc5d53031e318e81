"""Qt's screens in the terms of automation.coords: each QScreen as a Monitor, and positions both ways.

Qt keeps each screen's top-left where it natively is and divides distances from it by the screen's
device-pixel ratio; described as a `Monitor` with that ratio, a screen converts through
`coords.screen_to_logical` and `coords.logical_to_screen` like any other. The ratio is Qt's own
(QT_SCALE_FACTOR, Xft.dpi, the platform's), so positions agree with what Qt draws.

The engine's screen space is the capture's. Where Qt's screens describe the monitors differently
(a Wayland session: the portal's pixels versus the X screen Qt sees through XWayland, scaled with
fractional scaling), `use_engine_layout` records the capture's monitors (from a frame) and every
conversion here goes through `coords.remap_point` first, so a marker still covers the pixel the
action names. Where they agree (X11; GNOME at scale 1) nothing is remapped.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets
from holodesk.automation.actions import Point
from holodesk.automation.coords import (
    Monitor,
    Rect,
    layouts_match,
    logical_to_screen,
    monitor_at,
    remap_point,
    screen_to_logical,
)
from holodesk.automation.errors import OffScreenError


def screen_monitor(screen: QtGui.QScreen, index: int) -> Monitor:
    """A QScreen as a Monitor in screen space: Qt keeps its top-left native and divides its size."""
    geometry = screen.geometry()
    scale = screen.devicePixelRatio()
    rect = Rect(geometry.x(), geometry.y(), round(geometry.width() * scale), round(geometry.height() * scale))
    return Monitor(index, rect, scale, screen.name(), screen is QtGui.QGuiApplication.primaryScreen())


def whole_native_step(scale: float, most: int = 16) -> int:
    """The fewest logical pixels that span a whole number of native ones at `scale` (4 at 1.25, 2 at
    1.5), so a window placed on a multiple of it from its screen's top-left has no rounded native
    position; 1 where none up to `most` does (the window may then sit half a pixel off)."""
    for step in range(1, most + 1):
        if abs(step * scale - round(step * scale)) < 1e-6:
            return step
    return 1


def qt_monitors() -> list[tuple[QtGui.QScreen, Monitor]]:
    """Every QScreen with its Monitor, in Qt's order."""
    return [(screen, screen_monitor(screen, index)) for index, screen in enumerate(QtGui.QGuiApplication.screens(), 1)]


_engine_layout: tuple[Monitor, ...] = ()  # the capture's monitors, when they differ from Qt's


def use_engine_layout(monitors: Sequence[Monitor]) -> None:
    """The engine's screen space, as its frames describe it (`ScreenFrame.monitors`); GUI thread.

    Only a Wayland session's portal frames can disagree with Qt's screens: elsewhere the capture and
    Qt read the same X screen (or the platform's own space) and nothing is remapped."""
    global _engine_layout
    through_xwayland = bool(os.environ.get("WAYLAND_DISPLAY")) and QtGui.QGuiApplication.platformName() == "xcb"
    qt_layout = [m for _, m in qt_monitors()]
    same = not through_xwayland or not monitors or layouts_match(monitors, qt_layout)
    _engine_layout = () if same else tuple(monitors)


def engine_to_window_system(point: Point) -> Point:
    """A screen-space point as the pixel of Qt's screens that shows it (the same where layouts agree)."""
    if not _engine_layout:
        return point
    return remap_point(point, _engine_layout, [m for _, m in qt_monitors()])


def window_system_to_engine(point: Point) -> Point:
    if not _engine_layout:
        return point
    return remap_point(point, [m for _, m in qt_monitors()], _engine_layout)


def screen_point_to_global_logical(point: Point) -> QtCore.QPointF:
    """The Qt global logical position of a screen pixel's centre (OffScreenError off every screen)."""
    point = engine_to_window_system(point)
    monitor = monitor_at(point, [m for _, m in qt_monitors()])
    x, y = screen_to_logical(point, monitor)
    half = 0.5 / monitor.scale
    return QtCore.QPointF(x + half, y + half)


def global_logical_to_screen(position: QtCore.QPointF) -> Point:
    """The screen pixel under a Qt global logical position (OffScreenError off every screen)."""
    for screen, monitor in qt_monitors():
        geometry = QtCore.QRectF(screen.geometry())
        if geometry.contains(position):
            return window_system_to_engine(logical_to_screen(position.x(), position.y(), monitor))
    raise OffScreenError(f"logical position ({position.x():g}, {position.y():g}) is on no screen")


def global_logical_to_screen_or_none(position: QtCore.QPoint | QtCore.QPointF) -> Point | None:
    try:
        return global_logical_to_screen(QtCore.QPointF(position))
    except OffScreenError:
        return None


def primary_screen_centre() -> Point:
    screen = QtGui.QGuiApplication.primaryScreen()
    return global_logical_to_screen(QtCore.QPointF(screen.geometry().center()))


def widget_screen_rect(widget: QtWidgets.QWidget) -> Rect:
    """A widget's rectangle in screen space (physical pixels), for tests and for placing things."""
    top_left = widget.mapToGlobal(QtCore.QPointF(0, 0))
    bottom_right = widget.mapToGlobal(QtCore.QPointF(widget.width(), widget.height()))
    start = global_logical_to_screen(top_left)
    # The far edge is exclusive: the pixel just inside it is the last one the widget covers.
    end = global_logical_to_screen(bottom_right - QtCore.QPointF(1e-3, 1e-3))
    return Rect(start.x, start.y, end.x - start.x + 1, end.y - start.y + 1)
