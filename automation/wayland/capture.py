"""The Wayland frame source: ScreenCapture's interface over the portal's PipeWire streams.

`grab(monitor)` returns the newest frame of that monitor's stream as a ScreenFrame in physical
pixels; `grab(None)` pastes every monitor's newest frame onto the virtual desktop (black between
monitors). Starting the portal session (and its dialog) happens on the first call.
"""

from __future__ import annotations

import time

import numpy as np

from holodesk.automation.coords import Monitor, virtual_desktop
from holodesk.automation.errors import CaptureError
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.wayland.session import StreamMonitor, WaylandSession


class WaylandCapture:
    """Lists monitors and grabs frames from a WaylandSession (shared with the executor)."""

    def __init__(self, session: WaylandSession, frame_timeout_s: float = 5.0, input_frame_wait_s: float = 0.5) -> None:
        self.session = session
        self._frame_timeout_s = frame_timeout_s
        # Mutter delivers the frame showing an action's effect ~100 ms later (bench.wayland), so a
        # grab right after input would return the old picture and the engine's settle check could
        # call it settled. A grab waits up to this long for a frame newer than the last input.
        self._input_frame_wait_s = input_frame_wait_s

    def _stream_monitors(self) -> tuple[StreamMonitor, ...]:
        return self.session.started()[1]

    def monitors(self) -> list[Monitor]:
        return [entry.monitor for entry in self._stream_monitors()]

    def grab_monitor(self, index: int) -> ScreenFrame:
        entries = self._stream_monitors()
        if not 1 <= index <= len(entries):
            raise CaptureError(f"there is no monitor {index}; the shared screens are {len(entries)}")
        entry = entries[index - 1]
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
