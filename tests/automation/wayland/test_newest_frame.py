"""NewestFrame: a frame identical to the one before it does not count as the picture changing."""

from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest

from holodesk.automation.errors import CaptureError
from holodesk.automation.wayland.newest_frame import NewestFrame


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


def test_the_first_frame_is_a_change_and_no_frame_is_an_error_that_names_the_stream() -> None:
    frames = NewestFrame("PipeWire node 42")
    with pytest.raises(CaptureError, match=re.escape("no frame from PipeWire node 42 within 0.05 s")):
        frames.latest(0.05)
    moment = time.monotonic()
    frames.put(picture(0))
    assert frames.wait_for_change_since(moment, 0.0)
