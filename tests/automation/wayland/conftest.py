"""Fixtures for the Wayland backend tests: a headless GNOME stack and a portal session on it.

`gnome_stack` (module-scoped) starts tests/support/gnome_stack.GnomeStack with XWayland, as a GNOME
session has it (the clipboard fallback goes through it), and points this process's D-Bus, Wayland
and X variables at it; when the stack cannot come up the tests FAIL with its logs (a
missing Wayland path must show in CI, never pass silently). `mutter_remote` is the test's own hand on
that desktop (for the consent dialog only). `session` is a portal session started with the dialog
answered (sharing and remote interaction allowed). `wayland_target` is a native Wayland Qt window.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.rigs.gnome_stack import GnomeStack, StackError, answer_consent
from bench.rigs.mutter_remote import MutterRemote
from holodesk.automation.actions import Click, Point
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.wayland.session import RestoreTokenStore, WaylandSession
from tests.support.gnome_session import inside_gnome_session
from tests.support.line_process import LineProcess

# The portal waits this long for the user's answer: longer than answer_consent waits for the dialog
# to show, which on a loaded fresh machine (the portal's first start) took over 30 s.
CONSENT_TIMEOUT_S = 120


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


def start_with_answer(session: WaylandSession, answer: Callable[[], None]) -> BaseException | None:
    """Start the session in a thread (it blocks on the dialog) while the test answers the dialog."""
    failure: list[BaseException] = []

    def start() -> None:
        try:
            session.started()
        except BaseException as exc:  # handed to the test below
            failure.append(exc)

    worker = threading.Thread(target=start, daemon=True)
    worker.start()
    try:
        answer()
    except StackError as exc:  # a session that failed first explains a dialog that never showed
        worker.join(1)
        raise StackError(f"{exc}; the portal session: {failure[0] if failure else 'still waiting'}") from exc
    worker.join(30)
    assert not worker.is_alive(), "the portal session did not finish starting within 30 s of the answer"
    return failure[0] if failure else None


@pytest.fixture(scope="module")
def session(
    gnome_stack: GnomeStack, mutter_remote: MutterRemote, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[WaylandSession, list[str]]]:
    notices: list[str] = []
    store = RestoreTokenStore(tmp_path_factory.mktemp("state") / "token")
    wayland = WaylandSession(store, notices.append, consent_timeout_s=CONSENT_TIMEOUT_S)
    try:
        error = start_with_answer(wayland, lambda: answer_consent(mutter_remote))
    except StackError as exc:
        pytest.fail(f"{exc}\n{gnome_stack.log_tail()}", pytrace=False)
    if error is not None:
        pytest.fail(f"the portal session did not start: {error}\n{gnome_stack.log_tail()}", pytrace=False)
    try:
        yield wayland, notices
    finally:
        wayland.close()


class WaylandTarget:
    """The target window's process and its event log."""

    def __init__(self, stack: GnomeStack) -> None:
        env = stack.env()
        env["QT_QPA_PLATFORM"] = "wayland"
        import os

        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        # libwayland's log of every message the window got, for a failure's report (pointer_wire)
        env["WAYLAND_DEBUG"] = "client"
        self._wire_path = stack.logs / "wayland-target-wire.log"
        self._wire = self._wire_path.open("w")
        self.process = LineProcess("tests.support.wayland_target", env=env, stderr=self._wire)
        self.seen: list[dict[str, Any]] = []
        self.ready = self.wait_for("ready", 30.0)
        self.input_settled = False

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

    def settle_input(self, session: WaylandSession, within_s: float = 30.0) -> None:
        """Once per window: click its background until the window reports the click at that very point.

        Right after a portal session starts, mutter can drop its first input whole or deliver it a few
        pixels off (the window just gone full screen is still settling): seen in 2 of 4 runs of the
        pointer cases on their own, when no earlier test had sent input. A test that checks positions
        starts after this; the product's own first-input handling is PortalInput's warm-up.
        """
        import time

        if self.input_settled:
            return
        x, y = self.ready["width"] - 100, self.ready["height"] - 100  # the window's own background
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            self.drain()
            InputPerformer(PortalInput(session)).execute(Click(Point(x, y)))
            record = self.wait_for_or_none("release", 2.0)
            if record is not None and (record["x"], record["y"]) == (x, y):
                time.sleep(0.2)  # the click's last records, then none are left to confuse the test
                self.drain()
                self.input_settled = True
                return
        pytest.fail(f"no click reached the Wayland target exactly within {within_s:g} s; last: {self.seen[-5:]}")

    def drain(self) -> list[dict[str, Any]]:
        records = []
        while (line := self.process.next(0.0)) is not None:
            records.append(json.loads(line))
        return records

    def wire_mark(self) -> int:
        """Where the window's Wayland log ends now, for pointer_wire."""
        return self._wire_path.stat().st_size

    def pointer_wire(self, since: int, last: int = 80) -> str:
        """The pointer events the window's Wayland connection carried since `since` (its last lines)."""
        with self._wire_path.open("rb") as log:
            log.seek(since)
            lines = log.read().decode(errors="replace").splitlines()
        return "\n".join([line for line in lines if "wl_pointer" in line][-last:])

    def close(self) -> None:
        self.process.close()
        self._wire.close()


@pytest.fixture(scope="module")
def wayland_target(gnome_stack: GnomeStack) -> Iterator[WaylandTarget]:
    target = WaylandTarget(gnome_stack)
    try:
        yield target
    finally:
        target.close()
