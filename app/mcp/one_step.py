"""The `act` tool's step: one run of the StepEngine whose proposer is the agent's single action.

The engine does what it does for every run: captures, shows the step on the overlay and the approval
panel, waits for the person, performs only what was approved (or edited), records the session, and
gives back held input when the run ends. `OneStepProposer` proposes the agent's action as the first
step and ends the run at the second; `StepRunner` runs one such engine at a time and says, in words
meant for the agent, what became of the step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.mcp.act_arguments import ActRequest, ScreenSize
from holodesk.app.mcp.desk_turn import DeskTurn
from holodesk.app.mcp.record_closer import RecordCloser
from holodesk.automation.actions import Done
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import (
    ActionPerformer,
    Approver,
    EngineEvent,
    EngineSettings,
    EngineState,
    FrameSource,
    Outcome,
    RunResult,
)
from holodesk.automation.proposal import EndRun, PastStep, Proposal
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import SCREENSHOT_WAIT_S

log = logging.getLogger(__name__)

SKIPPED = "the person skipped this step: nothing was done"
STOPPED_AT_APPROVAL = "the person stopped this step: nothing was done"
STOPPED_WHILE_ACTING = "the step was stopped while it was being performed: it may have been done in part"
CLIENT_CANCELLED = "stopped: the MCP client cancelled the step"
NO_CHANGE = "the screen did not visibly change afterwards"
MCP_TURN = "an MCP client's step"  # who holds the desk's turn during a run of this runner, in words
BUSY = "another step is already waiting for the person or running: send one step at a time"
RECORD_INCOMPLETE = "the previous step's session record could not be completed"
# The screen counts as settled after an act once two grabs begun this far apart agree (within the timeout).
SETTLE_POLL_S = 0.05
SETTLE_TIMEOUT_S = 2.0
# The run's end once the step is over (the session's last line says it).
STEP_RAN = "the agent's step ran"
STEP_SKIPPED = "the agent's step was skipped by the person"


@dataclass(frozen=True, slots=True)
class StepReport:
    """What became of one `act`: `ok` only when the approved action was performed; `words` for the agent."""

    ok: bool
    words: str
    result: RunResult


class OneStepProposer:
    """A Policy for a run of exactly one step: the agent's action, then the end of the run.

    The action is in pixels of the screenshot the agent was given; the engine's own capture of the same
    monitor must have that size, or the run ends, in words, before the person is asked.
    """

    def __init__(self, request: ActRequest, screen: ScreenSize, client: str) -> None:
        self.request = request
        self.screen = screen
        self.client = client
        self.proposed = False
        self.performed: bool | None = None  # after the step: whether its action ran (False: skipped)

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        frame = frames[-1]
        if not self.proposed:
            if (frame.width, frame.height) != (self.screen.width, self.screen.height):
                raise EndRun(
                    f"the screen is now {frame.width}x{frame.height}, not the {self.screen.width}x"
                    f"{self.screen.height} the coordinates were checked against: nothing was done;"
                    " take a new screenshot",
                    stopped=False,
                )
            self.proposed = True
            action = self.request.action
            note = self.request.reason or f"{self.client} asks for this step"
            return Proposal(
                action,
                raw_text=f"MCP act from {self.client}: {action.to_dict()}",
                image_width=frame.width,
                image_height=frame.height,
                note=note,
                thought="",
                space=ImagePixelSpace(),
            )
        self.performed = bool(history) and history[-1].performed
        answer = STEP_RAN if self.performed else STEP_SKIPPED
        return Proposal(Done(answer), raw_text="", image_width=frame.width, image_height=frame.height)

    def interrupt(self) -> None:
        """Nothing computes here: a stop is the engine's."""


@dataclass(frozen=True, slots=True)
class DeskParts:
    """What every step runs with: the approver the person answers, the input, the capture, the records."""

    approver: Approver
    performer: ActionPerformer
    frames: FrameSource
    sessions: Path
    monitor: int | None


class RunHandle:
    """One requested run, to stop it (and only it) from any thread: before it starts, while it runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: StepEngine | None = None
        self._reason: str | None = None

    def stop(self, reason: str = CLIENT_CANCELLED) -> None:
        """Stop this run as the tray's Stop does; a run not started yet ends before its first step."""
        with self._lock:
            self._reason = self._reason or reason
            engine = self._engine
        if engine is not None:
            _stop(engine, reason)

    @property
    def stopped(self) -> bool:
        """Whether a stop was asked for this run."""
        with self._lock:
            return self._reason is not None

    def attach(self, engine: StepEngine) -> None:
        """The run's engine, about to run (a stop asked before now applies to it)."""
        with self._lock:
            self._engine = engine
            reason = self._reason
        if reason is not None:
            _stop(engine, reason)


def _stop(engine: StepEngine, reason: str) -> None:
    engine.cancel.cancel(reason)
    engine.stop()


class StepRunner:
    """Runs one engine run at a time on this desk (an `act`'s step, a routine); each run has a RunHandle."""

    def __init__(
        self,
        parts: DeskParts,
        settle_timeout_s: float = SETTLE_TIMEOUT_S,
        settle_poll_s: float = SETTLE_POLL_S,
        turn: DeskTurn | None = None,
    ) -> None:
        self.parts = parts
        self.turn = turn  # shared with the tray app's own tasks when it serves this desk; None: this desk alone
        self.settle_timeout_s = settle_timeout_s
        self.settle_poll_s = settle_poll_s
        self._lock = threading.Lock()  # held for a whole run: one at a time on this desk
        self._current: RunHandle | None = None
        # An act's record is closed after its answer (app/mcp/record_closer.py), before any next run.
        self.records = RecordCloser()

    def busy(self) -> bool:
        return self._lock.locked()

    def run(self, request: ActRequest, screen: ScreenSize, client: str, handle: RunHandle | None = None) -> StepReport:
        """Run the step to its end (blocks until the person has answered and the action ran)."""
        proposer = OneStepProposer(request, screen, client)
        seen = _Seen()
        handle = handle or RunHandle()

        def close_later(close: Callable[[], None]) -> None:
            self.records.later(close)
            if handle.stopped:  # a stopped step's answer waits for its record, as a stop always did
                try:
                    self.records.join(SCREENSHOT_WAIT_S)
                except TimeoutError as exc:  # said again, in words, before the next run starts
                    log.error("%s", exc)

        def build() -> StepEngine:
            return StepEngine(
                proposer,
                self.parts.approver,
                self.parts.performer,
                self.parts.frames,
                EngineSettings(
                    max_steps=2,  # the action, then the proposer's end of the run
                    monitor=self.parts.monitor,
                    settle_timeout_s=self.settle_timeout_s,
                    settle_poll_s=self.settle_poll_s,
                    history_steps=1,
                    keep_screenshots=1,
                    trajectory_root=self.parts.sessions,
                    session_meta={"backend": "mcp", "mcp_client": client},
                    asked_by=f"{client} (an agent, through MCP)",
                    close_record_later=close_later,
                ),
                listener=_step_listener(seen),
            )

        task = f"{client} via MCP: {request.action.describe()} (screenshot pixels)"
        result = self.run_engine(build, task, handle)
        return _report(result, proposer, seen)

    def run_engine(self, build: Callable[[], StepEngine], task: str, handle: RunHandle | None = None) -> RunResult:
        """Run the engine `build` makes (one step's, a routine's) on `task`; StepBusy while another runs."""
        if not self._lock.acquire(blocking=False):
            raise StepBusy(BUSY)
        holder = self.turn.take(MCP_TURN) if self.turn is not None else None
        if holder is not None:
            self._lock.release()
            raise StepBusy(f"{holder} is running on this desktop: ask again once it has ended")
        handle = handle or RunHandle()
        try:
            self._records_closed(SCREENSHOT_WAIT_S)
            self._current = handle
            engine = build()
            handle.attach(engine)
            return engine.run(task)
        finally:
            self._current = None
            if self.turn is not None:
                self.turn.give_back()
            self._lock.release()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait (bounded) until no run is going on and every record is closed; True when so. A record
        that could not be completed has been logged already (the server is ending: no step to refuse)."""
        deadline = time.monotonic() + timeout_s
        if not self._lock.acquire(timeout=timeout_s):
            return False
        try:
            self.records.flush(max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return False
        finally:
            self._lock.release()
        return True

    def _records_closed(self, timeout_s: float) -> None:
        """The earlier runs' records, closed before a new run starts; RecordIncomplete in words if not."""
        try:
            failures = self.records.flush(timeout_s)
        except TimeoutError as exc:
            failures = [str(exc)]
        if failures:
            raise RecordIncomplete(f"{RECORD_INCOMPLETE}: {'; '.join(failures)}")

    def stop(self, reason: str = CLIENT_CANCELLED) -> None:
        """Stop whichever run is going on (any thread; nothing when none is)."""
        current = self._current
        if current is not None:
            current.stop(reason)


class StepBusy(HolodeskAppError):
    """A second `act` while one is still with the person."""


class RecordIncomplete(HolodeskAppError):
    """An earlier run's session record could not be completed: the next run does not start (said once)."""


@dataclass
class _Seen:
    """What the engine told about the step: whether its action began, whether the screen then changed."""

    acting: bool = False
    no_visible_change: bool = False


def _step_listener(seen: _Seen) -> Callable[[EngineEvent], None]:
    def on_event(event: EngineEvent) -> None:
        if event.state is EngineState.ACTING:
            seen.acting = True
        elif event.state is EngineState.NO_VISIBLE_CHANGE:
            seen.no_visible_change = True

    return on_event


def _report(result: RunResult, proposer: OneStepProposer, seen: _Seen) -> StepReport:
    session = f" (session {result.folder.name})" if result.folder is not None else ""
    acted = seen.acting
    if result.outcome is Outcome.DONE and proposer.performed:
        unchanged = f"; {NO_CHANGE}" if seen.no_visible_change else ""
        words = f"done: {proposer.request.action.describe()} (screenshot pixels){unchanged}{session}"
        return StepReport(True, words, result)
    if result.outcome is Outcome.DONE:
        return StepReport(False, SKIPPED + session, result)
    if result.outcome is Outcome.STOPPED:
        if acted:
            return StepReport(False, f"{STOPPED_WHILE_ACTING} ({result.detail}){session}", result)
        if result.detail.startswith(CLIENT_CANCELLED):
            return StepReport(False, f"{CLIENT_CANCELLED}: nothing was done{session}", result)
        return StepReport(False, STOPPED_AT_APPROVAL + session, result)
    return StepReport(False, f"the step was not done: {result.detail}{session}", result)
