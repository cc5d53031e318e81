"""What the overlay draws for one proposal, painted onto one screen's device pixels.

The crosshair's centre dot covers exactly the physical pixel the action names: each position goes
through `coords.screen_to_logical` on the screen's Monitor (Qt's own device-pixel ratio), and the
painter works in the window's device pixels (logical offset times the ratio), so the dot lands on
the physical pixel at any scale factor. Sizes are logical and multiplied by the ratio, so the marker
looks the same size on every screen.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from holodesk.app.gui.focused_area import TypingPlace
from holodesk.app.gui.keep_clear import CARET_MARGIN, PROMPT_ROWS, Box, bubble_spot, typed_area
from holodesk.app.gui.qt import Qt, QtCore, QtGui, QtWidgets
from holodesk.app.gui.qt_screens import engine_to_window_system
from holodesk.automation.action_picture import MARKER_COLOUR, typing_in_words
from holodesk.automation.actions import Action, Drag, KeyCombo, Point, Scroll, ScrollDirection, TypeText, UpdatePlan
from holodesk.automation.coords import Monitor, Rect, screen_to_logical
from holodesk.automation.errors import OffScreenError

MARKER = QtGui.QColor(*MARKER_COLOUR)  # the same colour as the annotated screenshots in the history
OUTLINE = QtGui.QColor(16, 16, 24, 210)  # dark edge so the marker reads on light and dark screens
# A light rim outside the dark edge: on a target of the marker's own colour (or a dark one) the
# dark edge alone left a faint ring; light-dark-colour reads on any background.
HALO = QtGui.QColor(255, 255, 255, 200)
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
    # Where the keys of a step without a target point go: the focused window and its caret where known
    # (app/gui/focused_area.py); the label goes next to the caret's line, or else the window's bottom rows
    # (the caret's likely place, app/gui/keep_clear.py), not on them.
    typing_place: TypingPlace | None = None

    @property
    def anchor(self) -> Point:
        """Where the label goes: the action's first point, the caret (else the focused window's bottom-left)
        for keys that go to it, or the pointer for other pointer-less actions."""
        points = self.action.points()
        if points:
            return points[0]
        if self.typing_place is not None:
            caret, window = self.typing_place.caret, self.typing_place.window
            return Point(caret.left, caret.bottom - 1) if caret is not None else Point(window.left, window.bottom - 1)
        return self.pointer

    @property
    def label(self) -> str:
        action = self.action
        if isinstance(action, TypeText):  # the text itself goes in the preview box under the label
            return typing_in_words(action, focused_field=True)
        if isinstance(action, UpdatePlan):  # one line here; the panel lists the goals
            return f"update the plan ({len(action.goals)} goal{'s' if len(action.goals) != 1 else ''})"
        return action_in_words(action)


def _on_qt_screens(point: Point) -> Point:
    """A screen-space point in the space of Qt's screens (the same unless qt_screens remaps, see there)."""
    try:
        return engine_to_window_system(point)
    except OffScreenError:
        return point  # off every monitor: drawn nowhere, as before


def paint_dot(painter: QtGui.QPainter, x: int, y: int, unit: float) -> None:
    """The centre dot on device pixel (x, y): a solid square centred exactly on it, with a dark rim;
    antialiasing off to stay exact. The overlay and the marker's handle both paint it with this."""
    half = 1 if unit < 1.5 else 2
    painter.save()
    painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, False)
    painter.fillRect(QtCore.QRect(x - half - 1, y - half - 1, 2 * half + 3, 2 * half + 3), OUTLINE)
    painter.fillRect(QtCore.QRect(x - half, y - half, 2 * half + 1, 2 * half + 1), MARKER)
    painter.restore()


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
        x, y = screen_to_logical(_on_qt_screens(point), self.monitor)
        scale = self.monitor.scale
        return round((x - self.origin.x()) * scale), round((y - self.origin.y()) * scale)

    def centre(self, point: Point) -> QtCore.QPointF:
        x, y = self.device(point)
        return QtCore.QPointF(x + 0.5, y + 0.5)

    def shows(self, point: Point) -> bool:
        return self.monitor.rect.contains(_on_qt_screens(point))

    # -- primitives --

    def _stroke(self, draw: Callable[[], None], width: float) -> None:
        """Draw three times: a wide light rim, a dark edge, then the marker colour on top."""
        u = self.unit
        painter = self.painter
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QtGui.QPen(HALO, (width + 4) * u, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap))
        draw()
        painter.setPen(QtGui.QPen(OUTLINE, (width + 2) * u, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap))
        draw()
        painter.setPen(QtGui.QPen(MARKER, width * u, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap))
        draw()

    def dot(self, point: Point) -> None:
        x, y = self.device(point)
        paint_dot(self.painter, x, y, self.unit)

    def crosshair(self, point: Point, ring: bool = True) -> None:
        u = self.unit
        c = self.centre(point)
        if ring:
            self._stroke(lambda: self.painter.drawEllipse(c, RING_RADIUS * u, RING_RADIUS * u), 2)
        for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            start = c + QtCore.QPointF(dx, dy) * TICK_INNER * u
            end = c + QtCore.QPointF(dx, dy) * TICK_OUTER * u
            self._stroke(functools.partial(self.painter.drawLine, start, end), 2)
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
            self._stroke(functools.partial(self.painter.drawPolyline, QtGui.QPolygonF([left, tip, right])), 3)

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
        self,
        anchor: QtCore.QPointF,
        scene: OverlayScene,
        beside: bool,
        away: QtCore.QPointF | None = None,
        rows: Box | None = None,
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
        size = QtCore.QSizeF(width + 2 * pad, height + 2 * pad)
        if rows is None:
            box = self._place(anchor, size, beside, away)
        else:  # next to the rows where the text goes, never on them
            margin = 4 * u
            inside = self.bounds.adjusted(margin, margin, -margin, -margin)
            bounds = Box(inside.left(), inside.top(), inside.width(), inside.height())
            left, top = bubble_spot(bounds, size.width(), size.height(), rows, gap=6 * u)
            box = QtCore.QRectF(QtCore.QPointF(left, top), size)

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
            self.label(self.centre(scene.anchor), scene, beside, away, self._typing_rows(scene))

    def _typing_rows(self, scene: OverlayScene) -> Box | None:
        """Where the text lands (the caret's line, else the focused window's bottom rows) in this window's
        device pixels, for keys without a target point."""
        place = scene.typing_place
        if place is None or scene.action.points():
            return None
        try:
            window = self._device_box(place.window)
            caret = self._device_box(place.caret) if place.caret is not None else None
            field = self._device_box(place.field) if place.field is not None else None
        except OffScreenError:
            return None
        return typed_area(window, caret, field, PROMPT_ROWS * self.unit, CARET_MARGIN * self.unit)

    def _device_box(self, rect: Rect) -> Box:
        left, top = self.device(Point(rect.left, rect.top))
        right, bottom = self.device(Point(rect.right, rect.bottom))
        return Box(left, top, right - left, bottom - top)


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
