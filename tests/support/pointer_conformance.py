"""The pointer cases every input backend must pass: same actions, same effects read back from a real window.

Each case acts on the window's "pad" at offsets from the pad's top-left corner and expects exactly
these pointer records from the window, in order, offsets again pad-relative: ("press" | "release" |
"double_click", button, dx, dy), ("wheel", direction, dx, dy) once per notch, and ("drag", start dx,
start dy, end dx, end dy) for a press-move-release the pad saw. The X11 backend runs them against
bench/rigs/target_window.py (tests/automation/input/x11/test_performer.py), the portal backend against
tests/support/wayland_target.py (wayland/test_portal_backend.py). A fence (a middle click at the
pad's corner) marks the end of a case's input: once it is read, everything sent before it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from holodesk.automation.actions import Action, Click, Drag, Point, Scroll
from holodesk.automation.input.performer import ExecutionResult

PointerRecord = tuple[Any, ...]
FENCE_OFFSET = (2, 2)


@dataclass(frozen=True, slots=True)
class PointerCase:
    name: str
    actions: Callable[[Callable[[int, int], Point]], tuple[Action, ...]]  # from pad-relative points
    expected: tuple[PointerRecord, ...]


def _click(button: str, dx: int, dy: int) -> tuple[PointerRecord, ...]:
    return (("press", button, dx, dy), ("release", button, dx, dy))


POINTER_CASES = (
    PointerCase("click", lambda at: (Click(at(40, 30)),), _click("left", 40, 30)),
    PointerCase("right click", lambda at: (Click(at(120, 60), button="right"),), _click("right", 120, 60)),
    PointerCase(
        "double click",
        lambda at: (Click(at(75, 45), count=2),),
        (("press", "left", 75, 45), ("release", "left", 75, 45), ("press", "left", 75, 45),
         ("double_click", "left", 75, 45), ("release", "left", 75, 45)),
    ),
    PointerCase(
        "triple click",
        lambda at: (Click(at(90, 20), count=3),),
        (("press", "left", 90, 20), ("release", "left", 90, 20), ("press", "left", 90, 20),
         ("double_click", "left", 90, 20), ("release", "left", 90, 20), *_click("left", 90, 20)),
    ),
    PointerCase(
        "drag",
        lambda at: (Drag(at(30, 40), at(210, 130)),),
        (("press", "left", 30, 40), ("release", "left", 210, 130), ("drag", 30, 40, 210, 130)),
    ),
    PointerCase("scroll down", lambda at: (Scroll("down", 3, at=at(50, 70)),), (("wheel", "down", 50, 70),) * 3),
    PointerCase("scroll up", lambda at: (Scroll("up", 2, at=at(150, 70)),), (("wheel", "up", 150, 70),) * 2),
)  # fmt: skip


class Performer(Protocol):
    def validate(self, action: Action) -> None: ...

    def execute(self, action: Action) -> ExecutionResult: ...


@dataclass(frozen=True, slots=True)
class PointerWindow:
    """A backend's view of the test window: where its pad is, and its pointer records up to the fence."""

    pad: Point  # the pad's top-left corner, screen space
    # every record since the last read, up to and including the fence, in the window's own form
    read_until_fence: Callable[[], list[dict[str, Any]]]


def run_pointer_case(performer: Performer, window: PointerWindow, case: PointerCase) -> str | None:
    """None when the window saw exactly the case's records; else what went wrong."""

    def at(dx: int, dy: int) -> Point:
        return Point(window.pad.x + dx, window.pad.y + dy)

    for action in case.actions(at):
        result = performer.execute(action)
        if not result.ok:
            return f"{action.describe()} failed: {result.detail}"
    performer.execute(Click(at(*FENCE_OFFSET), button="middle"))
    seen = pointer_records(window.read_until_fence(), window.pad)
    fence = ("press", "middle", *FENCE_OFFSET)
    if fence not in seen:
        return f"the fence never arrived; the window saw {seen}"
    seen = seen[: seen.index(fence)]
    if seen != list(case.expected):
        return f"the window saw {seen}; expected {list(case.expected)}"
    return None


_BUTTON_NAMES = {"LeftButton": "left", "RightButton": "right", "MiddleButton": "middle"}


def pointer_records(events: Iterable[dict[str, Any]], pad: Point) -> list[PointerRecord]:
    """The pointer records among a window's events, pad-relative, in the form the cases expect."""
    records: list[PointerRecord] = []
    for event in events:
        kind = event["event"]
        if kind in ("press", "release", "double_click"):
            button = _BUTTON_NAMES.get(event["button"], event["button"])
            records.append((kind, button, event["x"] - pad.x, event["y"] - pad.y))
        elif kind == "wheel":
            record = ("wheel", event["direction"], event["x"] - pad.x, event["y"] - pad.y)
            notches = event.get("notches", 1)  # the X11 window's events are one notch each
            if notches != int(notches):  # a part of a notch: no case expects one, so it shows as a miss
                records.append((*record, f"{notches:g} notches"))
            else:
                records.extend([record] * int(notches))
        elif kind == "drag":
            (sx, sy), (ex, ey) = event["start"], event["end"]
            records.append(("drag", sx - pad.x, sy - pad.y, ex - pad.x, ey - pad.y))
    return records
