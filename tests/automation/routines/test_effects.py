"""Judging a replayed step's effect on drawn frames: what counts as a change, in which window, and
what cannot be judged (said, not a stop)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from holodesk.automation.coords import Rect
from holodesk.automation.routines.effects import ActedOn, judge_effect
from holodesk.automation.routines.routine_file import ExpectedEffect
from holodesk.automation.routines.windows import DesktopWindow
from holodesk.automation.screen import ScreenFrame, frame_from_image

SIZE = (400, 300)
TERMINAL = DesktopWindow(7, Rect(200, 150, 180, 120), "bash")
TYPED = ExpectedEffect(True, (10, 10, 120, 14))  # recorded where the prompt was, far from the moved window


def frame(*marks: tuple[int, int, int, int]) -> ScreenFrame:
    """A grey screen with black boxes (left, top, width, height)."""
    pixels = np.full((SIZE[1], SIZE[0], 3), 200, dtype=np.uint8)
    for left, top, width, height in marks:
        pixels[top : top + height, left : left + width] = 0
    return frame_from_image(Image.fromarray(pixels))


def test_typing_is_seen_wherever_it_lands_in_its_window_and_not_elsewhere():
    typed = judge_effect(TYPED, ActedOn(True, TERMINAL, TERMINAL), frame(), frame((210, 250, 60, 9)))
    assert typed.seen and typed.judged and "'bash'" in typed.detail and "where it typed" in typed.detail
    outside = judge_effect(TYPED, ActedOn(True, TERMINAL, TERMINAL), frame(), frame((20, 20, 60, 9)))
    assert not outside.seen and outside.detail.startswith("nothing changed in the window 'bash'")


def test_a_caret_column_blinking_is_not_an_effect():
    blink = judge_effect(TYPED, ActedOn(True, TERMINAL, TERMINAL), frame(), frame((240, 200, 2, 16)))
    assert not blink.seen
    glyph = judge_effect(TYPED, ActedOn(True, TERMINAL, TERMINAL), frame(), frame((240, 200, 3, 16)))
    assert glyph.seen


def test_keys_that_went_nowhere_and_changed_nothing_are_flagged_in_words():
    check = judge_effect(TYPED, ActedOn(True, nowhere="no window has the keyboard focus"), frame(), frame())
    assert not check.seen and "its keys went nowhere (no window has the keyboard focus)" in check.detail


def test_a_window_moved_while_the_step_ran_cannot_be_judged_and_is_said():
    moved = DesktopWindow(7, Rect(220, 150, 180, 120), "bash")
    check = judge_effect(TYPED, ActedOn(True, TERMINAL, moved), frame(), frame())
    assert check.seen and not check.judged and "moved or was resized while the step ran" in check.detail


def test_a_click_with_a_small_recorded_effect_may_change_nothing_a_large_one_may_not():
    small = ExpectedEffect(True, (-5, -8, 10, 16))  # a terminal's cursor filling in
    large = ExpectedEffect(True, (-150, -100, 300, 200))  # a dialog opening
    acted = ActedOn(False, TERMINAL, TERMINAL)
    assert judge_effect(small, acted, frame(), frame(), target=(290, 210)).seen
    check = judge_effect(large, acted, frame(), frame(), target=(290, 210))
    assert not check.seen and "after the click" in check.detail


def test_a_quiet_click_on_the_window_that_had_the_focus_is_said_and_passed_over():
    large = ExpectedEffect(True, (-150, -100, 300, 200))
    acted = ActedOn(False, TERMINAL, TERMINAL, focus_before=TERMINAL.id, focus_after=TERMINAL.id)
    check = judge_effect(large, acted, frame(), frame(), target=(290, 210))
    assert check.seen and not check.judged and "already had the keyboard focus" in check.detail


def test_a_click_that_moved_the_focus_did_something():
    large = ExpectedEffect(True, (-150, -100, 300, 200))
    acted = ActedOn(False, TERMINAL, TERMINAL, focus_before=3, focus_after=TERMINAL.id)
    check = judge_effect(large, acted, frame(), frame(), target=(290, 210))
    assert check.seen and check.judged and "keyboard focus moved" in check.detail


def terminal_lines(widths: list[int]) -> list[tuple[int, int, int, int]]:
    """Lines of 'text' (boxes 8 px high, 13 px apart) down the terminal, and a prompt at its bottom."""
    lines = [(210, 152 + 13 * row, width, 8) for row, width in enumerate(widths)]
    return [*lines, (210, 152 + 13 * len(widths), 10, 8)]


def test_the_same_lines_over_and_over_cannot_be_judged_and_are_passed_over_in_words():
    """The same command run again in a full terminal scrolls in output identical to what was there."""
    same = frame(*terminal_lines([100, 60] * 4))
    check = judge_effect(TYPED, ActedOn(True, TERMINAL, TERMINAL), same, same)
    assert check.seen and not check.judged and "the same lines over and over" in check.detail
    different = frame(*terminal_lines([100, 60, 90, 30, 120, 70, 40, 110]))
    assert not judge_effect(TYPED, ActedOn(True, TERMINAL, TERMINAL), different, different).seen
