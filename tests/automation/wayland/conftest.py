"""Fixtures for the Wayland backend tests: a headless GNOME stack and a portal session on it.

`gnome_stack` (module-scoped) starts tests/support/gnome_stack.GnomeStack with XWayland, as a GNOME
session has it (the clipboard fallback goes through it), and points this process's D-Bus, Wayland
and X variables at it; when the stack cannot come up the tests FAIL with its logs (a
missing Wayland path must show in CI, never pass silently). `mutter_remote` is the test's own hand on
that desktop (for the consent dialog only). `wayland_target` is a native Wayland Qt window.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.gnome_session import inside_gnome_session
from tests.support.gnome_stack import GnomeStack
from tests.support.line_process import LineProcess
from tests.support.mutter_remote import MutterRemote


@pytest.fixture(scope="module")
def gnome_stack() -> Iterator[GnomeStack]:
    with inside_gnome_session() as stack:
        yield stack


@pytest.fixture(scope="module")
def mutter_remote(gnome_stack: GnomeStack) -> Iterator[MutterRemote]:
    remote = MutterRemote(gnome_stack.bus_address, str(gnome_stack.runtime_dir))
    try:
        yield remote
    finally:
        remote.close()


class WaylandTarget:
    """The target window's process and its event log."""

    def __init__(self, stack: GnomeStack) -> None:
        env = stack.env()
        env["QT_QPA_PLATFORM"] = "wayland"
        import os

        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        self.process = LineProcess("tests.support.wayland_target", env=env)
        self.seen: list[dict[str, Any]] = []
        self.ready = self.wait_for("ready", 30.0)

    def wait_for(self, event: str, timeout: float, **fields: Any) -> dict[str, Any]:
        """The next logged event of that kind (and those field values); fails after `timeout`."""
        record = self.wait_for_or_none(event, timeout, **fields)
        if record is None:
            pytest.fail(
                f"the Wayland target window logged no {event!r} {fields or ''} within {timeout:g} s; "
                f"last events: {self.seen[-5:]}"
            )
        return record

    def wait_for_or_none(self, event: str, timeout: float, **fields: Any) -> dict[str, Any] | None:
        """The next logged event of that kind (and those field values), or None after `timeout`."""
        import time

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

    def records_until(self, event: str, timeout: float, **fields: Any) -> list[dict[str, Any]]:
        """Every logged event up to and including the next one of that kind (and those field values)."""
        start = len(self.seen)
        self.wait_for(event, timeout, **fields)
        return self.seen[start:]

    def drain(self) -> list[dict[str, Any]]:
        records = []
        while (line := self.process.next(0.0)) is not None:
            records.append(json.loads(line))
        return records

    def close(self) -> None:
        self.process.close()


@pytest.fixture(scope="module")
def wayland_target(gnome_stack: GnomeStack) -> Iterator[WaylandTarget]:
    target = WaylandTarget(gnome_stack)
    try:
        yield target
    finally:
        target.close()
