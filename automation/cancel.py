"""A thread-safe cancel token: one thread asks to stop, the thread doing the work stops at its next check.

The kill switch (hotkey, tray menu, Stop button) calls `cancel()` from its own thread; the input layer and
the step engine call `raise_if_cancelled()` between sub-steps and use `sleep()` instead of
`time.sleep()`, so a wait or a slow drag ends as soon as the user asks. A signal handler calls
`request()`, which takes no lock (the interrupted thread may hold it), and has another thread call
`cancel()` to wake the waiters: from the handler on, `cancelled` is already True.
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
        self._requested: str | None = None  # set by request(), without a lock

    def request(self, reason: str = DEFAULT_REASON) -> None:
        """Mark the work stopped from a signal handler: one attribute, no lock taken. Waiters in `sleep()`
        wake only at a `cancel()`, which the caller has another thread make."""
        if self._requested is None:
            self._requested = reason

    def cancel(self, reason: str = DEFAULT_REASON) -> None:
        """Ask the work to stop. The first reason given is kept; later calls change nothing."""
        with self._lock:
            if not self._event.is_set():
                self._reason = self._requested or reason  # a signal's request came first
                self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or self._requested is not None

    @property
    def reason(self) -> str:
        """Why the run was stopped (meaningful once `cancelled` is True)."""
        requested = self._requested
        with self._lock:
            return self._reason if self._event.is_set() or requested is None else requested

    def raise_if_cancelled(self) -> None:
        """Raise `Cancelled` (with the reason) if `cancel()` or `request()` was called."""
        if self.cancelled:
            raise Cancelled(self.reason)

    def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking at once on cancel. True when woken by a cancel."""
        if seconds <= 0 or self._requested is not None:
            return self.cancelled
        return self._event.wait(seconds)

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled})"
