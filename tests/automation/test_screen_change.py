"""Fingerprints tell changed screens from unchanged ones; settling waits for two equal grabs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from holodesk.automation.actions import Click, Point
from holodesk.automation.loop_guard import LoopGuard
from holodesk.automation.screen_change import fingerprint, wait_for_settle
from tests.automation.frames import solid_frame, with_box


def test_identical_frames_look_alike_and_a_visible_change_does_not():
    base = solid_frame(1366, 768)
    assert fingerprint(base).looks_like(fingerprint(solid_frame(1366, 768)))
    dialog = with_box(base, 400, 300, 120, (250, 250, 250))
    assert not fingerprint(base).looks_like(fingerprint(dialog))


def test_frames_of_different_regions_never_look_alike():
    assert not fingerprint(solid_frame(320, 200)).looks_like(fingerprint(solid_frame(320, 200, left=320)))


def test_settle_returns_once_two_grabs_agree():
    frames = iter([solid_frame(colour=(1, 1, 1)), solid_frame(colour=(2, 2, 2)), solid_frame(colour=(3, 3, 3))])
    last = solid_frame(colour=(3, 3, 3))
    grabs = itertools.chain(frames, itertools.repeat(last))
    sleeps: list[float] = []
    frame, settled = wait_for_settle(lambda: next(grabs), timeout_s=5, poll_s=0.01, sleep=sleeps.append)
    assert settled
    assert frame.pixel_rgb(0, 0) == (3, 3, 3)
    assert len(sleeps) == 3  # grabs 1->2 differ, 2->3 differ, 3->3 agree


def test_each_candidate_is_offered_before_its_wait_and_the_settled_one_is_returned():
    grabbed = [solid_frame(colour=(1, 1, 1)), solid_frame(colour=(2, 2, 2)), solid_frame(colour=(2, 2, 2))]
    grabs = iter(grabbed)
    timeline: list[str] = []
    offered: list[object] = []

    def offer(frame):  # type: ignore[no-untyped-def]
        timeline.append("offer")
        offered.append(frame)

    frame, settled = wait_for_settle(
        lambda: next(grabs), timeout_s=5, poll_s=0.01, sleep=lambda _s: timeline.append("wait"), on_candidate=offer
    )
    assert settled
    assert timeline == ["offer", "wait", "offer", "wait"]
    # The frame returned is the candidate already offered (same pixels as the grab that confirmed it).
    assert frame is grabbed[1] and offered == [grabbed[0], grabbed[1]]


def test_settle_gives_up_after_the_timeout_on_a_changing_screen():
    counter = itertools.count()
    frame, settled = wait_for_settle(
        lambda: solid_frame(colour=(next(counter) % 256, 0, 0)), timeout_s=0.05, poll_s=0.005
    )
    assert not settled
    assert frame.pixel_rgb(0, 0)[0] > 0


def test_loop_guard_fires_on_the_third_identical_action_on_an_unchanged_screen():
    guard = LoopGuard(3)
    screen = fingerprint(solid_frame())
    click = Click(Point(10, 10))
    assert not guard.observe(click, screen)
    assert not guard.observe(click, screen)
    assert guard.observe(click, screen)


def test_loop_guard_resets_when_the_screen_or_the_action_changes():
    guard = LoopGuard(3)
    screen = fingerprint(solid_frame())
    changed = fingerprint(with_box(solid_frame(), 10, 10, 50, (255, 255, 255)))
    click = Click(Point(10, 10))
    guard.observe(click, screen)
    guard.observe(click, screen)
    assert not guard.observe(click, changed)  # the screen changed: the click did something
    assert not guard.observe(Click(Point(11, 10)), changed)
    guard.observe(Click(Point(11, 10)), changed)
    guard.reset()
    assert not guard.observe(Click(Point(11, 10)), changed)


def test_loop_guard_given_frames_fires_like_with_fingerprints_and_tells_changed_screens_apart():
    guard = LoopGuard(3)
    click = Click(Point(10, 10))
    # New frame objects with the same pixels each time, as the engine's grabs are.
    assert not guard.observe(click, solid_frame())
    assert not guard.observe(click, solid_frame())
    assert guard.observe(click, solid_frame())
    guard.reset()
    guard.observe(click, solid_frame())
    guard.observe(click, solid_frame())
    assert not guard.observe(click, with_box(solid_frame(), 10, 10, 50, (255, 255, 255)))


def test_a_fingerprint_of_a_small_frame_has_at_most_one_cell_per_sampled_pixel():
    tiny = solid_frame(7, 5, (10, 20, 30))
    cells = fingerprint(tiny).cells
    assert cells.shape == (2, 2)
    assert np.allclose(cells, 20.0)
    assert fingerprint(tiny).looks_like(fingerprint(solid_frame(7, 5, (10, 20, 30))))


def test_settle_waits_one_poll_from_the_start_of_one_grab_to_the_start_of_the_next():
    now = [0.0]
    frames = iter([solid_frame(colour=(1, 1, 1)), solid_frame(colour=(2, 2, 2)), solid_frame(colour=(2, 2, 2))])

    def grab():  # type: ignore[no-untyped-def]
        now[0] += 0.004  # each grab takes 4 ms
        return next(frames)

    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    frame, settled = wait_for_settle(grab, timeout_s=5, poll_s=0.01, sleep=sleep, clock=lambda: now[0])
    assert settled and frame.pixel_rgb(0, 0) == (2, 2, 2)
    assert sleeps == pytest.approx([0.006, 0.006])  # the grab's own 4 ms count towards the 10 ms poll
