"""The screenshot window: sliding (drop_block 1) or dropping old screenshots in blocks (append-only prompts)."""

from __future__ import annotations

import itertools

import pytest

from holodesk.automation.actions import Click, Point
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ImageBudget
from holodesk.inference.profiles.holotron import HolotronProfile
from holodesk.inference.profiles.prompting import screenshots_shown

from .test_holotron import frame


def test_sliding_window_shows_the_last_screenshots() -> None:
    budget = ImageBudget(keep_screenshots=3)
    assert [screenshots_shown(n, budget) for n in range(1, 8)] == [1, 2, 3, 3, 3, 3, 3]


def test_block_window_fills_up_then_drops_a_block() -> None:
    budget = ImageBudget(keep_screenshots=4, drop_block=3)
    assert [screenshots_shown(n, budget) for n in range(1, 11)] == [1, 2, 3, 4, 2, 3, 4, 2, 3, 4]


def test_drop_block_is_bounded_by_the_window() -> None:
    with pytest.raises(ValueError, match="drop_block"):
        ImageBudget(keep_screenshots=3, drop_block=4)


def test_with_blocks_the_conversation_only_grows_at_its_end_between_drops() -> None:
    profile = HolotronProfile(ImageBudget(keep_screenshots=4, drop_block=3))
    shots = [profile.prepare_image(frame(320 + n, 200)) for n in range(9)]
    history = [PastStep(Click(Point(10 * n, 20)), thought=f"step {n}") for n in range(8)]
    requests = [profile.navigation_request("task", history[:n], shots[: n + 1]) for n in range(9)]
    appended = [
        later.messages[: len(earlier.messages)] == earlier.messages
        and later.images[: len(earlier.images)] == earlier.images
        for earlier, later in itertools.pairwise(requests)
    ]
    # Steps 1-4 grow, step 5 drops a block (3 screenshots become placeholders), 6-7 grow, 8 drops.
    assert appended == [True, True, True, False, True, True, False, True]
    assert [len(r.images) for r in requests] == [1, 2, 3, 4, 2, 3, 4, 2, 3]
