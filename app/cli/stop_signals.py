"""Ctrl+C, SIGTERM and SIGHUP stop `holodesk run` the way the Stop button does, never leaving input held.

SIGHUP is what closing the terminal window sends: the run stops as for Ctrl+C (buttons and keys
released, the session's end record "stopped"), with its output sent to /dev/null, since the
terminal that would show it is gone.

The handler never unwinds the code it interrupts while that code may be talking to the X server: an
exception raised inside python-xlib's request machinery leaves its connection locked, and the clean-up
that should release the mouse button then waits on that lock forever (the Ctrl+C deadlock during
drags). So the handler only sets the run's cancel token; the input performer sees it between drag steps
and text chunks and releases what it holds in its normal flow, and the engine ends the run with an
end record. The one place that cannot poll the token is the terminal approver's blocking read; only
while it waits there does the handler also raise KeyboardInterrupt (which the approver turns into
"stop").

Nor does the handler take a lock: it runs in the main thread between two bytecodes, possibly while
that thread holds the very lock the cancel token's Event needs (inside `CancelToken.sleep`, which a
drag calls every few milliseconds), and a Python lock is not re-entrant: SIGTERM during a drag hung
the process with the button held. The handler writes the signal's number into a pipe (no lock), and
a watcher thread reads it and cancels the token.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine import ApprovalDecision, ApprovalRequest, ApproverAndAnswerer, QuestionRequest

STOP_SIGNALS = {
    signal.SIGINT: "stopped by the user (Ctrl+C)",
    signal.SIGTERM: "stopped by SIGTERM",
    signal.SIGHUP: "stopped: the terminal was closed (SIGHUP)",
}


def _leave_the_closed_terminal() -> None:
    """Point stdin, stdout and stderr at /dev/null: the terminal is gone, and writing to it would fail.

    Called from the SIGHUP handler: plain system calls on descriptors, no Python lock. The run then
    ends as a stop, its last words written nowhere, instead of dying on the first write (EIO) with
    the mouse button still held and no end record.
    """
    null = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(null, descriptor)
    os.close(null)


class InterruptibleApprover:
    """Wraps an approver and says whether it is waiting for the user right now (so a signal may interrupt it)."""

    def __init__(self, inner: ApproverAndAnswerer) -> None:
        self.inner = inner
        self.waiting = False

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.waiting = True
        try:
            return self.inner.decide(request)
        finally:
            self.waiting = False

    def answer_question(self, request: QuestionRequest) -> str | None:
        """The inner approver's reply to the model's question (a signal may interrupt the wait, as above)."""
        self.waiting = True
        try:
            return self.inner.answer_question(request)
        finally:
            self.waiting = False


@contextmanager
def signals_stop_the_run(cancel: CancelToken, approver: InterruptibleApprover) -> Iterator[list[str]]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP cancel `cancel`; yields the names of the signals received.

    Only the main thread may set signal handlers; elsewhere (tests calling run_task on a thread) the
    block runs without them.
    """
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    read_end, write_end = os.pipe()

    def watch() -> None:
        with os.fdopen(read_end, "rb", buffering=0) as signals:
            while number := signals.read(1):
                cancel.cancel(STOP_SIGNALS.get(signal.Signals(number[0]), "stopped by a signal"))

    watcher = threading.Thread(target=watch, name="holodesk-stop-signals", daemon=True)
    watcher.start()

    def handle(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        if signum == signal.SIGHUP:
            _leave_the_closed_terminal()
        if approver.waiting:
            # Only the approver's blocking read is here, which holds none of the token's locks: cancel
            # at once, so the run's end names the signal, and interrupt the read (it answers "stop").
            cancel.cancel(STOP_SIGNALS.get(signal.Signals(signum), "stopped by a signal"))
            raise KeyboardInterrupt
        os.write(write_end, bytes([signum]))  # no lock taken here: the watcher cancels the token

    previous = {number: signal.signal(number, handle) for number in STOP_SIGNALS}
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        os.close(write_end)  # the watcher reads the end of the pipe and stops, after what is in it
        watcher.join(timeout=1.0)
