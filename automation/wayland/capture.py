"""The Wayland frame source: ScreenCapture's interface over the portal's PipeWire streams.

`grab(monitor)` returns the newest frame of that monitor's stream as a ScreenFrame in physical
pixels; `grab(None)` pastes every monitor's newest frame onto the virtual desktop (black between
monitors). Starting the portal session (and its dialog) happens on the first call.

Holodesk's own windows (overlay, approval panel, thinking status) are hidden before each grab, but the
stream's newest picture may predate the hide: `require_frame_after` (automation.fresh_frames) makes
the next grab wait for a picture of the affected monitors that arrived after the hide, bounded by
`repaint_timeout_s`, and refuse to return an older one. A picture arriving within a few
milliseconds of the hide was seen still showing the overlay (painted before mutter had the unmap,
delivered after; mutter then sends the next one a frame interval later): so the grab also waits
until the stream has been quiet for `repaint_quiet_s` (at most `repaint_settle_s` on a screen that
never stops changing, where the newest picture is then well past the hide).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from holodesk.automation.coords import Monitor, Rect, virtual_desktop
from holodesk.automation.errors import CaptureError
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.wayland.session import StreamMonitor, WaylandSession


class WaylandCapture:
    """Lists monitors and grabs frames from a WaylandSession (shared with the executor)."""

    def __init__(
        self,
        session: WaylandSession,
        frame_timeout_s: float = 5.0,
        input_frame_wait_s: float = 0.5,
        repaint_timeout_s: float = 2.0,
        repaint_quiet_s: float = 0.08,
        repaint_settle_s: float = 0.4,
    ) -> None:
        self.session = session
        self._frame_timeout_s = frame_timeout_s
        self._repaint_timeout_s = repaint_timeout_s
        self._repaint_quiet_s = repaint_quiet_s
        self._repaint_settle_s = repaint_settle_s
        # Monitor index -> the moment after which its next picture must have arrived.
        self._fresh_after: dict[int, float] = {}
        self._fresh_lock = threading.Lock()
        # Mutter delivers the frame showing an action's effect ~100 ms later (bench.wayland), so a
        # grab right after input would return the old picture and the engine's settle check could
        # call it settled. A grab waits up to this long for a frame newer than the last input.
        self._input_frame_wait_s = input_frame_wait_s

    def _stream_monitors(self) -> tuple[StreamMonitor, ...]:
        return self.session.started()[1]

    def monitors(self) -> list[Monitor]:
        return [entry.monitor for entry in self._stream_monitors()]

    def require_frame_after(self, moment: float, areas: Sequence[Rect]) -> None:
        """Holodesk changed `areas` (screen space) at `moment`: the next grab of a monitor they touch
        uses only a picture that arrived after it (see the module docstring)."""
        if not self.session.is_started:
            return  # no picture yet: the first one comes after the session starts, after `moment`
        touched = [
            entry.monitor.index
            for entry in self._stream_monitors()
            if any(_overlaps(area, entry.monitor.rect) for area in areas)
        ]
        with self._fresh_lock:
            for index in touched:
                self._fresh_after[index] = max(moment, self._fresh_after.get(index, 0.0))

    def _wait_until_fresh(self, entry: StreamMonitor) -> None:
        index = entry.monitor.index
        with self._fresh_lock:
            moment = self._fresh_after.get(index)
        if moment is None:
            return
        with self._fresh_lock:  # the requirement is for this grab, whether it succeeds or not
            if self._fresh_after.get(index) == moment:
                del self._fresh_after[index]
        if not entry.frames.wait_for_frame_since(moment, self._repaint_timeout_s):
            raise CaptureError(
                f"the desktop sent no new picture of monitor {index} within {self._repaint_timeout_s:g} s after "
                "Holodesk hid its windows, so the newest one may still show them; the screenshot was not "
                "taken (a busy or stalled compositor: try again)"
            )
        entry.frames.wait_for_quiet(self._repaint_quiet_s, until=moment + self._repaint_settle_s)

    def grab_monitor(self, index: int) -> ScreenFrame:
        entries = self._stream_monitors()
        if not 1 <= index <= len(entries):
            raise CaptureError(f"there is no monitor {index}; the shared screens are {len(entries)}")
        entry = entries[index - 1]
        self._wait_until_fresh(entry)
        last_input = self.session.last_input_at
        if last_input:
            remaining = last_input + self._input_frame_wait_s - time.monotonic()
            if remaining > 0:
                entry.frames.wait_for_frame_since(last_input, remaining)
        pixels, _arrived_at = entry.frames.latest(self._frame_timeout_s)
        monitors = tuple(item.monitor for item in entries)
        rect = entry.monitor.rect
        if (pixels.shape[1], pixels.shape[0]) != (rect.width, rect.height):
            # The monitor was resized (or rescaled) since the session started.
            raise CaptureError(
                f"the shared screen is now {pixels.shape[1]}x{pixels.shape[0]}, not {rect.width}x{rect.height}: "
                "restart the task to pick up the new size"
            )
        # The newest frame is the current picture (mutter sends one only on change): it is taken now.
        return ScreenFrame(pixels, rect, entry.monitor, monitors, captured_at=time.monotonic())

    def grab_desktop(self) -> ScreenFrame:
        entries = self._stream_monitors()
        if len(entries) == 1:
            frame = self.grab_monitor(1)
            return ScreenFrame(frame.pixels, frame.region, None, frame.monitors, captured_at=frame.captured_at)
        monitors = tuple(item.monitor for item in entries)
        desktop = virtual_desktop(monitors)
        canvas = np.zeros((desktop.height, desktop.width, 4), dtype=np.uint8)
        oldest = time.monotonic()
        for index in range(1, len(entries) + 1):
            frame = self.grab_monitor(index)
            top = frame.region.top - desktop.top
            left = frame.region.left - desktop.left
            canvas[top : top + frame.height, left : left + frame.width] = frame.pixels
            oldest = min(oldest, frame.captured_at)
        return ScreenFrame(canvas, desktop, None, monitors, captured_at=oldest)

    def grab(self, monitor: int | None) -> ScreenFrame:
        """`grab_monitor(monitor)`, or the whole desktop when `monitor` is None."""
        return self.grab_desktop() if monitor is None else self.grab_monitor(monitor)

    def close(self) -> None:
        self.session.close()


def _overlaps(a: Rect, b: Rect) -> bool:
    return a.left < b.right and b.left < a.right and a.top < b.bottom and b.top < a.bottom
