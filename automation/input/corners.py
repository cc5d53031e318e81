"""Fail-safe corners: a monitor's corner pixels stop a pyautogui run, so targets there move one pixel in."""

from __future__ import annotations

from collections.abc import Sequence

from holodesk.automation.actions import Action, Point
from holodesk.automation.coords import Monitor, monitor_at
from holodesk.automation.errors import OffScreenError


def corner_pixels(monitor: Monitor) -> list[tuple[int, int]]:
    rect = monitor.rect
    return [
        (rect.left, rect.top),
        (rect.right - 1, rect.top),
        (rect.left, rect.bottom - 1),
        (rect.right - 1, rect.bottom - 1),
    ]


def is_corner(point: Point, monitor: Monitor) -> bool:
    return (point.x, point.y) in corner_pixels(monitor)


def nudge_off_corners(action: Action, monitors: Sequence[Monitor]) -> tuple[Action, list[str]]:
    """The action with every point on a monitor's corner pixel moved one pixel inwards, and what moved.

    pyautogui's fail-safe stops the run when the pointer reaches a corner; a target drawn there is
    still a target one pixel in. Points off every monitor are left for validation to refuse.
    """
    notes: list[str] = []

    def inwards(point: Point) -> Point:
        try:
            monitor = monitor_at(point, monitors)
        except OffScreenError:
            return point
        if (point.x, point.y) not in corner_pixels(monitor):
            return point
        rect = monitor.rect
        moved = Point(point.x + (1 if point.x == rect.left else -1), point.y + (1 if point.y == rect.top else -1))
        notes.append(f"target {point} is a screen corner (the fail-safe stops there): moved one pixel in to {moved}")
        return moved

    return action.map_points(inwards), notes
