"""The Wayland frame source: ScreenCapture's interface over the portal's PipeWire streams.

`grab(monitor)` returns the newest frame of that monitor's stream as a ScreenFrame in physical
pixels; `grab(None)` pastes every monitor's newest frame onto the virtual desktop (black between
monitors). Starting the portal session (and its dialog) happens on the first call.

Holodesk's own windows (overlay, approval panel, thinking status) are hidden before each grab, but the
stream's newest picture may predate the hide: `require_frame_after` (automation.fresh_frames) makes
the next grab wait for a picture of the affected monitors that arrived after the hide, bounded by
`repaint_timeout_s`, and refuse to return an older one. Arrival alone is not enough: XWayland commits
an unmap to mutter after the X round trip returns, and a picture arriving 23 ms after the hide was
seen still showing the overlay. So the grab also looks for each hidden window's traced pixels in the
picture and waits for the next one while a window still shows (same bound, then a CaptureError). A
hidden window without a usable trace (nothing opaque on that monitor) falls back on timing: the grab
waits until the stream has been quiet for `repaint_quiet_s` (at most `repaint_settle_s` after the hide).

The requirements describe the screen just before the next grab, so that grab takes all of them,
whichever monitors it reads: a requirement left for another monitor would outlive the hide.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from holodesk.automation.coords import Monitor, Rect, virtual_desktop
from holodesk.automation.errors import CaptureError
from holodesk.automation.fresh_frames import WindowTrace, is_traceable, windows_still_shown
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.wayland.session import StreamMonitor, WaylandSession


@dataclass
class _Requirement:
    """What a monitor's next picture must reflect: the hides since the last grab."""

    moment: float  # the latest hide (time.monotonic())
    hidden_areas: int = 0  # how many hidden windows' areas touch the monitor
    traces: list[WindowTrace] = field(default_factory=list)


class WaylandCapture:
    """Lists monitors and grabs frames from a WaylandSession (shared with the portal input backend)."""

    def __init__(
        self,
        session: WaylandSession,
        frame_timeout_s: float = 5.0,
        input_frame_wait_s: float = 0.5,
        input_late_frame_s: float = 0.2,
        repaint_timeout_s: float = 2.0,
        repaint_quiet_s: float = 0.08,
        repaint_settle_s: float = 0.4,
    ) -> None:
        self.session = session
        self._frame_timeout_s = frame_timeout_s
        self._repaint_timeout_s = repaint_timeout_s
        self._repaint_quiet_s = repaint_quiet_s
        self._repaint_settle_s = repaint_settle_s
        # Monitor index -> what its next picture must reflect.
        self._required: dict[int, _Requirement] = {}
        self._required_lock = threading.Lock()
        # Mutter delivers the frame showing an action's effect ~100 ms later (bench.wayland), so a
        # grab right after input would return the old picture and the engine's settle check could
        # call it settled. A grab waits up to this long for a changed picture newer than the last
        # input (a frame identical to the one before it, which mutter also sends, shows no effect).
        self._input_frame_wait_s = input_frame_wait_s
        # A change painted while the input was still being sent may show only part of it (half the
        # text typed); the rest follows within one delivery (~100 ms), so a later change is awaited this long.
        self._input_late_frame_s = input_late_frame_s

    def _stream_monitors(self) -> tuple[StreamMonitor, ...]:
        return self.session.started()[1]

    def monitors(self) -> list[Monitor]:
        return [entry.monitor for entry in self._stream_monitors()]

    def require_frame_after(self, moment: float, areas: Sequence[Rect], traces: Sequence[WindowTrace] = ()) -> None:
        """Holodesk hid windows in `areas` (screen space) at `moment`: the next grab of a monitor they
        touch uses only a picture that arrived after it and shows none of `traces` (see the module
        docstring)."""
        if not self.session.is_started:
            return  # no picture yet: the first one comes after the session starts, after `moment`
        with self._required_lock:
            for entry in self._stream_monitors():
                rect = entry.monitor.rect
                touching = sum(1 for area in areas if _overlaps(area, rect))
                if not touching:
                    continue
                required = self._required.setdefault(entry.monitor.index, _Requirement(moment))
                required.moment = max(moment, required.moment)
                required.hidden_areas += touching
                required.traces.extend(trace for trace in traces if _overlaps(trace.area, rect))

    def _take_requirements(self) -> dict[int, _Requirement]:
        with self._required_lock:  # for this grab, whether it succeeds or not
            required, self._required = self._required, {}
        return required

    def _wait_until_fresh(self, entry: StreamMonitor, required: _Requirement | None) -> None:
        if required is None:
            return
        index = entry.monitor.index
        deadline = time.monotonic() + self._repaint_timeout_s
        if not entry.frames.wait_for_frame_since(required.moment, self._repaint_timeout_s):
            raise CaptureError(
                f"the desktop sent no new picture of monitor {index} within {self._repaint_timeout_s:g} s after "
                "Holodesk hid its windows, so the newest one may still show them; the screenshot was not "
                "taken (a busy or stalled compositor: try again)"
            )
        region = entry.monitor.rect
        traced = [trace for trace in required.traces if is_traceable(trace, region)]
        if len(traced) < required.hidden_areas:  # a window only timing can vouch for
            entry.frames.wait_for_quiet(self._repaint_quiet_s, until=required.moment + self._repaint_settle_s)
        pixels, arrived_at = entry.frames.latest(self._frame_timeout_s)
        while traced:
            shown = windows_still_shown(pixels, region, traced) if pixels.shape[:2] == _size(region) else []
            if not shown:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not entry.frames.wait_for_frame_since(arrived_at, remaining):
                names = ", ".join(sorted({trace.window for trace in shown}))
                raise CaptureError(
                    f"the desktop's newest picture of monitor {index} still showed Holodesk's own windows "
                    f"({names}) {self._repaint_timeout_s:g} s after Holodesk hid them; the screenshot was not "
                    "taken (a busy or stalled compositor: try again)"
                )
            pixels, arrived_at = entry.frames.latest(self._frame_timeout_s)

    def grab_monitor(self, index: int) -> ScreenFrame:
        entries = self._stream_monitors()
        required = self._take_requirements()
        if not 1 <= index <= len(entries):
            raise CaptureError(f"there is no monitor {index}; the shared screens are {len(entries)}")
        return self._grab_entry(entries, index, required.get(index))

    def _grab_entry(self, entries: tuple[StreamMonitor, ...], index: int, required: _Requirement | None) -> ScreenFrame:
        entry = entries[index - 1]
        self._wait_until_fresh(entry, required)
        last_input = self.session.last_input_at
        if last_input and time.monotonic() < last_input + self._input_frame_wait_s:
            entry.frames.wait_for_input_effect(
                min(self.session.input_began_at, last_input),
                last_input,
                until=last_input + self._input_frame_wait_s,
                late_s=self._input_late_frame_s,
            )
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
        required = self._take_requirements()
        if len(entries) == 1:
            frame = self._grab_entry(entries, 1, required.get(1))
            return ScreenFrame(frame.pixels, frame.region, None, frame.monitors, captured_at=frame.captured_at)
        monitors = tuple(item.monitor for item in entries)
        desktop = virtual_desktop(monitors)
        canvas = np.zeros((desktop.height, desktop.width, 4), dtype=np.uint8)
        oldest = time.monotonic()
        for index in range(1, len(entries) + 1):
            frame = self._grab_entry(entries, index, required.get(index))
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


def _size(region: Rect) -> tuple[int, int]:
    return (region.height, region.width)


def _overlaps(a: Rect, b: Rect) -> bool:
    return a.left < b.right and b.left < a.right and a.top < b.bottom and b.top < a.bottom
