"""Closing a finished step's session record off the `act` answer's path, durably before what comes next.

An `act`'s run ends with the final answer's screenshot still encoding and the end line unwritten; every
step that acted is on disk already (written ahead of its action). `RecordCloser` takes that closing
(EngineSettings.close_record_later) onto its own thread, so the agent has its answer ~a screenshot's
encoding sooner. `flush` waits for it: the step runner calls it before any next run starts and when the
server ends, so no record is left open at the next step or at exit. A record that could not be completed
is logged at once and said, in words, by the next `flush`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from holodesk.automation.trajectory import TrajectoryWriteError

log = logging.getLogger(__name__)


class RecordCloser:
    """Runs record closings one at a time on a worker thread; `flush` waits for them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[threading.Thread] = []
        self._failures: list[str] = []

    def later(self, close: Callable[[], None]) -> None:
        """Start `close` now on its own thread (after any closing still running)."""
        with self._lock:
            earlier = list(self._pending)

            def work() -> None:
                for thread in earlier:  # records close in the order their runs ended
                    thread.join()
                try:
                    close()
                except TrajectoryWriteError as exc:
                    log.error("%s", exc)
                    with self._lock:
                        self._failures.append(str(exc))

            # Not a daemon: an interpreter that exits still waits for a record being closed.
            thread = threading.Thread(target=work, name="holodesk-mcp-record")
            self._pending.append(thread)
        thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) for every closing handed over so far; TimeoutError, in words, when
        one is still running. Failures stay to be said by `flush`."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            pending = list(self._pending)
        for thread in pending:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise TimeoutError(f"a session record was still being written after {timeout_s:g} s")
        with self._lock:
            self._pending = [thread for thread in self._pending if thread.is_alive()]

    def flush(self, timeout_s: float) -> list[str]:
        """`join`, then the failures since the last flush, in words (each said once)."""
        self.join(timeout_s)
        with self._lock:
            failures, self._failures = self._failures, []
        return failures
