"""A thread-safe cancel token: one thread asks to stop, the thread doing the work stops at its next check.

The kill switch (hotkey, tray menu, Stop button) calls `cancel()` from its own thread; the input layer and
the step engine call `raise_if_cancelled()` between sub-steps and use `sleep()` instead of
`time.sleep()`, so a wait or a slow drag ends as soon as the user asks.
"""

from __future__ import annotations

import threading

from holodesk.automation.errors import Cancelled

DEFAULT_REASON = "stopped by the user"


class CancelToken:
    """Set once, never cleared: a run that was stopped stays stopped (make a new token for a new run)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason = DEFAULT_REASON

    def cancel(self, reason: str = DEFAULT_REASON) -> None:
        """Ask the work to stop. The first reason given is kept; later calls change nothing."""
        with self._lock:
            if not self._event.is_set():
                self._reason = reason
                self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        """Why the run was stopped (meaningful once `cancelled` is True)."""
        with self._lock:
            return self._reason

    def raise_if_cancelled(self) -> None:
        """Raise `Cancelled` (with the reason) if `cancel()` was called."""
        if self._event.is_set():
            raise Cancelled(self.reason)

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking at once on cancel. True when woken by a cancel."""
        if seconds <= 0:
            return self._event.is_set()
        return self._event.wait(seconds)

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled})"
