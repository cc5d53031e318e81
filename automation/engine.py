"""The step engine: capture -> propose -> map -> approve -> execute -> record, until the task ends.

It talks to a policy, an approver and an action performer through small protocols, so the tray app, the
terminal and the tests each plug in their own. It never acts without an approver's decision, stops
when told (within 100 ms outside model compute; a proposal in flight is abandoned, not waited for),
and records every step as it happens.

What it exchanges with those parts (requests, decisions, events, outcomes, settings) is in
automation/engine_protocols.py; what it records about a session and its steps, in
automation/engine_record.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, NoReturn

from holodesk.automation.actions import TERMINAL_KINDS, Action, AskUser, Done, TypeText
from holodesk.automation.approval_rules import paste_in_words, pastes
from holodesk.automation.auto_approval import AUTO_APPROVAL, AutoApproval
from holodesk.automation.cancel import DEFAULT_REASON, CancelToken
from holodesk.automation.click_spacing import ClickSpacer
from holodesk.automation.coords import FrameMapping, action_to_model, action_to_screen, monitor_at
from holodesk.automation.engine_protocols import (
    ActionPerformer,
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    Decision,
    EngineEvent,
    EngineSettings,
    EngineState,
    FrameSource,
    Outcome,
    QuestionAnswerer,
    QuestionRequest,
    RunResult,
    ShowsOwnRegions,
)
from holodesk.automation.engine_record import frame_meta, proposal_meta, settings_meta, timings_meta
from holodesk.automation.errors import (
    ActionError,
    AutomationError,
    Cancelled,
    CaptureError,
    OffScreenError,
    SelectAllNotHonoured,
)
from holodesk.automation.input.corners import nudge_off_corners
from holodesk.automation.lookahead import FramePreparer
from holodesk.automation.loop_guard import LoopGuard
from holodesk.automation.primary_selection import PasteUnreadable, read_primary_selection
from holodesk.automation.proposal import (
    DescribesEnd,
    EndRun,
    PastStep,
    Policy,
    PreparesAhead,
    Proposal,
    UnusableProposal,
)
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.screen_change import wait_for_settle
from holodesk.automation.trajectory import StepLog, TrajectoryWriteError, TrajectoryWriter

# bench/engine.py imports these from here rather than from engine_protocols: the same bench code also
# drives the reference commit's engine (bench/engine_reference.py), whose holodesk has only this module.
__all__ = [
    "NO_VISIBLE_CHANGE",
    "STOP_POLL_S",
    "ApprovalDecision",
    "ApprovalRequest",
    "EngineEvent",
    "EngineSettings",
    "EngineState",
    "StepEngine",
]

log = logging.getLogger(__name__)

# How often a blocking wait looks at the stop flag; well inside the 100 ms promise.
STOP_POLL_S = 0.02


NO_VISIBLE_CHANGE = "no visible change"


class _RunEnded(Exception):
    """Internal: unwinds the loop with the run's result."""

    def __init__(self, outcome: Outcome, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


class StepEngine:
    """Runs one task at a time. `run` blocks (call it off the UI thread, or use `start`)."""

    def __init__(
        self,
        policy: Policy,
        approver: Approver,
        performer: ActionPerformer,
        frames: FrameSource,
        settings: EngineSettings | None = None,
        listener: Callable[[EngineEvent], None] | None = None,
        *,
        questions: QuestionAnswerer | None = None,
        read_paste: Callable[[], str] = read_primary_selection,
        auto_approval: AutoApproval = AUTO_APPROVAL,
    ) -> None:
        self.policy = policy
        # The one rule for "approve all" (automation/auto_approval.py); the tray's approver asks it too.
        self.auto_approval = auto_approval
        # What a pasting step (a middle click) would paste, read when it is asked; PasteUnreadable refuses it.
        self.read_paste = read_paste
        self.approver = approver
        # Who answers the model's questions; None ends the run with the question (ASK_USER), as
        # scripts and the eval's auto-approval want.
        self.questions = questions
        self.performer = performer
        self.frames = frames
        self.settings = settings or EngineSettings()
        self.listener = listener
        self.cancel = CancelToken()
        self._runs_finished = 0
        self._resumed = threading.Event()
        self._resumed.set()
        self._thread: threading.Thread | None = None
        self._step_log: StepLog | None = None  # the current step's records, written ahead of its action
        self._action_began = False  # the current step reached its action (for counting steps taken)
        self._previous_result = ""
        self._recording_failed = False  # the run ended because its record could not be written
        self._preparer = FramePreparer(None)  # the run's: prepares the next screenshot while it settles
        self._approved_all_exact = False  # the user chose "approve all" (auto_approval says what it covers)
        self._first_step_began = False  # the run got past its start (for the words of a stop before it)
        self._clicks = ClickSpacer()  # clicks one after another stay single clicks (automation/click_spacing.py)
        # Steps whose keys went out but could not be confirmed read as sent (the performer's `unconfirmed`).
        self._unconfirmed: list[tuple[int, str]] = []

    # -- control -------------------------------------------------------------------------------

    def stop(self, reason: str = DEFAULT_REASON) -> None:
        """Ask the run to stop, for `reason` (its record's words); honoured at the next check (every few ms
        while waiting).

        The policy is told too (`Policy.interrupt`), so a backend that can abandon its computation
        (the local one) stops at its next token instead of finishing an answer nobody will read.
        """
        self.cancel.cancel(reason)
        try:
            self.policy.interrupt()
        except Exception:  # stopping must never fail because a backend could not be interrupted
            log.exception("policy interrupt failed")

    def pause(self) -> None:
        """Hold the run before its next step (an action in progress finishes first)."""
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

    def start(self, task: str, on_finished: Callable[[RunResult], None] | None = None) -> threading.Thread:
        """Run `task` on a background thread."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("a task is already running")

        def target() -> None:
            result = self.run(task)
            if on_finished is not None:
                on_finished(result)

        self._thread = threading.Thread(target=target, name="holodesk-engine", daemon=True)
        self._thread.start()
        return self._thread

    # -- the loop ------------------------------------------------------------------------------

    def run(self, task: str) -> RunResult:
        if not task.strip():
            raise ValueError("the task is empty")
        if self._runs_finished:
            # A new token for a new run; the first run keeps the constructor's, so a stop() that
            # arrives between start() and the thread getting here is not lost.
            self.cancel = CancelToken()
        step = 0
        writer: TrajectoryWriter | None = None
        self._recording_failed = False
        self._approved_all_exact = False
        self._first_step_began = False
        self._unconfirmed = []
        try:
            writer = self._open_trajectory(task)
            step, outcome, detail = self._loop(task, writer)
        except TrajectoryWriteError as exc:  # the sessions folder cannot be written: nothing was done
            outcome, detail = Outcome.ERROR, str(exc)
        except Exception as exc:  # an engine bug must still end the run cleanly and be recorded
            log.exception("engine crashed")
            outcome, detail = Outcome.ERROR, f"internal error: {type(exc).__name__}: {exc}"
        self._release_input()
        detail += _unconfirmed_words(self._unconfirmed)
        # With close_record_later the last screenshots and the end line are written after run() returns.
        later = self.settings.close_record_later
        if writer is not None and later is None:
            outcome, detail = self._confirm_recording(writer, outcome, detail)
        outcome, detail = self._stop_until_the_close(outcome, detail)
        summary: dict[str, str] = {}
        if isinstance(self.policy, DescribesEnd):  # a replay says at which step, and why, in its own words
            said = self.policy.end_words(outcome.value, detail)
            detail, summary = said.detail, {"summary": said.summary}
        result = RunResult(outcome, detail, step, writer.folder if writer else None)
        if writer is not None and later is not None:
            later(self._closing(writer, result, summary))
        elif writer is not None:
            writer.finish(outcome.value, detail, steps=step, **summary)
        self._runs_finished += 1
        self._emit(EngineState.FINISHED, step, detail, result)
        return result

    def _closing(self, writer: TrajectoryWriter, result: RunResult, summary: dict[str, str]) -> Callable[[], None]:
        """The record's closing for EngineSettings.close_record_later: wait for the last screenshots, then
        write the end line (an error, in words, when one could not be written, and TrajectoryWriteError).

        Every step that acted is on disk already, its screenshot included (written ahead of its action),
        and its result line is flushed: what is left are the final answer's screenshot and the end line.
        """
        outcome, detail, steps = result.outcome, result.detail, result.steps
        recording_failed = self._recording_failed
        wait_s = self.settings.screenshot_wait_s

        def close() -> None:
            try:
                writer.confirm_screenshots(wait_s)
            except TrajectoryWriteError as exc:
                if recording_failed:  # the run ended for it and said so
                    log.error("%s", exc)
                    writer.finish(outcome.value, detail, steps=steps, **summary)
                    return
                incomplete = f"{exc}; the run had ended ({outcome.value}: {detail}) but its record is incomplete"
                writer.finish(Outcome.ERROR.value, incomplete, steps=steps, **summary)
                raise
            writer.finish(outcome.value, detail, steps=steps, **summary)

        return close

    def _stop_until_the_close(self, outcome: Outcome, detail: str) -> tuple[Outcome, str]:
        """A stop is a stop until the session closes: one asked after the last step (a signal while the
        input is given back and the screenshots are written) ends the run as stopped, its own end in
        the words; one before the first step says so. An error stays an error. Checked as the last
        thing before the end record, so a stop is either in it or came after the run had ended."""
        if not self.cancel.cancelled or outcome is Outcome.ERROR:
            return outcome, detail
        reason = self.cancel.reason
        if outcome is Outcome.STOPPED:
            began = self._first_step_began
            return outcome, detail if began or detail != reason else f"{reason}, before the first step"
        return Outcome.STOPPED, f"{reason}, after the last step (the run had ended {outcome.value}: {detail})"

    def _own_regions(self) -> list[list[int]]:
        """Where Holodesk's own things are in this step's picture ([left, top, width, height] each)."""
        if not isinstance(self.frames, ShowsOwnRegions):
            return []
        try:
            regions = self.frames.own_regions()
        except Exception:  # a step is never lost for want of this: its effect may just count the icon
            log.exception("Holodesk's own regions could not be read")
            return []
        return [[r.left, r.top, r.width, r.height] for r in regions]

    def _release_input(self) -> None:
        """The run's bindings go when it ends, not when the app exits (the tray app lives on)."""
        try:
            self.performer.close()
        except Exception:  # the run has ended either way; what could not be given back is logged
            log.exception("the input backend could not give back what the run set up")

    def _loop(self, task: str, writer: TrajectoryWriter | None) -> tuple[int, Outcome, str]:
        settings = self.settings
        history: deque[PastStep] = deque(maxlen=settings.history_steps)
        recent: deque[ScreenFrame] = deque(maxlen=settings.keep_screenshots)
        guard = LoopGuard(settings.loop_repeats)
        preparer = FramePreparer(self.policy.prepare_ahead if isinstance(self.policy, PreparesAhead) else None)
        self._preparer = preparer
        step = 0
        taken = 0  # steps that went through: the answer that ends the run is not one
        try:
            self._emit(EngineState.CAPTURING, 0)
            frame = self.frames.grab(settings.monitor)
            if settings.settle_first:
                frame, _ = wait_for_settle(
                    lambda: self.frames.grab(settings.monitor),
                    settings.settle_timeout_s,
                    settings.settle_poll_s,
                    sleep=self._sleep_or_stop,
                )
            while step < settings.max_steps:
                if self._wait_while_paused(step):
                    frame = self.frames.grab(settings.monitor)  # the user may have changed the screen
                step += 1
                self.cancel.raise_if_cancelled()
                self._first_step_began = True
                recent.append(frame)
                record: dict[str, Any] = {"type": "step", "index": step, "task": task, **frame_meta(frame)}
                own = self._own_regions()
                if own:
                    record["own_regions"] = own
                before = frame
                # The screenshot is encoded in the background; the step's line names it at once.
                self._step_log = writer.begin_step(record, frame) if writer else None
                self._action_began = False
                try:
                    past = self._one_step(task, step, frame, list(history), list(recent), guard, record)
                except _RunEnded:
                    taken += self._action_began  # an action that ran and then failed was a step taken
                    raise
                finally:
                    self._end_step_log()
                taken += 1
                self._emit(EngineState.SETTLING, step)
                frame, settled = wait_for_settle(
                    lambda: self.frames.grab(settings.monitor),
                    settings.settle_timeout_s,
                    settings.settle_poll_s,
                    sleep=self._sleep_or_stop,
                    on_candidate=preparer.offer,
                )
                self.cancel.raise_if_cancelled()
                if not settled:
                    log.info("screen still changing after %.1f s; going on", settings.settle_timeout_s)
                if past is not None:
                    past = self._judge_effect(step, past, record, before, frame, writer)
                    # A skipped step has no result; what became of it (its outcome) is shown instead.
                    self._previous_result = past.result or past.outcome
                    history.append(past)
            return taken, Outcome.STEP_LIMIT, f"stopped after {settings.max_steps} steps (the step limit)"
        except _RunEnded as ended:
            return taken, ended.outcome, ended.detail
        except (Cancelled, KeyboardInterrupt):  # Ctrl+C in the terminal is a stop too
            return taken, Outcome.STOPPED, self.cancel.reason if self.cancel.cancelled else "stopped by the user"
        except TrajectoryWriteError as exc:
            self._recording_failed = True
            return taken, Outcome.ERROR, f"{exc}; the run was stopped so that no step goes unrecorded"
        except CaptureError as exc:  # the screen went away (display closed, sharing stopped): not a bug
            log.warning("the screen could not be captured: %s", exc)
            return taken, Outcome.FAILED, f"the screen could not be captured: {exc}"
        finally:
            preparer.close()

    def _one_step(
        self,
        task: str,
        step: int,
        frame: ScreenFrame,
        history: Sequence[PastStep],
        frames: Sequence[ScreenFrame],
        guard: LoopGuard,
        record: dict[str, Any],
    ) -> PastStep | None:
        """One step; fills `record` as it goes. Returns the step for the history, or None if skipped."""
        self._emit(EngineState.THINKING, step)
        try:
            proposal = self._propose(task, history, frames)
        except UnusableProposal as exc:
            record.update(raw_text=exc.raw_text, error=f"unusable answer: {exc}", timings=timings_meta(exc.timings))
            raise _RunEnded(Outcome.ERROR, f"the model's answer was unusable: {exc}") from exc
        except EndRun as exc:  # the proposer asked the user, who stopped; or it cannot go on
            record["error"] = exc.detail
            raise _RunEnded(Outcome.STOPPED if exc.stopped else Outcome.FAILED, exc.detail) from exc
        except Cancelled:
            raise
        except Exception as exc:  # the backend failed (server gone, timeout): its message is written for people
            # A stop while the model thinks interrupts its request: the error that follows is the stop's.
            self.cancel.raise_if_cancelled()
            log.warning("the model could not answer: %s", exc)
            record["error"] = f"the model could not answer: {exc}"
            raise _RunEnded(Outcome.ERROR, f"the model could not answer: {exc}") from exc
        record.update(proposal_meta(proposal))
        past = PastStep(proposal.action, proposal.note, proposal.thought, proposal.element)
        previous_result, self._previous_result = self._previous_result, ""
        if proposal.action.kind in TERMINAL_KINDS:
            action = proposal.action
            if isinstance(action, Done):
                record["decision"] = "final"
                raise _RunEnded(Outcome.DONE, action.answer or "task finished")
            assert isinstance(action, AskUser)
            return self._ask(QuestionRequest(step, task, action.question, proposal, frame, self.cancel), record)

        mapping = FrameMapping(frame.region, proposal.image_width, proposal.image_height)
        try:
            screen_action = action_to_screen(proposal.action, proposal.space, mapping, frame.monitors)
        except OffScreenError as exc:
            record["error"] = f"target off screen: {exc}"
            raise _RunEnded(Outcome.ERROR, f"the proposed target is off screen: {exc}") from exc
        screen_action, adjustment = self._checked_before_approval(step, screen_action, frame, record)
        record["action_screen"] = screen_action.to_dict()
        record["action_text"] = screen_action.describe()

        looping = guard.observe(screen_action, frame)
        warning = (
            f"the same action was proposed {guard.repeats} times on a screen that did not change" if looping else ""
        )
        if looping:
            record["loop_warning"] = warning

        paste_text = self._paste_text(step, screen_action, record) if pastes(screen_action) else None
        if paste_text is not None:
            words = paste_in_words(paste_text)
            adjustment = "; ".join(part for part in (adjustment, words[:1].upper() + words[1:]) if part)
        rule = self.auto_approval.assess(screen_action, proposal.grounding, paste_text)
        if self._approved_all_exact and self.auto_approval.approve_all_covers(rule, looping=looping):
            decision = ApprovalDecision.approve()
            record["approved_by"] = "approve all: found exactly where recorded, types nothing"
        else:
            self._emit(EngineState.WAITING_APPROVAL, step, screen_action.describe())
            request = ApprovalRequest(
                step,
                task,
                proposal,
                screen_action,
                frame,
                self.cancel,
                warning,
                adjustment,
                previous_result,
                may_approve_all=rule.may_approve_all,
                why_asked=rule.why_asked,
                irreversible=rule.irreversible,
                paste_text=paste_text,
                asked_by=self.settings.asked_by,
            )
            decision = self.approver.decide(request)
            self.cancel.raise_if_cancelled()
        if decision.decision is Decision.APPROVE_ALL_EXACT:
            # Only a step the rule lets "approve all" cover starts it; any other is approved alone.
            self._approved_all_exact = self._approved_all_exact or rule.may_approve_all
            record["approve_all"] = rule.may_approve_all
            decision = ApprovalDecision.approve()
        record["decision"] = decision.decision.value
        if looping:
            guard.reset()  # the user has looked at it; count afresh

        if decision.decision is Decision.STOP:
            raise _RunEnded(Outcome.STOPPED, "stopped by the user at approval")
        if decision.decision is Decision.SKIP:
            return replace(past, outcome="skipped by the user: the action was not performed", performed=False)
        if decision.decision is Decision.EDIT:
            assert decision.action is not None
            try:
                screen_action = self._validated_edit(decision.action, frame)
            except (ActionError, OffScreenError) as exc:
                record["error"] = f"invalid edit: {exc}"
                raise _RunEnded(Outcome.ERROR, f"the edited action cannot run: {exc}") from exc
            screen_action, _ = self._checked_before_approval(step, screen_action, frame, record, what="edited action")
            record["edited_screen"] = screen_action.to_dict()
            corrected = "the user corrected this action before it ran; what ran is shown above"
            try:
                past = replace(past, action=action_to_model(screen_action, proposal.space, mapping), outcome=corrected)
            except OffScreenError:
                past = replace(past, outcome=corrected)  # moved off the captured monitor

        # What was shown is what is pasted: a selection changed since it was read is not approved.
        unedited_paste = paste_text is not None and decision.decision is not Decision.EDIT
        if unedited_paste and self._paste_text(step, screen_action, {}) != paste_text:
            record["error"] = "the primary selection changed after the step was shown"
            changed = "not performed: the primary selection changed after it was shown"
            record["result"] = {"ok": False, "detail": changed}
            self._fail_step(step, f"{screen_action.describe()}: the primary selection changed after it was shown")
        try:
            spaced = self._clicks.wait_before(screen_action, self.cancel)  # not joined to the last click
        except (Cancelled, KeyboardInterrupt):
            # Approved, then stopped before any input: the record says so rather than ending resultless.
            record["result"] = {"ok": False, "detail": "stopped before the action began: nothing was performed"}
            raise
        if spaced:
            record["spaced_from_last_click_s"] = round(spaced, 3)
            record["double_click_time"] = {"ms": self._clicks.interval.ms, "source": self._clicks.interval.source}
        self._write_step_ahead(step)
        self._emit(EngineState.ACTING, step, screen_action.describe())
        started = time.perf_counter()
        try:
            result = self.performer.execute(screen_action, self.cancel)
        except (Cancelled, KeyboardInterrupt):
            record["result"] = {"ok": False, "detail": "stopped part-way"}
            raise
        except Exception as exc:  # a backend may fail any way; the step ends in words
            record["result"] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}
            self._fail_step(step, f"could not {screen_action.describe()}: {exc}", exc)
        self._clicks.performed(screen_action)
        ok, detail = result.ok, result.detail
        record["result"] = {"ok": ok, "detail": detail, "duration_s": round(time.perf_counter() - started, 4)}
        if result.unconfirmed:
            record["result"]["unconfirmed"] = result.unconfirmed
            self._unconfirmed.append((step, result.unconfirmed))
        if not ok:
            self._fail_step(step, f"the desktop refused the action: {detail}")
        return replace(past, result=detail or screen_action.describe())

    # -- failures, checks before asking, effects --------------------------------------------------

    def _fail_step(self, step: int, reason: str, cause: BaseException | None = None) -> NoReturn:
        """End the run as FAILED, telling the listener first (the tray and terminal show it)."""
        self._emit(EngineState.STEP_FAILED, step, reason)
        raise _RunEnded(Outcome.FAILED, reason) from cause

    def _paste_text(self, step: int, action: Action, record: dict[str, Any]) -> str:
        """What a pasting step would paste, read now and recorded; the step fails in words when it cannot be read."""
        try:
            text = self.read_paste()
        except PasteUnreadable as exc:
            record["error"] = str(exc)
            self._fail_step(step, f"{action.describe()}: {exc}", exc)
        record["pastes"] = text
        return text

    def _checked_before_approval(
        self, step: int, action: Action, frame: ScreenFrame, record: dict[str, Any], what: str = "proposed action"
    ) -> tuple[Action, str]:
        """What would refuse the action at execution, checked before the user is asked.

        A target on a fail-safe corner pixel is moved one pixel inwards (said in the returned text);
        anything else the performer's `validate` refuses (off screen, unknown keys, untypable text, an
        option the focused program cannot honour) fails the step now, so the user never approves an
        action that cannot run.
        """
        action, notes = nudge_off_corners(action, frame.monitors)
        adjustment = "; ".join(notes)
        if adjustment:
            record["adjustment"] = adjustment
        try:
            try:
                self.performer.validate(action)
            except SelectAllNotHonoured as exc:
                if not (isinstance(action, TypeText) and action.overwrite):
                    raise
                # Shown without select-all, saying so, rather than ending the run: the person decides.
                action = replace(action, overwrite=False)
                self.performer.validate(action)
                note = (
                    f"Select-all is off: {exc.words}. Approve types the text without replacing what is there,"
                    " Edit changes it, Skip leaves it"
                )
                adjustment = "; ".join(part for part in (adjustment, note) if part)
                record["adjustment"] = adjustment
        except Cancelled:
            raise
        except (AutomationError, ValueError) as exc:
            record["error"] = f"{what} cannot run: {exc}"
            self._fail_step(step, f"the {what} cannot run: {exc}", exc)
        return action, adjustment

    def _judge_effect(
        self,
        step: int,
        past: PastStep,
        record: dict[str, Any],
        before: ScreenFrame,
        after: ScreenFrame,
        writer: TrajectoryWriter | None,
    ) -> PastStep:
        """Say "no visible change" when an executed action left the settled screen identical.

        The text goes into the past step's `result` (the model's next turn reads it as the tool's
        output), to the listener, and into the trajectory as an `effect` record.
        """
        if "result" not in record or not after.same_pixels(before):
            return past
        result = f"{past.result}: {NO_VISIBLE_CHANGE}" if past.result else NO_VISIBLE_CHANGE
        self._emit(EngineState.NO_VISIBLE_CHANGE, step, result)
        if writer is not None:
            writer.append({"type": "effect", "index": step, "visible_change": False, "result": result}, sync=False)
        return replace(past, result=result)

    def _ask(self, request: QuestionRequest, record: dict[str, Any]) -> PastStep:
        """Put the model's question to the user; the reply becomes the step's result for the model."""
        if self.questions is None:
            record["decision"] = "final"
            raise _RunEnded(Outcome.ASK_USER, request.question)
        self._emit(EngineState.WAITING_ANSWER, request.step, request.question)
        reply = self.questions.answer_question(request)
        self.cancel.raise_if_cancelled()
        if reply is None:
            record["decision"] = "stop"
            raise _RunEnded(Outcome.STOPPED, "stopped by the user instead of answering")
        record["decision"] = "answered"
        record["reply"] = reply
        proposal = request.proposal
        return PastStep(proposal.action, proposal.note, proposal.thought, result=f"The user replied: {reply}")

    def _wait_while_paused(self, step: int) -> bool:
        """Block while paused (still honouring stop); True if the run was paused."""
        if self._resumed.is_set():
            return False
        self._emit(EngineState.PAUSED, step)
        while not self._resumed.wait(STOP_POLL_S):
            self.cancel.raise_if_cancelled()
        self.cancel.raise_if_cancelled()
        return True

    def _sleep_or_stop(self, seconds: float) -> None:
        if self.cancel.sleep(seconds):
            self.cancel.raise_if_cancelled()

    def _validated_edit(self, action: Action, frame: ScreenFrame) -> Action:
        if not isinstance(action, Action) or action.kind in TERMINAL_KINDS:
            raise ActionError(f"an edit must be a desktop action, got {action!r}")
        for point in action.points():
            monitor_at(point, frame.monitors)
        return action

    def _propose(self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame]) -> Proposal:
        """Run the policy on a worker thread so a stop is honoured while the model computes."""
        self._preparer.wait_for(frames[-1])
        future: Future[Proposal] = Future()

        def work() -> None:
            try:
                future.set_result(self.policy.propose(task, history, frames, self.cancel))
            except BaseException as exc:  # handed to the waiting loop, which re-raises it
                future.set_exception(exc)

        threading.Thread(target=work, name="holodesk-propose", daemon=True).start()
        while True:
            self.cancel.raise_if_cancelled()
            try:
                return future.result(timeout=STOP_POLL_S)
            except TimeoutError:
                continue

    # -- recording -------------------------------------------------------------------------------

    def _open_trajectory(self, task: str) -> TrajectoryWriter | None:
        """The session's writer (TrajectoryWriteError when its folder cannot be written), or None."""
        settings = self.settings
        if settings.trajectory_root is None:
            return None
        return TrajectoryWriter.create(settings.trajectory_root, task, {"settings": settings_meta(settings)})

    def _confirm_recording(self, writer: TrajectoryWriter, outcome: Outcome, detail: str) -> tuple[Outcome, str]:
        """At the run's end, wait for the last screenshots: one that could not be written makes the
        outcome an error, in words (unless the run already ended for a recording fault)."""
        try:
            writer.confirm_screenshots(self.settings.screenshot_wait_s)
        except TrajectoryWriteError as exc:
            if self._recording_failed:
                log.error("%s", exc)
                return outcome, detail
            return Outcome.ERROR, f"{exc}; the run had ended ({outcome.value}: {detail}) but its record is incomplete"
        return outcome, detail

    def _write_step_ahead(self, step: int) -> None:
        """Put the step (proposal, mapped action, decision, screenshot) on disk before its action sends
        any input. Waits (bounded, stoppable) for a screenshot still being written, saying so."""
        step_log = self._step_log
        if step_log is not None:
            if step_log.screenshots_pending():
                self._emit(EngineState.SAVING, step, "saving the step's screenshot before acting")
            step_log.write_ahead(self.settings.screenshot_wait_s, self.cancel)
        self._action_began = True

    def _end_step_log(self) -> None:
        """Write how the step ended: its result, or the whole step if it never reached an action."""
        step_log, self._step_log = self._step_log, None
        if step_log is not None:
            step_log.close()

    def _emit(self, state: EngineState, step: int, detail: str = "", result: RunResult | None = None) -> None:
        if self.listener is None:
            return
        try:
            self.listener(EngineEvent(state, step, detail, result))
        except Exception:  # a broken listener must not break the run
            log.exception("engine listener failed")


def _unconfirmed_words(steps: list[tuple[int, str]]) -> str:
    """What the run's summary adds for steps whose keys could not be confirmed received ("" for none)."""
    if not steps:
        return ""
    which = ", ".join(str(step) for step, _ in steps)
    whys = "; ".join(dict.fromkeys(why for _, why in steps))
    plural = "s" if len(steps) > 1 else ""
    return f"; the text of step{plural} {which} was sent but could not be confirmed to have arrived as sent ({whys})"
