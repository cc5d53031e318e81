"""The `act` tool's arguments read into one Action, or refused in words before anything is shown or done.

Coordinates are pixels of the screenshot the `screenshot` tool returns (the monitor Holodesk captures,
its top-left corner 0,0), or with `"coordinates": "normalized"` integers 0-1000 of its width and height.
The Action comes back in that screenshot's pixel space; the engine maps it onto the desktop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from holodesk.app.common.errors import HolodeskAppError
from holodesk.automation.actions import (
    Action,
    Click,
    Drag,
    KeyCombo,
    MouseButton,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    Wait,
)
from holodesk.automation.coords import NORMALIZED_MAX, FrameMapping, NormalizedSpace, Rect
from holodesk.automation.errors import ActionError, OffScreenError
from holodesk.automation.keys import parse_combination

ACT_KINDS = ("click", "double_click", "type", "key", "scroll", "drag", "wait")
COORDINATE_KINDS = ("pixels", "normalized")
MAX_REASON_CHARS = 500  # the agent's reason, shown to the person as the step's note


class BadToolInput(HolodeskAppError, ValueError):
    """A tool argument that cannot be used; the message says which and why (sent to the client as it is)."""


@dataclass(frozen=True, slots=True)
class ScreenSize:
    """The size of the screenshot the agent's coordinates refer to (physical pixels), and where it is."""

    width: int
    height: int
    left: int = 0  # the monitor's top-left corner on the desktop
    top: int = 0

    def on_desktop(self, action: Action) -> Action:
        """`action` (screenshot pixels) in desktop pixels."""
        return action.map_points(lambda p: Point(p.x + self.left, p.y + self.top))


@dataclass(frozen=True, slots=True)
class ActRequest:
    """What `act` asks for: the action in screenshot pixels, and the agent's reason for the person."""

    action: Action
    reason: str


_FIELDS = {
    "action",
    "x",
    "y",
    "to_x",
    "to_y",
    "coordinates",
    "button",
    "text",
    "press_enter",
    "overwrite",
    "keys",
    "direction",
    "amount",
    "seconds",
    "reason",
}


def read_act(arguments: Mapping[str, object] | None, screen: ScreenSize) -> ActRequest:
    """The action `arguments` ask for, in screenshot pixels; BadToolInput (in words) for anything wrong."""
    args = dict(arguments or {})
    unknown = sorted(set(args) - _FIELDS)
    if unknown:
        raise BadToolInput(f"act does not take {', '.join(unknown)} (it takes {', '.join(sorted(_FIELDS))})")
    kind = args.get("action")
    if kind not in ACT_KINDS:
        raise BadToolInput(f"action must be one of {', '.join(ACT_KINDS)}, got {kind!r}")
    reason = _text(args, "reason", required=False)
    if len(reason) > MAX_REASON_CHARS:
        raise BadToolInput(f"reason is {len(reason)} characters long (at most {MAX_REASON_CHARS})")
    try:
        action = _action(str(kind), args, screen)
    except ActionError as exc:
        raise BadToolInput(str(exc)) from exc
    return ActRequest(action, reason)


def _action(kind: str, args: dict[str, object], screen: ScreenSize) -> Action:
    needs_point = kind in ("click", "double_click", "drag")
    point = _point(args, "x", "y", screen, required=needs_point)
    if kind in ("click", "double_click"):
        assert point is not None
        return Click(point, _button(args), 2 if kind == "double_click" else 1)
    if kind == "drag":
        assert point is not None
        end = _point(args, "to_x", "to_y", screen, required=True)
        assert end is not None
        return Drag(point, end, _button(args))
    if kind == "type":
        text = _text(args, "text", required=True, allow_empty=True)
        return TypeText(text, point, _flag(args, "press_enter"), _flag(args, "overwrite"))
    if kind == "key":
        keys = _text(args, "keys", required=True)
        return KeyCombo(parse_combination(keys))
    if kind == "scroll":
        direction = args.get("direction")
        if direction not in [d.value for d in ScrollDirection]:
            choices = ", ".join(d.value for d in ScrollDirection)
            raise BadToolInput(f"direction must be one of {choices}, got {direction!r}")
        amount = args.get("amount", 3)
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise BadToolInput(f"amount must be a whole number of wheel notches, got {amount!r}")
        return Scroll(ScrollDirection(str(direction)), amount, point)
    seconds = args.get("seconds", 1.0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        raise BadToolInput(f"seconds must be a number, got {seconds!r}")
    return Wait(float(seconds))


def _point(args: dict[str, object], x_name: str, y_name: str, screen: ScreenSize, *, required: bool) -> Point | None:
    x, y = args.get(x_name), args.get(y_name)
    if x is None and y is None:
        if required:
            raise BadToolInput(f"{x_name} and {y_name} are needed for this action")
        return None
    for name, value in ((x_name, x), (y_name, y)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadToolInput(f"{name} must be a whole number, got {value!r}")
    assert isinstance(x, int) and isinstance(y, int)
    coordinates = args.get("coordinates", "pixels")
    if coordinates not in COORDINATE_KINDS:
        raise BadToolInput(f"coordinates must be one of {', '.join(COORDINATE_KINDS)}, got {coordinates!r}")
    if coordinates == "normalized":
        mapping = FrameMapping(Rect(0, 0, screen.width, screen.height), screen.width, screen.height)
        try:
            return mapping.model_to_image(Point(x, y), NormalizedSpace())
        except OffScreenError:
            raise BadToolInput(
                f"{x_name}={x}, {y_name}={y} is off the screen: normalized coordinates run 0-{NORMALIZED_MAX}"
            ) from None
    if not (0 <= x < screen.width and 0 <= y < screen.height):
        raise BadToolInput(
            f"{x_name}={x}, {y_name}={y} is off the screen: the screenshot is {screen.width}x{screen.height} pixels"
            f" (x 0-{screen.width - 1}, y 0-{screen.height - 1})"
        )
    return Point(x, y)


def _button(args: dict[str, object]) -> MouseButton:
    button = args.get("button", "left")
    if button not in [b.value for b in MouseButton]:
        raise BadToolInput(f"button must be one of {', '.join(b.value for b in MouseButton)}, got {button!r}")
    return MouseButton(str(button))


def _flag(args: dict[str, object], name: str) -> bool:
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise BadToolInput(f"{name} must be true or false, got {value!r}")
    return value


def _text(args: dict[str, object], name: str, *, required: bool, allow_empty: bool = False) -> str:
    value = args.get(name)
    if value is None:
        if required:
            raise BadToolInput(f"{name} is needed for this action")
        return ""
    if not isinstance(value, str):
        raise BadToolInput(f"{name} must be a string, got {type(value).__name__}")
    if required and not allow_empty and not value.strip():
        raise BadToolInput(f"{name} is empty")
    return value
