"""The newest frame of a screen-cast stream, when it arrived, and when the picture last changed.

Mutter sends a frame when the screen changes, but not only then: frames identical to the one before
arrive too (seen in bursts of four within 85 ms on headless GNOME). So "a frame arrived after the
input" does not mean "the picture after the input"; `wait_for_change_since` waits for a frame whose
pixels differ from the one before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from holodesk.automation.errors import CaptureError


class NewestFrame:
    """Keeps the newest frame a stream delivered (`put`, from its thread) for waiting readers."""

    def __init__(self, name: str) -> None:
        self.name = name  # how a "no frame" error names the stream
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._latest: np.ndarray | None = None
        self._latest_at = 0.0
        self._changed_at = 0.0  # arrival of the newest frame whose pixels differ from the one before
        self._frames = 0

    def put(self, pixels: np.ndarray) -> None:
        """A new frame (HxWx4 BGRx) arrived now."""
        previous = self._latest  # only this (the stream's) thread replaces it
        changed = previous is None or not np.array_equal(previous, pixels)
        with self._arrived:
            self._latest = pixels
            self._latest_at = time.monotonic()
            if changed:
                self._changed_at = self._latest_at
            self._frames += 1
            self._arrived.notify_all()

    def source_error(self) -> str:
        """Why frames may not be coming (for the "no frame" error); "" when nothing is known."""
        return ""

    def close(self) -> None:
        """Stop the source feeding this stream; the bookkeeping alone has none to stop."""

    @property
    def frames_received(self) -> int:
        with self._lock:
            return self._frames

    def latest(self, timeout_s: float = 5.0) -> tuple[np.ndarray, float]:
        """The newest frame (HxWx4 BGRx) and when it arrived; waits up to `timeout_s` for the first."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while self._latest is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    error = self.source_error()
                    raise CaptureError(
                        f"no frame from {self.name} within {timeout_s:g} s" + (f": {error}" if error else "")
                    )
                self._arrived.wait(min(remaining, 0.1))
            return self._latest, self._latest_at

    def wait_for_frame_after(self, count: int, timeout_s: float) -> bool:
        """Wait until more than `count` frames have arrived; False on timeout."""
        return self._wait_until(lambda: self._frames > count, timeout_s)

    def wait_for_frame_since(self, moment: float, timeout_s: float) -> bool:
        """Wait until a frame newer than `moment` (time.monotonic()) arrived; False on timeout."""
        return self._wait_until(lambda: self._latest_at > moment, timeout_s)

    def wait_for_change_since(self, moment: float, timeout_s: float) -> bool:
        """Wait until a frame that differs from the one before it arrived after `moment`; False on timeout."""
        return self._wait_until(lambda: self._changed_at > moment, timeout_s)

    def wait_for_input_effect(self, began: float, ended: float, until: float, late_s: float) -> bool:
        """Wait for a picture that can show the effect of input sent from `began` to `ended`; False if none came.

        A changed picture after `ended` shows it. One that arrived while the input was being sent (the
        desktop can paint a click's effect before the sender returns) shows at least part of it: then a
        later change is awaited only up to `late_s` after `ended`, not up to `until` (time.monotonic()),
        so a quick desktop does not cost the whole bound at every grab.
        """
        if not self._wait_until(lambda: self._changed_at > began, until - time.monotonic()):
            return False
        with self._lock:
            changed_during_input = self._changed_at <= ended
        if changed_during_input:
            self._wait_until(lambda: self._changed_at > ended, min(until, ended + late_s) - time.monotonic())
        return True

    def _wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while not condition():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._arrived.wait(remaining)
            return True

    def wait_for_quiet(self, quiet_s: float, until: float) -> None:
        """Wait until no frame has arrived for `quiet_s`, or until `until` (time.monotonic()).

        A picture that arrives just after a change can have been painted just before it; mutter
        limits a stream's frame rate and sends the newer picture one interval later, so the newest
        picture once the stream falls quiet is the one that shows the change.
        """
        with self._arrived:
            while True:
                now = time.monotonic()
                quiet_left = self._latest_at + quiet_s - now
                if quiet_left <= 0 or now >= until:
                    return
                self._arrived.wait(min(quiet_left, until - now))


Frames = TypeVar("Frames", bound=NewestFrame)


def first_frame_reopening_once(open_frames: Callable[[], Frames], timeout_s: float) -> tuple[Frames, np.ndarray]:
    """An opened stream and its first frame, within `timeout_s` in all.

    A stream with no frame after half the time is closed and opened once more for the rest, which is
    negotiated afresh: on headless GNOME a stream now and then never sent a first frame (twice in about
    ten fresh runs of the test suite), the screen unchanged and nothing in any log. CaptureError when
    neither gave a frame, saying both were tried; a stream that gave none is closed (Ctrl+C too).
    """
    deadline = time.monotonic() + timeout_s
    frames = open_frames()
    try:
        return frames, _first_or_closed(frames, timeout_s / 2)
    except CaptureError as first:
        frames = open_frames()
        try:
            return frames, _first_or_closed(frames, max(0.0, deadline - time.monotonic()))
        except CaptureError as second:
            raise CaptureError(
                f"{second}, and none in the {timeout_s / 2:g} s before it was opened again ({first})"
            ) from second


def _first_or_closed(frames: NewestFrame, timeout_s: float) -> np.ndarray:
    """The stream's first frame within `timeout_s`; the stream closed when none came (or the wait was cut)."""
    try:
        return frames.latest(timeout_s)[0]
    except BaseException:  # no frame, or Ctrl+C while waiting: nothing left open; re-raised
        frames.close()
        raise
