"""The primitive input steps every action is made of, and that an input backend performs one by one.

Keys are canonical names (automation.keys); a backend sends them by keysym in the active layout
group. Points are screen space. A primitive says what reaches the desktop, never how.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from holodesk.automation.actions import MouseButton, Point, ScrollDirection


@dataclass(frozen=True, slots=True)
class PointerTo:
    """Move the pointer to `at`."""

    at: Point


@dataclass(frozen=True, slots=True)
class ButtonClicks:
    """Click `button` `count` times where the pointer is, with a stoppable pause between clicks."""

    button: MouseButton
    count: int = 1


@dataclass(frozen=True, slots=True)
class ButtonDrag:
    """Press `button` where the pointer is, move it in small steps to `end`, release it (also on a stop)."""

    button: MouseButton
    start: Point
    end: Point


@dataclass(frozen=True, slots=True)
class WheelScroll:
    """Turn the wheel `notches` notches towards `direction` where the pointer is."""

    direction: ScrollDirection
    notches: int


@dataclass(frozen=True, slots=True)
class KeyPresses:
    """Hold `hold` down in order, press and release each of `taps` in order, release `hold` in reverse.

    A key combination is its modifiers held around its last key; a repeated one taps that key again.
    `purpose` (optional) says why, for the step's result ("to select the field's text").
    """

    hold: tuple[str, ...]
    taps: tuple[str, ...]
    purpose: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return (*self.hold, *self.taps)


@dataclass(frozen=True, slots=True)
class TypedText:
    """Type `text` with key events (by keysym in the active layout group)."""

    text: str


@dataclass(frozen=True, slots=True)
class PastedText:
    """Put `text` on the clipboard, press `keys` (the paste key of the focused program), restore the clipboard.

    `reason` says why the text is not typed (the layout lacks keys for it), for the step's result.
    """

    text: str
    keys: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait `seconds` (stoppable): a focus settling after a click, or a Wait action."""

    seconds: float


Primitive = PointerTo | ButtonClicks | ButtonDrag | WheelScroll | KeyPresses | TypedText | PastedText | Pause


def drag_path(start: Point, end: Point, step_px: int) -> list[Point]:
    """Points from just after `start` to `end` (inclusive), at most `step_px` apart."""
    distance = math.hypot(end.x - start.x, end.y - start.y)
    steps = max(1, math.ceil(distance / step_px))
    return [
        Point(round(start.x + (end.x - start.x) * i / steps), round(start.y + (end.y - start.y) * i / steps))
        for i in range(1, steps + 1)
    ]
