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
the process with the button held. The handler marks the token (`CancelToken.request`, one attribute,
no lock: from that bytecode on the run is stopped) and writes the signal's number into a pipe (no
lock), and a watcher thread reads it and cancels the token, which wakes whatever waits on it.

A stop is a stop from the first moment to the last (`StopSignals`, installed by `holodesk run` and
`holodesk routine run` as the command starts and kept until the process exits):
- during start-up (the model loading, the desktop being reached), a signal is held; the run does not
  start, and its session says it was stopped before its first step (exit 3). Only the model's
  loading, which may take minutes and holds no X connection, is interrupted at once;
- during the run, it cancels the run's token, as above;
- after the last step, until the engine closes the session, the run's token still takes it: the
  engine records the run as stopped (automation.engine);
- after the session is closed, it changes nothing: the exit code is the session's, whichever of the
  three signals came.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import TYPE_CHECKING

from holodesk.automation.cancel import CancelToken

if TYPE_CHECKING:  # the engine is heavy to import, and the signals are taken before anything else
    from holodesk.automation.engine_protocols import (
        ApprovalDecision,
        ApprovalRequest,
        ApproverAndAnswerer,
        QuestionRequest,
    )

_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None

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


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP for one command, from its start until the process exits.

    Before a run's token is attached (`attach`), a signal is only held (`stopped`, `reason`); while
    `interrupting()`, it also raises KeyboardInterrupt (code that holds no lock another part needs).
    Once attached, it stops the run: the token is marked at once, and cancelled from the watcher thread.
    """

    def __init__(self) -> None:
        self.received: list[str] = []  # the signals' names, in order
        self.reason: str | None = None  # the first signal's words
        self.token: CancelToken | None = None
        self.approver: InterruptibleApprover | None = None
        self._interrupting = False
        self._previous: dict[int, _Handler] = {}
        self._write_end = -1
        self._watcher: threading.Thread | None = None

    @property
    def installed(self) -> bool:
        """Whether the signals are taken (install() on the main thread)."""
        return self._watcher is not None

    def install(self) -> StopSignals:
        """Take the three signals (main thread only: elsewhere Python refuses, and nothing is taken)."""
        if threading.current_thread() is not threading.main_thread() or self._watcher is not None:
            return self
        read_end, self._write_end = os.pipe()

        def watch() -> None:
            with os.fdopen(read_end, "rb", buffering=0) as signals:
                while number := signals.read(1):
                    token = self.token
                    if token is not None:
                        token.cancel(STOP_SIGNALS.get(signal.Signals(number[0]), "stopped by a signal"))

        self._watcher = threading.Thread(target=watch, name="holodesk-stop-signals", daemon=True)
        self._watcher.start()
        self._previous = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}
        return self

    def uninstall(self) -> None:
        """Give the signals back their previous handlers (for a caller that lives on after the run)."""
        for number, handler in self._previous.items():
            if handler is not None:  # None: not set from Python; nothing to give back
                signal.signal(number, handler)
        self._previous = {}
        if self._write_end >= 0:
            os.close(self._write_end)  # the watcher reads the end of the pipe and stops, after what is in it
            self._write_end = -1
        if self._watcher is not None:
            self._watcher.join(timeout=1.0)
            self._watcher = None

    def attach(self, token: CancelToken, approver: InterruptibleApprover) -> None:
        """From now on a signal stops the run of `token`; one already held stops it at once."""
        self.approver = approver
        self.token = token
        if self.reason is not None:
            token.cancel(self.reason)

    def detach(self) -> None:
        """The run's session is closed: later signals are noted, and change nothing."""
        self.token = None
        self.approver = None

    @contextmanager
    def interrupting(self) -> Iterator[None]:
        """Within the block a signal also raises KeyboardInterrupt (one held before raises it at once)."""
        if self.reason is not None:
            raise KeyboardInterrupt
        self._interrupting = True
        try:
            yield
        finally:
            self._interrupting = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        words = STOP_SIGNALS.get(signal.Signals(signum), "stopped by a signal")
        self.received.append(signal.Signals(signum).name)
        if self.reason is None:
            self.reason = words
        if signum == signal.SIGHUP:
            _leave_the_closed_terminal()
        token, approver = self.token, self.approver
        if token is not None:
            token.request(words)  # no lock: from here on the run is stopped, and the engine sees it
            if approver is not None and approver.waiting:
                # Only the approver's blocking read is here, which holds none of the token's locks: cancel
                # at once, so the run's end names the signal, and interrupt the read (it answers "stop").
                token.cancel(words)
                raise KeyboardInterrupt
            if self._write_end >= 0:
                # No lock taken here: the watcher cancels. A closed pipe (the process is ending) leaves the mark.
                with suppress(OSError):
                    os.write(self._write_end, bytes([signum]))
        if self._interrupting:
            raise KeyboardInterrupt


@contextmanager
def signals_stop_the_run(
    cancel: CancelToken, approver: InterruptibleApprover, signals: StopSignals | None = None
) -> Iterator[list[str]]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP cancel `cancel`; yields the names of the signals received.

    With `signals` (the command's, installed at its start), they stay taken after the block: a late
    signal is noted and changes nothing. Without, the block takes them and gives them back after it.
    Only the main thread may set signal handlers; elsewhere (tests calling run_task on a thread) the
    block runs without them.
    """
    own = signals is None
    taken = signals if signals is not None else StopSignals().install()
    taken.attach(cancel, approver)
    try:
        yield taken.received
    finally:
        taken.detach()
        if own:
            taken.uninstall()
