"""Ctrl+C and SIGTERM stop `holodesk run` the way the Stop button does, without ever leaving input held.

The handler never unwinds the code it interrupts while that code may be talking to the X server: an
exception raised inside python-xlib's request machinery leaves its connection locked, and the clean-up
that should release the mouse button then waits on that lock forever (the Ctrl+C deadlock during
drags). So the handler only sets the run's cancel token; the executor sees it between drag steps
and text chunks and releases what it holds in its normal flow, and the engine ends the run with an
end record. The one place that cannot poll the token is the terminal approver's blocking read; only
while it waits there does the handler also raise KeyboardInterrupt (which the approver turns into
"stop").
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine import ApprovalDecision, ApprovalRequest, Approver, QuestionRequest

STOP_SIGNALS = {signal.SIGINT: "stopped by the user (Ctrl+C)", signal.SIGTERM: "stopped by SIGTERM"}


class InterruptibleApprover:
    """Wraps an approver and says whether it is waiting for the user right now (so a signal may interrupt it)."""

    def __init__(self, inner: Approver) -> None:
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
        answer = getattr(self.inner, "answer_question", None)
        if not callable(answer):
            return None  # the engine then ends the run with the question, as without this wrapper
        self.waiting = True
        try:
            reply: str | None = answer(request)
            return reply
        finally:
            self.waiting = False


@contextmanager
def signals_stop_the_run(cancel: CancelToken, approver: InterruptibleApprover) -> Iterator[list[str]]:
    """While the block runs, SIGINT and SIGTERM cancel `cancel`; yields the names of the signals received.

    Only the main thread may set signal handlers; elsewhere (tests calling run_task on a thread) the
    block runs without them.
    """
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        cancel.cancel(STOP_SIGNALS.get(signal.Signals(signum), "stopped by a signal"))
        if approver.waiting:
            raise KeyboardInterrupt  # only the approver's blocking read is here; it answers "stop"

    previous = {number: signal.signal(number, handle) for number in STOP_SIGNALS}
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
