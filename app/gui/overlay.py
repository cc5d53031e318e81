"""The on-screen overlay's windows: where a proposed action will land, on every monitor, click-through.

One frameless, always-on-top, translucent window per QScreen shows the action's target: a crosshair
whose centre dot covers exactly the physical pixel the action names, a label with the step number and
the action in words, the path of a drag, the direction of a scroll, the text about to be typed, the
keys about to be pressed (app/overlay_drawing.py paints them, exact at any scale factor).

Click-through: the windows take no input (WindowTransparentForInput, plus X11BypassWindowManagerHint
so a window manager does not frame them and take the clicks). Each window is also masked to what it
draws, so without a compositor (where transparent pixels are black) it still covers nothing else.

Editing the target: an input-transparent window cannot be dragged, so each point of a pointer action
gets a small separate `MarkerHandle` window: a disc over the target that accepts the mouse anywhere,
its centre dot included, so no press on the marker reaches the application below. It paints the
target's dot itself, on the same physical pixel as the overlay's (placed on whole native pixels).
Dragging it moves the point by the physical distance the pointer moved (both ends converted with
`coords.logical_to_screen`), and `OverlayController.target_edited` carries the edited screen-space action.

Keeping the overlay out of the model's screenshot: app/gui/own_windows_capture.py's `grab()` (on the
engine thread) hides the overlay through a blocking call into the GUI thread, waits
for the X server to have unmapped it, grabs until the picture no longer shows it (a compositor
repaints late; capture_hiding.grab_without), and shows it again. A source whose pictures trail the
screen (the Wayland portal's stream, automation.fresh_frames) is told when and where the overlay was
hidden, so it grabs only a picture painted after that.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from holodesk.app.gui.capture_hiding import HiddenWindows, hide_windows
from holodesk.app.gui.focused_area import TypingPlace
from holodesk.app.gui.gui_thread import GuiCallTimeout, GuiThreadCaller
from holodesk.app.gui.overlay_drawing import (
    MARKER,
    OUTLINE,
    RING_RADIUS,
    OverlayScene,
    paint_dot,
    painted_region,
    render_scene,
)
from holodesk.app.gui.qt import Qt, QtCore, QtGui, QtWidgets, Signal
from holodesk.app.gui.qt_screens import (
    engine_to_window_system,
    global_logical_to_screen,
    global_logical_to_screen_or_none,
    primary_screen_centre,
    screen_monitor,
    screen_point_to_global_logical,
    whole_native_step,
)
from holodesk.automation.actions import Action, Point
from holodesk.automation.errors import CaptureError, OffScreenError

# The handle window is a disc this wide around the target, with no hole: a hole the size of the
# centre dot let a press on the dot (where the panel says to grab it) click the application below.
HANDLE_RADIUS = 21
# After the unmap, without a compositor: time for the apps below to repaint what the overlay covered.
# (What still shows the overlay itself is checked, not guessed: capture_hiding.grab_without.)
CAPTURE_SETTLE_S = 0.06

OVERLAY_FLAGS = (
    Qt.WindowType.FramelessWindowHint
    | Qt.WindowType.WindowStaysOnTopHint
    | Qt.WindowType.Tool
    | Qt.WindowType.WindowTransparentForInput
    | Qt.WindowType.WindowDoesNotAcceptFocus
    | Qt.WindowType.X11BypassWindowManagerHint
    | Qt.WindowType.NoDropShadowWindowHint
)
HANDLE_FLAGS = (
    Qt.WindowType.FramelessWindowHint
    | Qt.WindowType.WindowStaysOnTopHint
    | Qt.WindowType.Tool
    | Qt.WindowType.WindowDoesNotAcceptFocus
    | Qt.WindowType.X11BypassWindowManagerHint
    | Qt.WindowType.NoDropShadowWindowHint
)


# -- windows ------------------------------------------------------------------------------------


class OverlayWindow(QtWidgets.QWidget):
    """The click-through window covering one QScreen."""

    def __init__(self, screen: QtGui.QScreen) -> None:
        super().__init__(None, OVERLAY_FLAGS)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setWindowTitle("Holodesk overlay")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.qscreen = screen
        self._image: QtGui.QImage | None = None

    def set_scene(self, scene: OverlayScene | None, index: int) -> bool:
        """Draw `scene`; True when anything of it falls on this screen (the caller shows the window)."""
        screen = self.qscreen
        geometry = screen.geometry()
        self.setScreen(screen)
        self.setGeometry(geometry)
        if scene is None:
            self._image = None
            return False
        monitor = screen_monitor(screen, index)
        device_size = QtCore.QSize(monitor.rect.width, monitor.rect.height)
        image = render_scene(scene, monitor, geometry.topLeft(), device_size)
        region = painted_region(image, geometry.size())
        if region.isEmpty():
            self._image = None
            return False
        self._image = image
        self.setMask(region)
        self.update()
        return True

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:
        painter = QtGui.QPainter(self)
        painter.setCompositionMode(QtGui.QPainter.CompositionMode.CompositionMode_Source)
        painter.fillRect(event.rect(), Qt.GlobalColor.transparent)
        if self._image is not None:
            # The image carries the screen's ratio, so this copies device pixels one to one.
            painter.drawImage(QtCore.QPoint(0, 0), self._image)
        painter.end()


class MarkerHandle(QtWidgets.QWidget):
    """A small disc window over one target that accepts the mouse: drag it to move the target.

    It covers the overlay's centre dot, so it paints the dot itself on the target's physical pixel:
    the window sits on whole native pixels (`whole_native_step`), so the target's pixel in the window
    is exact at any scale factor. Near a screen's edge the window is kept inside the screen (a window
    straddling two screens is scaled by the wrong one) and the ring drawn off its centre.
    """

    dropped = Signal(int, object)  # point index, new screen-space Point

    def __init__(self, index: int) -> None:
        super().__init__(None, HANDLE_FLAGS)
        self.index = index
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setWindowTitle("Holodesk target handle")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self.setToolTip("Drag to move the target")
        self.setFixedSize(2 * HANDLE_RADIUS, 2 * HANDLE_RADIUS)
        self.point = Point(0, 0)
        self._centre = QtCore.QPointF(HANDLE_RADIUS, HANDLE_RADIUS)  # the target, in this window
        self._dot: QtGui.QImage | None = None  # the target's dot in this window's device pixels
        self._press: QtCore.QPointF | None = None
        self._start_position = QtCore.QPoint()

    def place(self, point: Point) -> None:
        """Put the disc over a screen pixel."""
        self.point = point
        centre = screen_point_to_global_logical(point)
        screen = QtGui.QGuiApplication.screenAt(centre.toPoint()) or QtGui.QGuiApplication.primaryScreen()
        area = screen.geometry()
        scale = screen.devicePixelRatio()
        step = whole_native_step(scale)

        def snapped(wanted: float, low: int, high: int) -> int:
            """A logical position near `wanted` on the native grid, kept within [low, high]."""
            offset = step * round((wanted - low) / step)
            return low + max(0, min(offset, step * ((high - low) // step)))

        left = snapped(centre.x() - HANDLE_RADIUS, area.left(), area.right() + 1 - self.width())
        top = snapped(centre.y() - HANDLE_RADIUS, area.top(), area.bottom() + 1 - self.height())
        self._centre = centre - QtCore.QPointF(left, top)
        # Qt keeps a screen's top-left native (qt_screens.screen_monitor): the window's native
        # top-left is that plus its whole-pixel logical offset times the scale.
        native = engine_to_window_system(point)
        self._dot = _dot_image(
            self.size(),
            scale,
            native.x - area.left() - round((left - area.left()) * scale),
            native.y - area.top() - round((top - area.top()) * scale),
        )
        self.setScreen(screen)
        self.move(left, top)
        self.setMask(self._disc())
        self.update()

    def _disc(self) -> QtGui.QRegion:
        x, y = round(self._centre.x()), round(self._centre.y())
        ellipse = QtGui.QRegion.RegionType.Ellipse
        return QtGui.QRegion(x - HANDLE_RADIUS, y - HANDLE_RADIUS, 2 * HANDLE_RADIUS, 2 * HANDLE_RADIUS, ellipse)

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:
        painter = QtGui.QPainter(self)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        painter.setCompositionMode(QtGui.QPainter.CompositionMode.CompositionMode_Source)
        painter.fillRect(self.rect(), Qt.GlobalColor.transparent)
        painter.setCompositionMode(QtGui.QPainter.CompositionMode.CompositionMode_SourceOver)
        centre = self._centre
        # A faint disc shows where it can be grabbed; the marker ring on top.
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QtGui.QColor(255, 255, 255, 70))
        painter.drawEllipse(centre, HANDLE_RADIUS - 1, HANDLE_RADIUS - 1)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QtGui.QPen(OUTLINE, 4))
        painter.drawEllipse(centre, RING_RADIUS, RING_RADIUS)
        painter.setPen(QtGui.QPen(MARKER, 2))
        painter.drawEllipse(centre, RING_RADIUS, RING_RADIUS)
        if self._dot is not None:  # device pixels, copied one to one (as the overlay's window draws its image)
            painter.drawImage(QtCore.QPoint(0, 0), self._dot)
        painter.end()

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        self._press = event.globalPosition()
        self._start_position = self.pos()
        self.setCursor(Qt.CursorShape.ClosedHandCursor)

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:
        if self._press is None:
            return
        delta = event.globalPosition() - self._press
        self.move(self._start_position + delta.toPoint())

    def mouseReleaseEvent(self, event: QtGui.QMouseEvent) -> None:
        if self._press is None or event.button() != Qt.MouseButton.LeftButton:
            return
        press, self._press = self._press, None
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        try:
            # Both ends through coords: the move is exact in physical pixels, whatever the ratio.
            start = global_logical_to_screen(press)
            end = global_logical_to_screen(event.globalPosition())
            target = Point(self.point.x + end.x - start.x, self.point.y + end.y - start.y)
            screen_point_to_global_logical(target)  # dropped between monitors: an OffScreenError
        except OffScreenError:
            target = self.point
        self.dropped.emit(self.index, target)


def _dot_image(size: QtCore.QSize, scale: float, x: int, y: int) -> QtGui.QImage:
    """A window's worth of transparent device pixels with the centre dot on device pixel (x, y)."""
    width, height = math.ceil(size.width() * scale), math.ceil(size.height() * scale)
    image = QtGui.QImage(width, height, QtGui.QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QtGui.QPainter(image)
    paint_dot(painter, x, y, scale)
    painter.end()
    image.setDevicePixelRatio(scale)
    return image


# -- the controller -----------------------------------------------------------------------------


def replace_point(action: Action, index: int, point: Point) -> Action:
    """`action` with its `index`-th point (in `Action.points()` order) replaced."""
    names = [f.name for f in dataclasses.fields(action) if isinstance(getattr(action, f.name), Point)]
    return dataclasses.replace(action, **{names[index]: point})


class OverlayController(QtCore.QObject):
    """Owns the overlay windows and handles. Use it on the GUI thread, except `hidden_for_capture`.

    Signals:
      target_edited(Action): the user dragged a marker; the edited action, screen space.
    """

    target_edited = Signal(object)

    def __init__(self, parent: QtCore.QObject | None = None, capture_settle_s: float = CAPTURE_SETTLE_S) -> None:
        super().__init__(parent)
        self.capture_settle_s = capture_settle_s
        self._gui = GuiThreadCaller(self)
        self._windows: list[OverlayWindow] = []
        self._handles: list[MarkerHandle] = []
        self._scene: OverlayScene | None = None
        self._capture_lock = threading.Lock()  # one hide-grab-show at a time
        self._showing = False  # read from other threads: a plain bool is atomic enough

    # -- GUI thread --

    @property
    def action(self) -> Action | None:
        """The action shown now (edited, if the user moved its target)."""
        return self._scene.action if self._scene is not None else None

    @property
    def showing(self) -> bool:
        return self._showing

    def show_proposal(
        self, step: int, action: Action, *, editable: bool = True, typing_place: TypingPlace | None = None
    ) -> None:
        """Show `action` (screen space) for step `step`; with `editable`, its targets can be dragged.
        `typing_place`: where the keys of a step without a target point go (the label goes beside the
        caret's line, or the window's bottom rows, not on them); None where unknown."""
        points = action.points()
        pointer = global_logical_to_screen_or_none(QtGui.QCursor.pos())
        if pointer is None:  # the pointer sits between monitors: anchor hints on the target instead
            pointer = points[0] if points else primary_screen_centre()
        self._scene = OverlayScene(
            step, action, pointer, rings_by_handles=editable and bool(points), typing_place=typing_place
        )
        self._render()

    def drawn_rects(self) -> list[QtCore.QRect]:
        """What the overlay windows draw now (label, bubble, marker), one bounding rectangle per window,
        in Qt's global logical coordinates: for the approval panel to keep clear of."""
        return [
            window.mask().boundingRect().translated(window.geometry().topLeft())
            for window in self._windows
            if window.isVisible() and not window.mask().isEmpty()
        ]

    def clear(self) -> None:
        """Hide everything; the next `show_proposal` starts afresh."""
        self._scene = None
        for window in self._windows:
            window.set_scene(None, 0)
            window.hide()
        for handle in self._handles:
            handle.hide()
        self._showing = False

    def windows(self) -> list[QtWidgets.QWidget]:
        """The overlay and handle windows that are shown now."""
        shown: list[QtWidgets.QWidget] = [w for w in self._windows if w.isVisible()]
        return shown + [h for h in self._handles if h.isVisible()]

    def _render(self) -> None:
        scene = self._scene
        if scene is None:
            self.clear()
            return
        self._sync_windows()
        for index, window in enumerate(self._windows, 1):
            if window.set_scene(scene, index):
                window.show()
                window.raise_()
            else:
                window.hide()
        self._place_handles(scene.action.points() if scene.rings_by_handles else ())
        self._showing = True

    def _sync_windows(self) -> None:
        """One window per current screen, in Qt's order (screens come and go with docks and projectors)."""
        existing = {id(window.qscreen): window for window in self._windows}
        screens = QtGui.QGuiApplication.screens()
        kept = [existing.pop(id(screen)) if id(screen) in existing else OverlayWindow(screen) for screen in screens]
        for window in existing.values():  # their screens are gone
            window.hide()
            window.deleteLater()
        self._windows = kept

    def _place_handles(self, points: Sequence[Point]) -> None:
        while len(self._handles) < len(points):
            handle = MarkerHandle(len(self._handles))
            handle.dropped.connect(self._on_handle_dropped)
            self._handles.append(handle)
        for index, handle in enumerate(self._handles):
            if index < len(points):
                handle.place(points[index])
                handle.show()
                handle.raise_()
            else:
                handle.hide()

    def _on_handle_dropped(self, index: int, point: Point) -> None:
        scene = self._scene
        if scene is None:
            return
        edited = replace_point(scene.action, index, point)
        if edited == scene.action:
            self._handles[index].place(point)  # snap back to where it was
            return
        self._scene = dataclasses.replace(scene, action=edited)
        self._render()
        self.target_edited.emit(edited)

    def hide_for_capture(self) -> HiddenWindows:
        """Hide what is shown, make sure the X server has unmapped it; returns what to show again."""
        return hide_windows(self.windows())

    def restore_after_capture(self, hidden: Sequence[QtWidgets.QWidget]) -> None:
        if self._scene is None:
            return  # cleared meanwhile: nothing to bring back
        for window in hidden:
            window.show()
            window.raise_()

    # -- any thread --

    @contextmanager
    def hidden_for_capture(self, timeout_s: float = 2.0) -> Iterator[HiddenWindows]:
        """Keep the overlay off the screen for the block; call from the engine (or any) thread.

        Yields what was hidden, where and when, for a source that must grab a later picture."""
        if not self._showing:
            yield HiddenWindows()
            return
        with self._capture_lock:
            try:
                hidden = self._gui.call(self.hide_for_capture, timeout_s)
            except GuiCallTimeout as exc:
                raise CaptureError(f"could not hide the overlay before the screenshot: {exc}") from exc
            try:
                if hidden.windows:
                    time.sleep(self.capture_settle_s)
                yield hidden
            finally:
                if hidden.windows:
                    self._gui.post(lambda: self.restore_after_capture(hidden.windows))
