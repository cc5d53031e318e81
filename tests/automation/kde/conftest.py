"""Fixtures for the KDE tier: a headless KWin stack (bench/rigs/kwin_stack.py), a portal session and a Qt window on it.

`kwin_stack` (module-scoped) starts the stack; when it cannot come up the tests FAIL with its logs (a
missing KDE path must show in CI, never pass silently). `kde_portal` is Holodesk's own portal
session (automation/wayland/portal.py) on it: KDE 5.27 grants it to a program outside a sandbox with
no dialog, so no test answers one. `kde_target` is tests/support/wayland_target.py, a native Wayland
Qt window: it asks to be full screen, so window coordinates are screen coordinates, and its JSON
log says what it received (`text`: the field's whole content after each change).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.rigs.kwin_stack import KwinStack, StackError
from holodesk.automation.wayland.portal import PortalSession
from tests.support.line_process import LineProcess

BTN_LEFT = 0x110  # evdev's left button, as the portal's NotifyPointerButton takes it


def started_stack(keyboard_layout: str = "") -> KwinStack:
    """A started stack, or the test fails with why (its logs)."""
    stack = KwinStack(keyboard_layout=keyboard_layout)
    try:
        stack.start()
    except StackError as exc:
        pytest.fail(f"the headless KWin stack did not start: {exc}", pytrace=False)
    return stack


@pytest.fixture(scope="module")
def kwin_stack() -> Iterator[KwinStack]:
    stack = started_stack()
    try:
        yield stack
    finally:
        stack.stop()


def open_portal(stack: KwinStack) -> PortalSession:
    """Holodesk's portal session on the stack (no dialog on KDE 5.27), or the test fails with the logs."""
    try:
        return PortalSession.open(bus_address=stack.bus_address, consent_timeout_s=30)
    except Exception as exc:  # any failure is the finding: shown with the portal's log (the bus's)
        pytest.fail(f"the KDE portal session did not start: {exc}{stack.log_tail()}", pytrace=False)


@pytest.fixture(scope="module")
def kde_portal(kwin_stack: KwinStack) -> Iterator[PortalSession]:
    portal = open_portal(kwin_stack)
    try:
        yield portal
    finally:
        portal.close()


class KdeTarget:
    """The Qt window's process on KWin and its event log."""

    def __init__(self, stack: KwinStack) -> None:
        env = stack.env()  # QT_QPA_PLATFORM=wayland: a native Wayland window
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        self._stderr = (stack.logs / "target.err").open("w")
        self.process = LineProcess("tests.support.wayland_target", env=env, stderr=self._stderr)
        self.seen: list[dict[str, Any]] = []
        self.ready = self.wait_for("ready", 30.0)

    def wait_for_or_none(self, event: str, timeout: float, **fields: Any) -> dict[str, Any] | None:
        """The next logged event of that kind (and those field values), or None after `timeout`."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            line = self.process.next(remaining)
            if line is None:
                break
            record = json.loads(line)
            self.seen.append(record)
            if record.get("event") == event and all(record.get(k) == v for k, v in fields.items()):
                return record
        return None

    def wait_for(self, event: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """The next logged event of that kind (and those field values); fails the test after `timeout`."""
        record = self.wait_for_or_none(event, timeout, **fields)
        if record is None:
            pytest.fail(
                f"the Qt window on KWin logged no {event!r} {fields or ''} within {timeout:g} s; "
                f"last events: {self.seen[-8:]}",
                pytrace=False,
            )
        return record

    def clear(self) -> None:
        self.process.send("clear")
        self.wait_for("cleared", 10.0)

    def close(self) -> None:
        self.process.close()
        self._stderr.close()


@pytest.fixture(scope="module")
def kde_target(kwin_stack: KwinStack) -> Iterator[KdeTarget]:
    target = KdeTarget(kwin_stack)
    try:
        yield target
    finally:
        target.close()


def click(portal: PortalSession, x: int, y: int) -> None:
    """A left click at (x, y) of the portal's one stream (the output), through the portal."""
    portal.pointer_motion_absolute(portal.streams[0], x, y)
    portal.pointer_button(BTN_LEFT, True)
    portal.pointer_button(BTN_LEFT, False)
