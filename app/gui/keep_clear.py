"""Where the approval panel and the overlay's typing bubble may go: never over where the action lands.

Pure geometry (no Qt), in whatever one coordinate space the caller uses. The areas kept clear:

- a pointer action's targets: a square around each point (the marker's ticks, and what the user must
  see under them);
- a typing or key step without a target point: where the text goes. Where AT-SPI tells the caret's
  place (app/gui/focused_area.py, app/gui/caret_place.py), `typed_area` keeps the caret's line clear,
  from the caret to the text field's right edge (the typed text goes there), with a margin round it.
  Otherwise only the focused window's rectangle is known (X11's input focus), and the caret is
  approximated by that window's bottom rows, where a terminal's prompt line is (`text_rows`): a
  terminal whose caret sits higher up (a full-screen editor) is not protected beyond that band.

The panel takes the spot on the screen that covers none of the areas (least overlap when the screen
has no such spot), then the one farthest from them. The bubble goes right under the text rows, or
beside them where the screen ends below (never on the window's title bar when there is room): next to
the caret, not on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TARGET_CLEARANCE = 40  # half the side of the square kept clear around a target point (ticks reach 25)
PROMPT_ROWS = 96  # the focused window's bottom band kept clear: about four terminal rows and the border
BUBBLE_GAP = 6  # between the kept-clear rows and the bubble
CARET_MARGIN = 12  # round the caret's line: the field's border and focus ring, and a little air


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle; `right` and `bottom` are exclusive."""

    left: float
    top: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height

    def overlap(self, other: Box) -> float:
        """The area the two share (0 when they do not meet)."""
        across = min(self.right, other.right) - max(self.left, other.left)
        down = min(self.bottom, other.bottom) - max(self.top, other.top)
        return across * down if across > 0 and down > 0 else 0.0

    def centre(self) -> tuple[float, float]:
        return self.left + self.width / 2, self.top + self.height / 2


def around(x: float, y: float, half: float = TARGET_CLEARANCE) -> Box:
    """The square kept clear around a target point."""
    return Box(x - half, y - half, 2 * half, 2 * half)


def text_rows(window: Box, rows: float = PROMPT_ROWS) -> Box:
    """The focused window's bottom band, where a terminal's prompt and its last output are (the whole
    window when it is lower than that)."""
    height = min(rows, window.height)
    return Box(window.left, window.bottom - height, window.width, height)


def typed_area(
    window: Box, caret: Box | None, field: Box | None = None, rows: float = PROMPT_ROWS, margin: float = CARET_MARGIN
) -> Box:
    """Where typed text lands: the caret's line, from the caret to the right edge of its `field`, grown
    by `margin`, when the caret is known; else the focused window's bottom `rows` (`text_rows`)."""
    if caret is None:
        return text_rows(window, rows)
    right = max(caret.right, field.right) if field is not None else caret.right
    return Box(caret.left - margin, caret.top - margin, right - caret.left + 2 * margin, caret.height + 2 * margin)


def panel_spot(
    area: Box,
    width: float,
    height: float,
    keep_clear: Sequence[Box],
    avoid: Sequence[Box] = (),
    margin: float = 24,
) -> tuple[float, float]:
    """The top-left of a `width` x `height` panel inside `area` that covers none of `keep_clear` where
    the area has such a spot (else the least of them), then as little of `avoid` (the overlay's own
    drawing) as it can, then the farthest from all of them."""
    spots: list[tuple[float, float]] = []
    # Within the margin first; on a crowded screen the margin is given up before a kept area is covered.
    for edge in (margin, 0.0):
        inner = Box(area.left + edge, area.top + edge, area.width - 2 * edge, area.height - 2 * edge)

        def clamped(left: float, top: float, inner: Box = inner) -> tuple[float, float]:
            left = max(inner.left, min(left, inner.right - width))
            top = max(inner.top, min(top, inner.bottom - height))
            return left, top

        for fy in (1.0, 0.0, 0.5):
            for fx in (1.0, 0.0, 0.5):
                spots.append(clamped(inner.left + fx * (inner.width - width), inner.top + fy * (inner.height - height)))
        for box in keep_clear:  # hugging each kept area: the spot a crowded screen may have left
            gap = BUBBLE_GAP + edge / 2
            for top in (box.top - gap - height, box.bottom + gap):
                for left in (box.left, box.right - width):
                    spots.append(clamped(left, top))
            for left in (box.left - gap - width, box.right + gap):
                spots.append(clamped(left, box.top))
    others = [*keep_clear, *avoid]

    within = Box(area.left + margin, area.top + margin, area.width - 2 * margin, area.height - 2 * margin)

    def cost(spot: tuple[float, float]) -> tuple[float, float, bool, float]:
        panel = Box(spot[0], spot[1], width, height)
        covered = sum(panel.overlap(box) for box in keep_clear)
        drawn = sum(panel.overlap(box) for box in avoid)
        on_edge = panel.overlap(within) < width * height  # touching the screen's edge: only when needed
        cx, cy = panel.centre()
        distance = min((abs(cx - ox) + abs(cy - oy) for ox, oy in (b.centre() for b in others)), default=0.0)
        return covered, drawn, on_edge, -distance

    return min(spots, key=cost)


def bubble_spot(bounds: Box, width: float, height: float, rows: Box, gap: float = BUBBLE_GAP) -> tuple[float, float]:
    """The top-left of the typing bubble, next to the text rows and inside `bounds` (the screen): under
    them at their left edge; where the screen ends below, beside them (left, then right), level with
    their last row; only where neither has room, above them (over the window's older lines)."""
    if rows.bottom + gap + height <= bounds.bottom:
        left, top = rows.left, rows.bottom + gap
    elif rows.left - gap - width >= bounds.left:
        left, top = rows.left - gap - width, rows.bottom - height
    elif rows.right + gap + width <= bounds.right:
        left, top = rows.right + gap, rows.bottom - height
    else:
        left, top = rows.left, rows.top - gap - height
    left = max(bounds.left, min(left, bounds.right - width))
    top = max(bounds.top, min(top, bounds.bottom - height))
    return left, top
