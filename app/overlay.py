"""The on-screen overlay: shows where a proposed action will land, on every monitor, click-through.

One frameless, always-on-top, translucent window per QScreen draws the action's target: a crosshair
whose centre dot covers exactly the physical pixel the action names, a label with the step number and
the action in words, the path of a drag, the direction of a scroll, the text about to be typed, the
keys about to be pressed.

Exact pixels on any scale factor: positions are screen-space (physical) points. Each QScreen is
described as an `automation.coords.Monitor` with Qt's own device-pixel ratio, the point is converted
with `coords.screen_to_logical` on the monitor `coords.monitor_at` finds, and the painter, scaled by
1/devicePixelRatio, draws in the window's device pixels (logical offset times the ratio), so the dot
hits the physical pixel at 1, 1.25, 1.5 or 2 alike.

Click-through: the windows take no input (WindowTransparentForInput, plus X11BypassWindowManagerHint
so a window manager does not frame them and take the clicks). Each window is also masked to what it
draws, so without a compositor (where transparent pixels are black) it still covers nothing else.

Editing the target: an input-transparent window cannot be dragged, so each point of a pointer action
gets a small separate `MarkerHandle` window: a ring around the target that accepts the mouse (its
centre is a hole, so a click on the target itself still goes through). Dragging it moves the point
by the physical distance the pointer moved (both ends converted with `coords.logical_to_screen`), and
`OverlayController.target_edited` carries the edited screen-space action.

Keeping the overlay out of the model's screenshot: `OverlayAwareCapture` wraps a FrameSource; its
`grab()` (on the engine thread) hides the overlay through a blocking call into the GUI thread, waits
for the X server to have unmapped it and the compositor to repaint, grabs, and shows it again.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from app.gui_thread import GuiCallTimeout, GuiThreadCaller
from app.qt import Qt, QtCore, QtGui, QtWidgets, Signal
from automation.actions import Action, Drag, KeyCombo, Point, Scroll, ScrollDirection, TypeText
from automation.annotate import MARKER_COLOUR
from automation.coords import Monitor, Rect, logical_to_screen, monitor_at, screen_to_logical
from automation.engine import FrameSource
from automation.errors import CaptureError, OffScreenError
from automation.screen import ScreenFrame

MARKER = QtGui.QColor(*MARKER_COLOUR)  # the same colour as the annotated screenshots in the history
OUTLINE = QtGui.QColor(16, 16, 24, 210)  # dark edge so the marker reads on light and dark screens
LABEL_BACKGROUND = QtGui.QColor(22, 22, 32, 232)
LABEL_TEXT = QtGui.QColor(255, 255, 255)
PREVIEW_BACKGROUND = QtGui.QColor(255, 255, 255, 240)
PREVIEW_TEXT = QtGui.QColor(20, 20, 28)
PREVIEW_CAPTION = QtGui.QColor(90, 90, 105)
KEYCAP = QtGui.QColor(232, 232, 238)

# Sizes in logical pixels; the painter works in device pixels, so each is multiplied by the ratio.
RING_RADIUS = 15
TICK_INNER = 7
TICK_OUTER = 25
LABEL_OFFSET = 24
LABEL_FONT_PX = 13
PREVIEW_FONT_PX = 14
PREVIEW_MAX_CHARS = 80
HANDLE_RADIUS = 21  # the handle window is a ring between HANDLE_HOLE and HANDLE_RADIUS
HANDLE_HOLE = 9
CAPTURE_SETTLE_S = 0.06  # after the unmap: time for the compositor (or the apps below) to repaint

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


# -- Qt screens as coords.Monitor ---------------------------------------------------------------


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


# -- what is drawn ------------------------------------------------------------------------------


def action_in_words(action: Action) -> str:
    """The action as the user reads it; says where pointer-less typing and scrolling go."""
    if isinstance(action, TypeText) and action.at is None:
        return f"{action.describe()} into the focused field"
    if isinstance(action, Scroll) and action.at is None:
        return f"{action.describe()} at the pointer"
    return action.describe()


@dataclass(frozen=True, slots=True)
class OverlayScene:
    """One proposal as the overlay shows it: all positions in screen space."""

    step: int
    action: Action
    pointer: Point  # where the pointer was when shown: the anchor of scroll, type and key hints
    rings_by_handles: bool = False  # the handle windows draw the rings around the targets

    @property
    def anchor(self) -> Point:
        """Where the label goes: the action's first point, or the pointer for pointer-less actions."""
        points = self.action.points()
        return points[0] if points else self.pointer

    @property
    def label(self) -> str:
        action = self.action
        if isinstance(action, TypeText):  # the text itself goes in the preview box under the label
            return f"type at {action.at}" if action.at is not None else "type into the focused field"
        return action_in_words(action)


class _Sketch:
    """Draws a scene on one window's device pixels."""

    def __init__(self, painter: QtGui.QPainter, monitor: Monitor, origin: QtCore.QPoint, bounds: QtCore.QRectF) -> None:
        self.painter = painter
        self.monitor = monitor
        self.origin = origin
        self.bounds = bounds
        self.unit = monitor.scale  # one logical pixel in device pixels

    def device(self, point: Point) -> tuple[int, int]:
        """The device pixel of this window that shows a screen pixel (through coords, then Qt's ratio)."""
        x, y = screen_to_logical(point, self.monitor)
        scale = self.monitor.scale
        return round((x - self.origin.x()) * scale), round((y - self.origin.y()) * scale)

    def centre(self, point: Point) -> QtCore.QPointF:
        x, y = self.device(point)
        return QtCore.QPointF(x + 0.5, y + 0.5)

    def shows(self, point: Point) -> bool:
        return self.monitor.rect.contains(point)

    # -- primitives --

    def _stroke(self, draw: Callable[[], None], width: float) -> None:
        """Draw twice: a wider dark edge, then the marker colour on top."""
        u = self.unit
        painter = self.painter
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QtGui.QPen(OUTLINE, (width + 2) * u, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap))
        draw()
        painter.setPen(QtGui.QPen(MARKER, width * u, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap))
        draw()

    def dot(self, point: Point) -> None:
        """A solid square centred exactly on the pixel, with a dark rim; antialiasing off to stay exact."""
        x, y = self.device(point)
        half = 1 if self.unit < 1.5 else 2
        painter = self.painter
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, False)
        painter.fillRect(QtCore.QRect(x - half - 1, y - half - 1, 2 * half + 3, 2 * half + 3), OUTLINE)
        painter.fillRect(QtCore.QRect(x - half, y - half, 2 * half + 1, 2 * half + 1), MARKER)
        painter.restore()

    def crosshair(self, point: Point, ring: bool = True) -> None:
        u = self.unit
        c = self.centre(point)
        if ring:
            self._stroke(lambda: self.painter.drawEllipse(c, RING_RADIUS * u, RING_RADIUS * u), 2)
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            start = c + QtCore.QPointF(dx, dy) * TICK_INNER * u
            end = c + QtCore.QPointF(dx, dy) * TICK_OUTER * u
            self._stroke(lambda s=start, e=end: self.painter.drawLine(s, e), 2)
        self.dot(point)

    def small_ring(self, point: Point, radius: float = 7) -> None:
        c = self.centre(point)
        r = radius * self.unit
        self._stroke(lambda: self.painter.drawEllipse(c, r, r), 2)

    def arrow(self, start: QtCore.QPointF, end: QtCore.QPointF, stop_short: float) -> None:
        """A line from start to end with a filled head, ending `stop_short` logical px before `end`."""
        u = self.unit
        vector = end - start
        length = math.hypot(vector.x(), vector.y())
        if length < 1:
            return
        direction = vector / length
        tip = end - direction * stop_short * u
        normal = QtCore.QPointF(-direction.y(), direction.x())
        base = tip - direction * 14 * u
        self._stroke(lambda: self.painter.drawLine(start, base), 3)
        head = QtGui.QPolygonF([tip, base + normal * 8 * u, base - normal * 8 * u])
        self.painter.setPen(QtGui.QPen(OUTLINE, 2 * u))
        self.painter.setBrush(MARKER)
        self.painter.drawPolygon(head)

    def chevrons(self, point: Point, direction: ScrollDirection) -> None:
        u = self.unit
        c = self.centre(point)
        d = {
            ScrollDirection.UP: QtCore.QPointF(0, -1),
            ScrollDirection.DOWN: QtCore.QPointF(0, 1),
            ScrollDirection.LEFT: QtCore.QPointF(-1, 0),
            ScrollDirection.RIGHT: QtCore.QPointF(1, 0),
        }[direction]
        normal = QtCore.QPointF(-d.y(), d.x())
        for distance in (32, 44, 56):
            tip = c + d * (distance + 7) * u
            wing = c + d * distance * u
            left, right = wing + normal * 10 * u, wing - normal * 10 * u
            self._stroke(lambda a=left, b=tip, z=right: self.painter.drawPolyline(QtGui.QPolygonF([a, b, z])), 3)

    def _font(self, pixels: float, bold: bool = False) -> QtGui.QFont:
        font = QtGui.QFont(QtWidgets.QApplication.font())
        font.setPixelSize(max(1, round(pixels * self.unit)))
        font.setBold(bold)
        return font

    def _place(
        self, anchor: QtCore.QPointF, size: QtCore.QSizeF, beside: bool, away: QtCore.QPointF | None
    ) -> QtCore.QRectF:
        """A box by the anchor, kept on the screen: below-right, or `beside` it (vertically centred),
        or on the side facing away from `away` (the other end of a drag)."""
        offset = LABEL_OFFSET * self.unit
        margin = 4 * self.unit
        bounds = self.bounds.adjusted(margin, margin, -margin, -margin)

        side = (TICK_OUTER + 6) * self.unit if beside else offset  # beside: clear of the crosshair's ticks

        def across(left: bool) -> float:
            return anchor.x() - side - size.width() if left else anchor.x() + side

        def down(up: bool) -> float:
            if beside:
                return anchor.y() - size.height() / 2
            return anchor.y() - offset - size.height() if up else anchor.y() + offset

        left = away is not None and away.x() > anchor.x()
        up = away is not None and away.y() > anchor.y()
        x = across(left)
        if x < bounds.left() or x + size.width() > bounds.right():
            x = across(not left)
        y = down(up)
        if y < bounds.top() or y + size.height() > bounds.bottom():
            y = down(not up)
        x = min(max(x, bounds.left()), bounds.right() - size.width())
        y = min(max(y, bounds.top()), bounds.bottom() - size.height())
        return QtCore.QRectF(QtCore.QPointF(x, y), size)

    def label(
        self, anchor: QtCore.QPointF, scene: OverlayScene, beside: bool, away: QtCore.QPointF | None = None
    ) -> None:
        """The step badge and the action in words, with the text to type or the keys to press below."""
        u = self.unit
        painter = self.painter
        pad = 7 * u
        badge_font, text_font = self._font(LABEL_FONT_PX, bold=True), self._font(LABEL_FONT_PX)
        caption_font, preview_font = self._font(11), self._font(PREVIEW_FONT_PX)
        badge_metrics, text_metrics = QtGui.QFontMetricsF(badge_font), QtGui.QFontMetricsF(text_font)
        caption_metrics, preview_metrics = QtGui.QFontMetricsF(caption_font), QtGui.QFontMetricsF(preview_font)

        badge_text = str(scene.step)
        badge_w = max(badge_metrics.horizontalAdvance(badge_text) + 12 * u, badge_metrics.height() + 2 * u)
        line_h = max(text_metrics.height(), badge_metrics.height()) + 2 * u
        text = scene.label
        text_w = text_metrics.horizontalAdvance(text)
        width = badge_w + 8 * u + text_w
        caption, body, keys = _preview(scene.action)
        key_pad = 7 * u
        if keys:
            body_w = sum(preview_metrics.horizontalAdvance(key) + 2 * key_pad for key in keys) + 6 * u * (len(keys) - 1)
        else:
            body_w = preview_metrics.horizontalAdvance(body)
        body_h = preview_metrics.height() + (6 * u if keys else 0)
        field_h = caption_metrics.height() + body_h + 9 * u
        if caption:
            width = max(width, max(caption_metrics.horizontalAdvance(caption), body_w) + 16 * u)
        height = line_h + (pad + field_h if caption else 0)
        box = self._place(anchor, QtCore.QSizeF(width + 2 * pad, height + 2 * pad), beside, away)

        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(LABEL_BACKGROUND)
        painter.drawRoundedRect(box, 8 * u, 8 * u)
        badge = QtCore.QRectF(box.left() + pad, box.top() + pad, badge_w, line_h)
        painter.setBrush(MARKER)
        painter.drawRoundedRect(badge, line_h / 2, line_h / 2)
        painter.setPen(LABEL_TEXT)
        painter.setFont(badge_font)
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, badge_text)
        painter.setFont(text_font)
        text_box = QtCore.QRectF(badge.right() + 8 * u, badge.top(), text_w + 2 * u, line_h)
        painter.drawText(text_box, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, text)
        if not caption:
            return

        field = QtCore.QRectF(box.left() + pad, badge.bottom() + pad, box.width() - 2 * pad, field_h)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(PREVIEW_BACKGROUND)
        painter.drawRoundedRect(field, 5 * u, 5 * u)
        inner = field.adjusted(8 * u, 3 * u, -8 * u, -3 * u)
        painter.setPen(PREVIEW_CAPTION)
        painter.setFont(caption_font)
        painter.drawText(inner, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft, caption)
        painter.setFont(preview_font)
        top = inner.top() + caption_metrics.height() + 2 * u
        if not keys:
            painter.setPen(PREVIEW_TEXT)
            painter.drawText(QtCore.QRectF(inner.left(), top, inner.width(), body_h), Qt.AlignmentFlag.AlignLeft, body)
            return
        x = inner.left()
        for key in keys:  # each key as a keycap
            cap = QtCore.QRectF(x, top, preview_metrics.horizontalAdvance(key) + 2 * key_pad, body_h)
            painter.setPen(QtGui.QPen(PREVIEW_CAPTION, 1 * u))
            painter.setBrush(KEYCAP)
            painter.drawRoundedRect(cap.adjusted(0.5 * u, 0.5 * u, -0.5 * u, -0.5 * u), 4 * u, 4 * u)
            painter.setPen(PREVIEW_TEXT)
            painter.drawText(cap, Qt.AlignmentFlag.AlignCenter, key)
            x = cap.right() + 6 * u

    # -- a whole scene --

    def scene(self, scene: OverlayScene) -> None:
        action = scene.action
        ring = not scene.rings_by_handles
        beside = False  # the label goes beside the target where something is drawn below it
        away = None  # and away from the far end of a drag
        if isinstance(action, Drag):
            away = self.centre(action.end)
            self.arrow(self.centre(action.start), self.centre(action.end), RING_RADIUS + 3)
            if ring:
                self.small_ring(action.start)
            self.dot(action.start)
            self.crosshair(action.end, ring)
        elif isinstance(action, Scroll):
            if action.at is not None:
                self.crosshair(action.at, ring)
            else:
                self.small_ring(scene.pointer, 10)
            self.chevrons(action.at or scene.pointer, action.direction)
            beside = action.direction in (ScrollDirection.UP, ScrollDirection.DOWN)
        else:
            for point in action.points():
                self.crosshair(point, ring)
        if self.shows(scene.anchor):
            self.label(self.centre(scene.anchor), scene, beside, away)


def _preview(action: Action) -> tuple[str, str, tuple[str, ...]]:
    """The light box under the label: (caption, text to type, keys to press); empty where none."""
    if isinstance(action, TypeText):
        text = action.text.replace("\n", " ⏎ ")
        if len(text) > PREVIEW_MAX_CHARS:
            text = text[: PREVIEW_MAX_CHARS - 1] + "…"
        return "text to type", text, ()
    if isinstance(action, KeyCombo):
        return "keys to press", "", tuple(key.upper() if len(key) == 1 else key.capitalize() for key in action.keys)
    return "", "", ()


def render_scene(
    scene: OverlayScene, monitor: Monitor, origin: QtCore.QPoint, device_size: QtCore.QSize
) -> QtGui.QImage:
    """The scene as one window on `monitor` shows it: a transparent image of the window's device pixels."""
    image = QtGui.QImage(device_size, QtGui.QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QtGui.QPainter(image)
    painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
    painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
    _Sketch(painter, monitor, origin, QtCore.QRectF(0, 0, device_size.width(), device_size.height())).scene(scene)
    painter.end()
    image.setDevicePixelRatio(monitor.scale)
    return image


def painted_region(image: QtGui.QImage, logical_size: QtCore.QSize) -> QtGui.QRegion:
    """The logical pixels that show anything of `image` (device pixels), grown by one: the window mask."""
    width, height = image.width(), image.height()
    raw = np.frombuffer(image.constBits(), np.uint8, count=image.sizeInBytes())
    alpha = raw.reshape(height, image.bytesPerLine())[:, 3 : width * 4 : 4]  # BGRA in memory: alpha last
    rows, cols = np.nonzero(alpha)
    mask = np.zeros((logical_size.height() + 2, logical_size.width() + 2), np.bool_)
    if rows.size:
        ratio_x, ratio_y = width / logical_size.width(), height / logical_size.height()
        mask[(rows / ratio_y).astype(np.intp) + 1, (cols / ratio_x).astype(np.intp) + 1] = True
    # Grow by one logical pixel so antialiased edges rounded across the ratio stay inside the mask.
    grown = mask.copy()
    grown[1:, :] |= mask[:-1, :]
    grown[:-1, :] |= mask[1:, :]
    spread = grown.copy()
    spread[:, 1:] |= grown[:, :-1]
    spread[:, :-1] |= grown[:, 1:]
    # One bit a pixel, each row padded to a byte, lowest bit first: what QBitmap.fromData reads.
    bits = np.packbits(spread[1:-1, 1:-1], axis=1, bitorder="little").tobytes()
    bitmap = QtGui.QBitmap.fromData(logical_size, bits, QtGui.QImage.Format.Format_MonoLSB)
    return QtGui.QRegion(bitmap)


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
    """A small ring window over one target that accepts the mouse: drag it to move the target.

    The ring's hole is centred on the target, so a click on the target itself still goes through.
    Near a screen's edge the window is kept inside the screen (a window straddling two screens is
    scaled by the wrong one) and the ring drawn off its centre, still around the target.
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
        self._press: QtCore.QPointF | None = None
        self._start_position = QtCore.QPoint()

    def place(self, point: Point) -> None:
        """Put the ring around a screen pixel."""
        self.point = point
        centre = screen_point_to_global_logical(point)
        screen = QtGui.QGuiApplication.screenAt(centre.toPoint()) or QtGui.QGuiApplication.primaryScreen()
        area = screen.geometry()
        left = min(max(round(centre.x() - HANDLE_RADIUS), area.left()), area.right() + 1 - self.width())
        top = min(max(round(centre.y() - HANDLE_RADIUS), area.top()), area.bottom() + 1 - self.height())
        self._centre = centre - QtCore.QPointF(left, top)
        self.setScreen(screen)
        self.move(left, top)
        self.setMask(self._ring())
        self.update()

    def _ring(self, hole: bool = True) -> QtGui.QRegion:
        x, y = round(self._centre.x()), round(self._centre.y())
        ellipse = QtGui.QRegion.RegionType.Ellipse
        outer = QtGui.QRegion(x - HANDLE_RADIUS, y - HANDLE_RADIUS, 2 * HANDLE_RADIUS, 2 * HANDLE_RADIUS, ellipse)
        if not hole:
            return outer
        return outer.subtracted(
            QtGui.QRegion(x - HANDLE_HOLE, y - HANDLE_HOLE, 2 * HANDLE_HOLE, 2 * HANDLE_HOLE, ellipse)
        )

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:
        painter = QtGui.QPainter(self)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        painter.setCompositionMode(QtGui.QPainter.CompositionMode.CompositionMode_Source)
        painter.fillRect(self.rect(), Qt.GlobalColor.transparent)
        painter.setCompositionMode(QtGui.QPainter.CompositionMode.CompositionMode_SourceOver)
        centre = self._centre
        # A faint band over the whole ring shows where it can be grabbed; the marker ring on top.
        middle = (HANDLE_RADIUS + HANDLE_HOLE) / 2
        painter.setPen(QtGui.QPen(QtGui.QColor(255, 255, 255, 70), HANDLE_RADIUS - HANDLE_HOLE - 1))
        painter.drawEllipse(centre, middle, middle)
        painter.setPen(QtGui.QPen(OUTLINE, 4))
        painter.drawEllipse(centre, RING_RADIUS, RING_RADIUS)
        painter.setPen(QtGui.QPen(MARKER, 2))
        painter.drawEllipse(centre, RING_RADIUS, RING_RADIUS)
        if self._press is not None:  # while dragging, the overlay's dot stays behind: show one here
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(MARKER)
            painter.drawEllipse(centre, 2.5, 2.5)
        painter.end()

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        self._press = event.globalPosition()
        self._start_position = self.pos()
        self.setCursor(Qt.CursorShape.ClosedHandCursor)
        self.setMask(self._ring(hole=False))  # while dragging, the hole would let the pointer slip through
        self.update()

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

    def show_proposal(self, step: int, action: Action, *, editable: bool = True) -> None:
        """Show `action` (screen space) for step `step`; with `editable`, its targets can be dragged."""
        points = action.points()
        pointer = global_logical_to_screen_or_none(QtGui.QCursor.pos())
        if pointer is None:  # the pointer sits between monitors: anchor hints on the target instead
            pointer = points[0] if points else primary_screen_centre()
        self._scene = OverlayScene(step, action, pointer, rings_by_handles=editable and bool(points))
        self._render()

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
        kept = [existing.pop(id(screen), None) or OverlayWindow(screen) for screen in screens]
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

    def hide_for_capture(self) -> list[QtWidgets.QWidget]:
        """Hide what is shown, make sure the X server has unmapped it; returns what to show again."""
        hidden = self.windows()
        for window in hidden:
            window.hide()
        if hidden:
            QtGui.QGuiApplication.sync()  # a round trip: the unmaps have reached the window system
        return hidden

    def restore_after_capture(self, hidden: Sequence[QtWidgets.QWidget]) -> None:
        if self._scene is None:
            return  # cleared meanwhile: nothing to bring back
        for window in hidden:
            window.show()
            window.raise_()

    # -- any thread --

    @contextmanager
    def hidden_for_capture(self, timeout_s: float = 2.0) -> Iterator[None]:
        """Keep the overlay off the screen for the block; call from the engine (or any) thread."""
        if not self._showing:
            yield
            return
        with self._capture_lock:
            try:
                hidden = self._gui.call(self.hide_for_capture, timeout_s)
            except GuiCallTimeout as exc:
                raise CaptureError(f"could not hide the overlay before the screenshot: {exc}") from exc
            try:
                if hidden:
                    time.sleep(self.capture_settle_s)
                yield
            finally:
                if hidden:
                    self._gui.post(lambda: self.restore_after_capture(hidden))


class OverlayAwareCapture:
    """A FrameSource whose grabs never contain the overlay: it is hidden for each grab."""

    def __init__(self, capture: FrameSource, controller: OverlayController) -> None:
        self.capture = capture
        self.controller = controller

    def grab(self, monitor: int | None) -> ScreenFrame:
        with self.controller.hidden_for_capture():
            return self.capture.grab(monitor)

    def __getattr__(self, name: str) -> object:
        # monitors(), close() and the rest of ScreenCapture pass straight through.
        return getattr(self.capture, name)
