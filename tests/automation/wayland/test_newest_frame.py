"""NewestFrame: a frame identical to the one before it does not count as the picture changing."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from holodesk.automation.errors import CaptureError
from holodesk.automation.wayland.newest_frame import NewestFrame, first_frame_reopening_once


def picture(value: int) -> np.ndarray:
    return np.full((6, 8, 4), value, dtype=np.uint8)


def test_an_identical_frame_arrives_but_is_no_change() -> None:
    frames = NewestFrame("a test stream")
    frames.put(picture(1))
    moment = time.monotonic()
    frames.put(picture(1))  # mutter re-sends the same picture, as it does in bursts
    assert frames.wait_for_frame_since(moment, 0.05)
    assert not frames.wait_for_change_since(moment, 0.05)
    assert frames.frames_received == 2
    frames.put(picture(2))
    assert frames.wait_for_change_since(moment, 0.0)
    pixels, _arrived_at = frames.latest(0.0)
    assert int(pixels[0, 0, 0]) == 2


def test_a_waiter_wakes_on_the_changed_frame_not_on_the_repeat() -> None:
    frames = NewestFrame("a test stream")
    frames.put(picture(1))
    moment = time.monotonic()
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(frames.wait_for_change_since(moment, 30.0)))
    waiter.start()
    frames.put(picture(1))
    waiter.join(0.2)
    assert waiter.is_alive(), "the wait ended on a frame identical to the one before it"
    frames.put(picture(3))
    waiter.join(10.0)
    assert results == [True]


def _waiting_for_effect(
    frames: NewestFrame, began: float, ended: float, until: float, late_s: float
) -> tuple[threading.Thread, list[bool]]:
    """A thread already waiting in `wait_for_input_effect`, and the list its answer will be put in."""
    results: list[bool] = []
    waiter = threading.Thread(
        target=lambda: results.append(frames.wait_for_input_effect(began, ended, until=until, late_s=late_s))
    )
    waiter.start()
    return waiter, results


def test_a_change_painted_while_the_input_was_sent_does_not_cost_the_whole_bound() -> None:
    """The desktop can paint a click's effect before the sender returns: that picture counts (CI waited 3 s)."""
    frames = NewestFrame("a test stream")
    frames.put(picture(1))
    began = time.monotonic()
    frames.put(picture(2))  # painted during the input
    ended = time.monotonic()
    waiter, results = _waiting_for_effect(frames, began, ended, until=ended + 60.0, late_s=0.05)
    waiter.join(10.0)
    assert results == [True], "the wait for the input's picture ran on to its bound"


def test_after_a_change_during_the_input_a_later_change_is_awaited_and_used() -> None:
    """A picture from halfway through typing is followed by the finished one: the wait takes the latter."""
    frames = NewestFrame("a test stream")
    frames.put(picture(1))
    began = time.monotonic()
    frames.put(picture(2))  # half the text
    ended = time.monotonic()
    waiter, results = _waiting_for_effect(frames, began, ended, until=ended + 60.0, late_s=30.0)
    waiter.join(0.2)
    assert waiter.is_alive(), "the wait ended on a picture painted while the input was still being sent"
    frames.put(picture(3))
    waiter.join(10.0)
    assert results == [True]
    assert int(frames.latest(0.0)[0][0, 0, 0]) == 3


def test_a_change_before_the_input_began_is_not_its_effect() -> None:
    frames = NewestFrame("a test stream")
    frames.put(picture(1))
    frames.put(picture(2))
    began = time.monotonic()
    assert not frames.wait_for_input_effect(began, began, until=time.monotonic() + 0.1, late_s=0.05)
    waiter, results = _waiting_for_effect(frames, began, began, until=began + 60.0, late_s=0.05)
    waiter.join(0.2)
    assert waiter.is_alive(), "a picture from before the input was taken for its effect"
    frames.put(picture(4))
    waiter.join(10.0)
    assert results == [True]


def test_the_first_frame_is_a_change_and_no_frame_is_an_error_that_names_the_stream() -> None:
    frames = NewestFrame("PipeWire node 42")
    with pytest.raises(CaptureError, match=re.escape("no frame from PipeWire node 42 within 0.05 s")):
        frames.latest(0.05)
    moment = time.monotonic()
    frames.put(picture(0))
    assert frames.wait_for_change_since(moment, 0.0)


class Opened(NewestFrame):
    """A stream as the session opens it: its frames come from a timer thread (or never); `close` is noted."""

    def __init__(self, name: str, first_frame_after_s: float | None) -> None:
        super().__init__(name)
        self.closed = False
        if first_frame_after_s is not None:
            timer = threading.Timer(first_frame_after_s, lambda: self.put(picture(7)))
            timer.daemon = True
            timer.start()

    def close(self) -> None:
        self.closed = True


def opener(first_frames_after_s: list[float | None]) -> tuple[list[Opened], Callable[[], Opened]]:
    opened: list[Opened] = []

    def open_frames() -> Opened:
        opened.append(Opened(f"stream {len(opened) + 1}", first_frames_after_s[len(opened)]))
        return opened[-1]

    return opened, open_frames


def test_a_stream_with_no_first_frame_is_opened_again_and_its_frame_used() -> None:
    opened, open_frames = opener([None, 0.05])
    started = time.monotonic()
    frames, pixels = first_frame_reopening_once(open_frames, 2.0)
    assert frames is opened[1] and int(pixels[0, 0, 0]) == 7
    assert opened[0].closed and not opened[1].closed
    assert 0.9 < time.monotonic() - started < 1.9  # half the time on the silent stream, then its frame


def test_a_stream_whose_first_frame_comes_in_time_is_not_opened_again() -> None:
    opened, open_frames = opener([0.2, 0.0])
    frames, _pixels = first_frame_reopening_once(open_frames, 2.0)
    assert frames is opened[0] and len(opened) == 1 and not frames.closed


def test_two_silent_streams_end_in_one_error_within_the_time_both_closed() -> None:
    opened, open_frames = opener([None, None])
    started = time.monotonic()
    with pytest.raises(CaptureError, match=r"no frame from stream 2 .*none in the 0\.5 s before it was opened again"):
        first_frame_reopening_once(open_frames, 1.0)
    assert time.monotonic() - started < 1.5
    assert [stream.closed for stream in opened] == [True, True]
