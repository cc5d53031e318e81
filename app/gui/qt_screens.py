"""Qt's screens in the terms of automation.coords: each QScreen as a Monitor, and positions both ways.

Qt keeps each screen's top-left where it natively is and divides distances from it by the screen's
device-pixel ratio; described as a `Monitor` with that ratio, a screen converts through
`coords.screen_to_logical` and `coords.logical_to_screen` like any other. The ratio is Qt's own
(QT_SCALE_FACTOR, Xft.dpi, the platform's), so positions agree with what Qt draws.
"""

from __future__ import annotations

from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets
from holodesk.automation.actions import Point
from holodesk.automation.coords import Monitor, Rect, logical_to_screen, monitor_at, screen_to_logical
from holodesk.automation.errors import OffScreenError


def screen_monitor(screen: QtGui.QScreen, index: int) -> Monitor:
    """A QScreen as a Monitor in screen space: Qt keeps its top-left native and divides its size."""
    geometry = screen.geometry()
    scale = screen.devicePixelRatio()
    rect = Rect(geometry.x(), geometry.y(), round(geometry.width() * scale), round(geometry.height() * scale))
    return Monitor(index, rect, scale, screen.name(), screen is QtGui.QGuiApplication.primaryScreen())


def qt_monitors() -> list[tuple[QtGui.QScreen, Monitor]]:
    """Every QScreen with its Monitor, in Qt's order."""
    return [(screen, screen_monitor(screen, index)) for index, screen in enumerate(QtGui.QGuiApplication.screens(), 1)]


def screen_point_to_global_logical(point: Point) -> QtCore.QPointF:
    """The Qt global logical position of a screen pixel's centre (OffScreenError off every screen)."""
    monitor = monitor_at(point, [m for _, m in qt_monitors()])
    x, y = screen_to_logical(point, monitor)
    half = 0.5 / monitor.scale
    return QtCore.QPointF(x + half, y + half)


def global_logical_to_screen(position: QtCore.QPointF) -> Point:
    """The screen pixel under a Qt global logical position (OffScreenError off every screen)."""
    for screen, monitor in qt_monitors():
        geometry = QtCore.QRectF(screen.geometry())
        if geometry.contains(position):
            return logical_to_screen(position.x(), position.y(), monitor)
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
