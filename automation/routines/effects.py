"""Expected effects: the region a step changed when recorded, and whether a replayed step changed it.

A change is a pixel whose colour moved by more than `CHANGE_LEVEL` in any channel (a caret's blink
or antialiasing noise stays below it). At replay the expected region moves with the target (it was
recorded relative to the target's point) and is widened by `REGION_MARGIN`, since a page that
randomizes its layout changes a slightly different area; the step did what it did when recorded
if anything changed inside it. Holodesk's own tray icon and windows never count as a change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from holodesk.automation.coords import Rect
from holodesk.automation.routines.routine_file import ExpectedEffect
from holodesk.automation.screen import ScreenFrame

CHANGE_LEVEL = 24
REGION_MARGIN = 24


def changed_box(
    before: np.ndarray, after: np.ndarray, ignore: Sequence[tuple[int, int, int, int]] = ()
) -> tuple[int, int, int, int] | None:
    """(left, top, width, height) of every pixel that changed between two images, or None.

    Both are height x width x 3 (or more) uint8 arrays of the same shape; only the first three
    channels are compared. Nothing inside the `ignore` boxes (left, top, width, height in the images'
    pixels: Holodesk's own tray icon and windows) counts as a change.
    """
    if before.shape != after.shape:
        raise ValueError(f"images of different sizes: {before.shape} and {after.shape}")
    difference = np.abs(before[:, :, :3].astype(np.int16) - after[:, :, :3].astype(np.int16)).max(axis=2)
    for left, top, width, height in ignore:
        difference[max(0, top) : max(0, top + height), max(0, left) : max(0, left + width)] = 0
    rows = np.flatnonzero((difference > CHANGE_LEVEL).any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero((difference > CHANGE_LEVEL).any(axis=0))
    return int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)


@dataclass(frozen=True, slots=True)
class EffectCheck:
    """Whether the expected effect was seen, and in words what was compared."""

    seen: bool
    detail: str


def check_effect(
    expect: ExpectedEffect,
    target: tuple[int, int] | None,
    before: ScreenFrame,
    after: ScreenFrame,
    shift: tuple[int, int] = (0, 0),
    ignore: Sequence[Rect] = (),
) -> EffectCheck:
    """Did the screen change inside the expected region (moved to where the target is now)?

    A step with a target has its region relative to the target's point; a step without one (keys,
    typing where the focus is) has it in screen pixels as recorded, moved by `shift`: how far the
    routine's last target was found from where it was recorded (the window it acts in moved).
    Nothing inside `ignore` (Holodesk's own tray icon and windows, screen pixels) counts as a change.
    """
    if not expect.changed or expect.region is None:
        return EffectCheck(True, "no change was expected")
    if before.region != after.region:
        return EffectCheck(True, "the screen's size changed: the effect cannot be compared")
    dx, dy, width, height = expect.region
    if target is not None:
        dx, dy = dx + target[0], dy + target[1]
    else:
        dx, dy = dx + shift[0], dy + shift[1]
    left = max(0, dx - before.region.left - REGION_MARGIN)
    top = max(0, dy - before.region.top - REGION_MARGIN)
    right = min(before.width, dx - before.region.left + width + REGION_MARGIN)
    bottom = min(before.height, dy - before.region.top + height + REGION_MARGIN)
    where = f"{width}x{height} at ({dx}, {dy})"
    if right <= left or bottom <= top:
        return EffectCheck(False, f"the region expected to change ({where}) is off the screen")
    own = [(r.left - before.region.left - left, r.top - before.region.top - top, r.width, r.height) for r in ignore]
    box = changed_box(before.pixels[top:bottom, left:right], after.pixels[top:bottom, left:right], own)
    if box is None:
        return EffectCheck(False, f"nothing changed where the recorded step changed the screen ({where})")
    return EffectCheck(True, f"the screen changed where expected ({where})")
