"""Start the target window (bench/rigs/target_window.py) in its own process and read what it saw.

The window logs every input event as a JSON line; `TargetWindow` collects them on a thread, knows the
exact geometry the window reported, and `sync()` returns the events up to a point the test chooses:
it sends an X ClientMessage that the window echoes only after delivering every earlier X event.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect
from holodesk.automation.virtual_display import DisplayLayout

TARGET_WINDOW_SCRIPT = Path(__file__).with_name("target_window.py")
Event = dict[str, Any]


WINDOW_SIZE = (900, 540)  # what target_window.py opens; its "ready" report has the exact geometry


def window_origin(layout: DisplayLayout) -> tuple[int, int]:
    """Where tests put the window: near the bottom-right of the last monitor (or of the screen).

    Different layouts put it at different screen positions, so a test that passes on one size
    only by accident fails on another.
    """
    if layout.monitors:
        last = layout.monitors[-1]
        right, bottom = last.left + last.width, last.top + last.height
    else:
        right, bottom = layout.width, layout.height
    return right - WINDOW_SIZE[0] - 60, bottom - WINDOW_SIZE[1] - 60


class TargetWindowError(RuntimeError):
    """The target window did not start, or did not answer in time."""


class TargetWindow:
    """A running target window: its geometry and the events it has logged."""

    def __init__(self, process: subprocess.Popen[str], display: str) -> None:
        self.process = process
        self.display = display
        self._events: list[Event] = []
        self._cursor = 0
        self._condition = threading.Condition()
        self._stderr: list[str] = []
        self._sync_ids = itertools.count(1)
        self._x: Any = None
        self._last_press_at = 0.0
        self.ready: Event = {}
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- start and stop --------------------------------------------------------------------------

    @classmethod
    def start(cls, left: int, top: int, timeout_s: float = 20.0) -> TargetWindow:
        """Open the window at (left, top) on $DISPLAY and wait for its "ready" report."""
        display = os.environ.get("DISPLAY", "")
        env = dict(os.environ)
        # Logical pixels equal physical pixels: the tests compare the window's numbers with the screen's.
        env.update(QT_QPA_PLATFORM="xcb", QT_ENABLE_HIGHDPI_SCALING="0", QT_NO_GLIB="1")
        for name in ("QT_SCALE_FACTOR", "QT_SCREEN_SCALE_FACTORS", "QT_AUTO_SCREEN_SCALE_FACTOR"):
            env.pop(name, None)
        process = subprocess.Popen(
            [sys.executable, str(TARGET_WINDOW_SCRIPT), "--left", str(left), "--top", str(top)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env,
        )
        window = cls(process, display)
        try:
            window.ready = window.wait_for(lambda event: event["event"] == "ready", timeout_s, consume=True)
        except TargetWindowError:
            window.close()
            raise
        return window

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=5)
        if self._x is not None:
            self._x.close()
            self._x = None

    # -- geometry --------------------------------------------------------------------------------

    @property
    def rect(self) -> Rect:
        return Rect(*self.ready["window"])

    def widget_rect(self, name: str) -> Rect:
        return Rect(*self.ready["widgets"][name])

    def centre(self, name: str) -> Point:
        rect = self.widget_rect(name)
        return Point(rect.left + rect.width // 2, rect.top + rect.height // 2)

    # -- events ----------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._condition:
                if event.get("event") == "press":
                    self._last_press_at = time.monotonic()
                self._events.append(event)
                self._condition.notify_all()
        with self._condition:
            self._condition.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def _diagnostics(self) -> str:
        status = "running" if self.process.poll() is None else f"exited with {self.process.returncode}"
        return f"target window {status}; stderr:\n{''.join(self._stderr[-40:])}"

    def wait_for(self, predicate: Callable[[Event], bool], timeout_s: float = 5.0, *, consume: bool = False) -> Event:
        """The first unread event matching `predicate`; with `consume`, everything up to it is marked read."""
        deadline = time.monotonic() + timeout_s
        with self._condition:
            while True:
                for index in range(self._cursor, len(self._events)):
                    if predicate(self._events[index]):
                        if consume:
                            self._cursor = index + 1
                        return self._events[index]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise TargetWindowError(f"no matching event within {timeout_s:g} s; {self._diagnostics()}")
                self._condition.wait(remaining)

    def sync(self, timeout_s: float = 5.0) -> list[Event]:
        """Every event since the last sync (or reset), once the window has delivered all earlier X input."""
        sync_id = next(self._sync_ids)
        self._send_sync(sync_id)
        deadline = time.monotonic() + timeout_s
        with self._condition:
            while True:
                for index in range(self._cursor, len(self._events)):
                    event = self._events[index]
                    if event["event"] == "sync" and event["id"] == sync_id:
                        taken = [e for e in self._events[self._cursor : index] if e["event"] != "sync"]
                        self._cursor = index + 1
                        return taken
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise TargetWindowError(
                        f"sync {sync_id} was not echoed within {timeout_s:g} s; {self._diagnostics()}"
                    )
                self._condition.wait(remaining)

    def _send_sync(self, sync_id: int) -> None:
        from Xlib import X, protocol
        from Xlib import display as xdisplay

        if self._x is None:
            self._x = xdisplay.Display(self.display)
        connection = self._x
        window = connection.create_resource_object("window", self.ready["window_id"])
        message = protocol.event.ClientMessage(
            window=window,
            client_type=connection.intern_atom("HOLODESK_SYNC"),
            data=(32, [sync_id, 0, 0, 0, 0]),
        )
        # An empty event mask sends the event to the client that created the window.
        window.send_event(message, event_mask=X.NoEventMask, propagate=False)
        connection.sync()

    def reset(self, timeout_s: float = 5.0) -> None:
        """Empty the text field (without a text event) and drop every event logged so far.

        Also waits out the double-click interval after the last press, so the next test's first
        click is not read as the second half of a double click.
        """
        self.sync(timeout_s)
        with self._condition:
            quiet_until = self._last_press_at + self.ready["double_click_ms"] / 1000 + 0.05
        time.sleep(max(0.0, quiet_until - time.monotonic()))
        assert self.process.stdin is not None
        self.process.stdin.write("reset\n")
        self.process.stdin.flush()
        self.wait_for(lambda event: event["event"] == "reset", timeout_s, consume=True)
        self.sync(timeout_s)

    def make_field_read_only(self, timeout_s: float = 5.0) -> None:
        """Make the text field read-only and unable to take the focus (until the window closes).

        It looks as before, so a routine still finds it; keys typed "into" it change nothing there."""
        assert self.process.stdin is not None
        self.process.stdin.write("read_only\n")
        self.process.stdin.flush()
        self.wait_for(lambda event: event["event"] == "read_only", timeout_s, consume=True)
