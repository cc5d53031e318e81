"""Expected effects: what a step changed when recorded, and whether a replayed step did something.

A change is a pixel whose colour moved by more than `CHANGE_LEVEL` in any channel. At record time
the compiler keeps the box that changed (relative to the target's point for pointing steps). At
replay a step's effect is judged on what it acted on (`ActedOn`), not on that box fixed to a point:

- typing and keys: a change inside the window the keys went to (wherever in it: a terminal's output
  lands a line lower each run), the window closing, or the keyboard focus moving on;
- a click: a change inside the window it clicked or where the recorded click changed the screen,
  the window closing, or the keyboard focus moving (a click that focuses or selects). No visible
  change is accepted when the recorded click changed nothing, or as little as a focus ring or a
  caret does (`SMALL_EFFECT_AREA`); on a window that already had the keyboard focus it cannot be
  judged (a focusing click changes nothing there), which is said and the replay goes on.

A typing step that changed nothing in a window showing the same lines over and over (the same
command run again in a full terminal scrolls in output identical to what was there) cannot be
judged; that is said, not a stop. A change thinner than three pixels (a caret's column blinking, a
1-2 px line) is not an effect (`substantial`). Where the effect cannot be judged fairly (the window
moved or was resized while the step ran, the screen's size changed, the window is off the captured
screen) the check says so and does not stop the replay: a replay stops only on evidence that the
step did not happen. Where the desktop's windows cannot be asked (Wayland), the window is the whole
screen. Holodesk's own tray icon and windows never count as a change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from holodesk.automation.coords import Rect
from holodesk.automation.routines.routine_file import ExpectedEffect
from holodesk.automation.routines.windows import DesktopWindow
from holodesk.automation.screen import ScreenFrame

CHANGE_LEVEL = 24
REGION_MARGIN = 24  # the recorded box of a click's effect is widened by this (a page lays out anew)
THIN_CHANGE_PX = 3  # changes narrower than this are a caret's column or a thin line, not an effect
# A click that changed at most this many pixels (its box) when recorded did no more than a focus
# ring, a caret or a terminal's cursor does: at replay no visible change is accepted for it.
SMALL_EFFECT_AREA = 12_000
SMALL_EFFECT_HEIGHT = 80
MIN_SCROLL_PX = 6  # a text line is at least this tall: shorter repeats are a pattern, not lines


def changed_box(
    before: np.ndarray, after: np.ndarray, ignore: Sequence[tuple[int, int, int, int]] = ()
) -> tuple[int, int, int, int] | None:
    """(left, top, width, height) of every pixel that changed between two images, or None.

    Both are height x width x 3 (or more) uint8 arrays of the same shape; only the first three
    channels are compared. Nothing inside the `ignore` boxes (left, top, width, height in the images'
    pixels: Holodesk's own tray icon and windows) counts as a change.
    """
    mask = _changed(before, after, ignore)
    return _box(mask)


def substantial_box(
    before: np.ndarray, after: np.ndarray, ignore: Sequence[tuple[int, int, int, int]] = ()
) -> tuple[int, int, int, int] | None:
    """Like `changed_box`, leaving out changes narrower than THIN_CHANGE_PX (a caret's column blinking)."""
    mask = _changed(before, after, ignore).astype(np.uint8)
    wide = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((1, THIN_CHANGE_PX), np.uint8))
    return _box(wide.astype(bool))


def _changed(before: np.ndarray, after: np.ndarray, ignore: Sequence[tuple[int, int, int, int]]) -> np.ndarray:
    if before.shape != after.shape:
        raise ValueError(f"images of different sizes: {before.shape} and {after.shape}")
    difference = np.abs(before[:, :, :3].astype(np.int16) - after[:, :, :3].astype(np.int16)).max(axis=2)
    for left, top, width, height in ignore:
        difference[max(0, top) : max(0, top + height), max(0, left) : max(0, left + width)] = 0
    mask: np.ndarray = difference > CHANGE_LEVEL
    return mask


def _box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)


@dataclass(frozen=True, slots=True)
class EffectCheck:
    """Whether the step may be taken to have happened, and in words what was compared.

    `seen` False is evidence that it did not (the replay asks). `judged` False: the effect could not
    be judged fairly; `seen` is then True and `detail` says why (the replay says it and goes on)."""

    seen: bool
    detail: str
    judged: bool = True


@dataclass(frozen=True, slots=True)
class ActedOn:
    """What a step acted on, asked of the desktop just before it ran and again after.

    `window` is the window it clicked or typed into, as it was before (None: the desktop cannot be
    asked, the whole screen stands for it); `window_after` the same window after (None: it closed).
    `focus_before`/`focus_after` are the ids of the windows the keys went to (None: nowhere or not
    known); `nowhere` says why keys went nowhere when the step ran ("" when they went to a window)."""

    typing: bool
    window: DesktopWindow | None = None
    window_after: DesktopWindow | None = None
    focus_before: int | None = None
    focus_after: int | None = None
    nowhere: str = ""


def judge_effect(
    expect: ExpectedEffect,
    acted: ActedOn,
    before: ScreenFrame,
    after: ScreenFrame,
    target: tuple[int, int] | None = None,
    ignore: Sequence[Rect] = (),
) -> EffectCheck:
    """Did the replayed step do something, judged on what it acted on (see the module's docstring)?

    `target` is where the step's target was found (a click's recorded box moves with it)."""
    if not expect.changed:
        return EffectCheck(True, "no change was expected")
    if before.region != after.region:
        return EffectCheck(True, "the screen's size changed: the effect cannot be judged; going on", judged=False)
    own = [(r.left - before.region.left, r.top - before.region.top, r.width, r.height) for r in ignore]
    window = acted.window
    if window is not None and acted.window_after is None:
        return EffectCheck(True, f"{window.words()} closed")
    if window is not None and acted.window_after is not None and acted.window_after.rect != window.rect:
        return EffectCheck(
            True,
            f"{window.words()} moved or was resized while the step ran: its effect cannot be judged; going on",
            judged=False,
        )
    name = window.words() if window is not None else "the screen"
    inside = f"in {name}" if window is not None else "anywhere on the screen"
    area = _clip(window.rect if window is not None else before.region, before.region)
    if area is None:
        return EffectCheck(True, f"{name} is off the captured screen: its effect cannot be judged; going on", False)
    box = _change_in(before, after, area, own)
    if box is not None:
        role = "" if window is None else (", where it typed," if acted.typing else ", which it clicked,")
        return EffectCheck(True, f"{name}{role} changed ({box[2]}x{box[3]} at ({box[0]}, {box[1]}))")
    if acted.focus_after is not None and acted.focus_after != acted.focus_before:
        return EffectCheck(True, f"nothing changed {inside}, but the keyboard focus moved")
    if acted.typing:
        if window is not None and _repeats_when_scrolled(before, area):
            return EffectCheck(
                True,
                f"nothing changed in {name}, but it shows the same lines over and over: output that scrolls"
                " them looks the same; its effect cannot be judged; going on",
                judged=False,
            )
        if acted.nowhere:
            return EffectCheck(False, f"its keys went nowhere ({acted.nowhere}) and nothing changed on the screen")
        return EffectCheck(False, f"nothing changed {inside} after it typed there")
    return _quiet_click(expect, acted, before, after, target, own, inside)


def _quiet_click(
    expect: ExpectedEffect,
    acted: ActedOn,
    before: ScreenFrame,
    after: ScreenFrame,
    target: tuple[int, int] | None,
    own: list[tuple[int, int, int, int]],
    where: str,
) -> EffectCheck:
    """A click after which nothing changed in its window: enough, or evidence that it did not happen."""
    region = expect.region
    if region is not None and target is not None:
        recorded = Rect(
            region[0] + target[0] - REGION_MARGIN,
            region[1] + target[1] - REGION_MARGIN,
            region[2] + 2 * REGION_MARGIN,
            region[3] + 2 * REGION_MARGIN,
        )
        area = _clip(recorded, before.region)
        box = _change_in(before, after, area, own) if area is not None else None
        if box is not None:
            return EffectCheck(True, f"the screen changed where the recorded click changed it ({box[2]}x{box[3]})")
    if region is not None and region[2] * region[3] <= SMALL_EFFECT_AREA and region[3] <= SMALL_EFFECT_HEIGHT:
        return EffectCheck(
            True,
            f"no visible change {where}; the recorded click changed only {region[2]}x{region[3]} pixels"
            " (a focus ring, a caret), which a click on a focused field does not repeat",
        )
    window = acted.window
    if window is not None and acted.focus_before == window.id and acted.focus_after == window.id:
        return EffectCheck(
            True,
            f"no visible change {where}: it already had the keyboard focus, so a click that focuses it"
            " changes nothing; its effect cannot be judged; going on",
            judged=False,
        )
    size = f" ({region[2]}x{region[3]} when recorded)" if region is not None else ""
    return EffectCheck(
        False, f"nothing changed {where} after the click, where the recorded click changed the screen{size}"
    )


def _repeats_when_scrolled(frame: ScreenFrame, area: tuple[int, int, int, int]) -> bool:
    """Whether the lower two thirds of `area` (a terminal's last lines; its title bar left out) look the
    same scrolled up by some rows, the bottom rows (the prompt) aside: the same command run again
    then scrolls in output that leaves the window exactly as it was."""
    left, top, right, bottom = area
    top = top + (bottom - top) // 3
    grey = frame.pixels[top:bottom, left:right, :3].max(axis=2).astype(np.int16)
    height = grey.shape[0]
    for shift in range(MIN_SCROLL_PX, height // 3 + 1):
        kept, scrolled = grey[: height - 2 * shift], grey[shift : height - shift]
        if kept.shape[0] < 2 or int(np.abs(np.diff(kept, axis=0)).max()) <= CHANGE_LEVEL:
            continue  # every row alike (a blank window, its borders): no lines to compare
        if int(np.abs(kept - scrolled).max()) <= CHANGE_LEVEL:
            return True
    return False


def _clip(rect: Rect, screen: Rect) -> tuple[int, int, int, int] | None:
    """`rect` inside the frame, in the frame's pixels (left, top, right, bottom), or None if outside."""
    left, top = max(rect.left, screen.left) - screen.left, max(rect.top, screen.top) - screen.top
    right, bottom = min(rect.right, screen.right) - screen.left, min(rect.bottom, screen.bottom) - screen.top
    if right <= left or bottom <= top:
        return None
    return left, top, right, bottom


def _change_in(
    before: ScreenFrame, after: ScreenFrame, area: tuple[int, int, int, int], own: list[tuple[int, int, int, int]]
) -> tuple[int, int, int, int] | None:
    """The substantial change inside `area` (frame pixels), in screen pixels, or None."""
    left, top, right, bottom = area
    shifted = [(x - left, y - top, w, h) for x, y, w, h in own]
    box = substantial_box(before.pixels[top:bottom, left:right], after.pixels[top:bottom, left:right], shifted)
    if box is None:
        return None
    return box[0] + left + before.region.left, box[1] + top + before.region.top, box[2], box[3]
