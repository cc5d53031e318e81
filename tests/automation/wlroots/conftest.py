"""Fixtures for the wlroots tier: a headless sway (bench/rigs/sway_stack.py) and a native Wayland Qt window on it.

`sway_stack` (module-scoped) starts the stack; when it cannot come up the tests FAIL with sway's log
(a missing wlroots path must show in CI, never pass silently). `sway_target` is
tests/support/wayland_target.py run with QT_QPA_PLATFORM=wayland on that sway: it asks to be full
screen, and sway gives a single window the whole output anyway, so window coordinates are screen
coordinates. Its JSON log says what it received (`text`: the field's whole content after each change).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.rigs.sway_stack import StackError, SwayStack
from tests.support.line_process import LineProcess


@pytest.fixture(scope="module")
def sway_stack() -> Iterator[SwayStack]:
    stack = SwayStack()
    try:
        stack.start()
    except StackError as exc:
        pytest.fail(f"the headless sway stack did not start: {exc}", pytrace=False)
    try:
        yield stack
    finally:
        stack.stop()


class SwayTarget:
    """The Qt window's process on sway and its event log."""

    def __init__(self, stack: SwayStack) -> None:
        env = stack.env()
        env["QT_QPA_PLATFORM"] = "wayland"
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        self._stderr = (stack.root / "target.err").open("w")
        self.process = LineProcess("tests.support.wayland_target", env=env, stderr=self._stderr)
        self.seen: list[dict[str, Any]] = []
        self.ready = self.wait_for("ready", 30.0)

    def wait_for(self, event: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """The next logged event of that kind (and those field values); fails the test after `timeout`."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            line = self.process.next(remaining)
            if line is None:
                break
            record = json.loads(line)
            self.seen.append(record)
            if record.get("event") == event and all(record.get(k) == v for k, v in fields.items()):
                return record
        pytest.fail(
            f"the Qt window on sway logged no {event!r} {fields or ''} within {timeout:g} s; "
            f"last events: {self.seen[-8:]}",
            pytrace=False,
        )

    def clear(self) -> None:
        self.process.send("clear")
        self.wait_for("cleared", 10.0)

    def close(self) -> None:
        self.process.close()
        self._stderr.close()


@pytest.fixture(scope="module")
def sway_target(sway_stack: SwayStack) -> Iterator[SwayTarget]:
    target = SwayTarget(sway_stack)
    try:
        yield target
    finally:
        target.close()
