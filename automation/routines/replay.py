"""Replaying a routine: locate each step's target, ask what must be asked, act, check the effect.

The runner depends on four seams only: a `Performer` that executes a screen-space action, a
`FrameSource` that captures the screen, a `RoutineApprover` (the terminal or the tray) and,
optionally, a `Grounder` (the model's `locate`) for targets the pictures cannot find.

Approval: a step located EXACTLY (its picture where it was recorded) may be approved with all the
other exact steps in one go; a step found by a weaker locator or by the model is shown and asked on
its own; an irreversible step (send, save, delete, submit...) is always asked. A target that no
locator finds unambiguously is never guessed: the user is asked (retry, stop, or continue with the
agent). After each step the expected effect is checked; when it is missing the screen is checked
once more after it settles again, then the user is asked. "Continue with the agent" ends the
replay with a task for the normal agent loop: the routine's task and what was done so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Protocol

import numpy as np
from PIL import Image

from holodesk.automation.actions import Action, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine import FrameSource
from holodesk.automation.errors import Cancelled, CaptureError
from holodesk.automation.routines.effects import check_effect
from holodesk.automation.routines.locators import Grounder, Located, NotLocated, Rung, TargetLocator
from holodesk.automation.routines.repair import ProposedRepair, propose_repair, write_repair
from holodesk.automation.routines.routine_file import Routine, RoutineStep
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.screen_change import wait_for_settle

SETTLE_TIMEOUT_S = 3.0
SETTLE_POLL_S = 0.05


class ActionResult(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def detail(self) -> str: ...


class Performer(Protocol):
    """Executes one screen-space action (the action performer of either desktop backend)."""

    def execute(self, action: Action, cancel: CancelToken) -> ActionResult: ...


class Verdict(StrEnum):
    APPROVE = "approve"
    APPROVE_ALL_EXACT = "approve_all_exact"  # this step, and every later exact, reversible one
    SKIP = "skip"
    STOP = "stop"


class ProblemChoice(StrEnum):
    RETRY = "retry"  # look again (the user fixed the screen)
    CONTINUE = "continue"  # the effect is fine after all: go on with the next step
    HAND_OVER = "hand_over"  # continue with the agent
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class StepRequest:
    """A step waiting for approval: the action as it would run, where its target was found and why asked."""

    routine: Routine
    step: RoutineStep
    action: Action
    frame: ScreenFrame
    located: Located | None  # None: a step without a target (keys, typing into the focused field)
    why_asked: str
    cancel: CancelToken


@dataclass(frozen=True, slots=True)
class ProblemRequest:
    """The replay cannot go on by itself: the target is not found, or the effect did not appear."""

    routine: Routine
    step: RoutineStep
    frame: ScreenFrame
    problem: str
    effect_missing: bool  # True: the step ran; CONTINUE is offered
    cancel: CancelToken


@dataclass(frozen=True, slots=True)
class RepairRequest:
    """A step the pictures no longer found was located another way; write that into the routine?"""

    routine: Routine
    step: RoutineStep
    located: Located
    frame: ScreenFrame
    repair: ProposedRepair  # the routine as it would be, and the diff to review


class RoutineApprover(Protocol):
    def decide(self, request: StepRequest) -> Verdict: ...

    def problem(self, request: ProblemRequest) -> ProblemChoice: ...

    def offer_repair(self, request: RepairRequest) -> bool: ...


class ReplayOutcome(StrEnum):
    DONE = "done"
    STOPPED = "stopped"
    FAILED = "failed"
    HANDED_OVER = "handed_over"


class EventKind(StrEnum):
    LOCATING = "locating"
    LOCATED = "located"
    WAITING_APPROVAL = "waiting_approval"
    ACTING = "acting"
    CHECKING = "checking"
    STEP_DONE = "step_done"
    PROBLEM = "problem"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class RoutineEvent:
    kind: EventKind
    step: int
    detail: str = ""
    point: Point | None = None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """How one step went: its locator, its times (ms) and whether the model was asked."""

    number: int
    rung: str
    locate_ms: float
    act_ms: float
    settle_ms: float
    model_calls: int
    asked: bool
    effect: str


@dataclass
class ReplayResult:
    outcome: ReplayOutcome
    detail: str
    steps_done: int
    records: list[StepRecord] = field(default_factory=list)
    repairs_written: list[Path] = field(default_factory=list)  # the previous revisions kept, one per repair
    handover_task: str = ""

    @property
    def model_calls(self) -> int:
        return sum(record.model_calls for record in self.records)


class ParameterError(ValueError):
    """A --set that names no parameter, or a value that cannot be typed."""


def parameter_values(routine: Routine, given: Mapping[str, str]) -> dict[str, str]:
    """Every parameter's value (given, else its default); ParameterError for an unknown name."""
    unknown = sorted(set(given) - {p.name for p in routine.parameters})
    if unknown:
        known = ", ".join(p.name for p in routine.parameters) or "none"
        raise ParameterError(f"the routine {routine.name!r} has no parameter {', '.join(unknown)} (it has: {known})")
    values = {p.name: given.get(p.name, p.default) for p in routine.parameters}
    for name, value in values.items():
        if not value.strip():
            raise ParameterError(f"the parameter {name} is empty: give it a value with --set {name}=VALUE")
    return values


def _picture(routine: Routine, relative: str) -> np.ndarray | None:
    if not relative:
        return None
    with Image.open(routine.crop_path(relative)) as image:
        return np.asarray(image.convert("RGB"))


class RoutineRunner:
    """Replays one routine; `run` blocks (call it off the UI thread)."""

    def __init__(
        self,
        routine: Routine,
        performer: Performer,
        frames: FrameSource,
        approver: RoutineApprover,
        *,
        grounder: Grounder | None = None,
        monitor: int | None = 1,
        listener: Callable[[RoutineEvent], None] | None = None,
        cancel: CancelToken | None = None,
    ) -> None:
        self.routine = routine
        self.performer = performer
        self.frames = frames
        self.approver = approver
        self.grounder = grounder
        self.monitor = monitor
        self.listener = listener
        self.cancel = cancel or CancelToken()
        self._approved_exact = False
        self._pictures: dict[str, np.ndarray | None] = {}

    def stop(self) -> None:
        self.cancel.cancel()

    def run(self, values: Mapping[str, str] | None = None) -> ReplayResult:
        """Replay every step. ParameterError (before anything runs) for a bad --set."""
        resolved = parameter_values(self.routine, values or {})
        result = ReplayResult(ReplayOutcome.DONE, "", 0)
        try:
            # A routine is often started as a window opens or a page loads: begin on a settled screen.
            frame = self._settled()
            for step in self.routine.steps:
                self.cancel.raise_if_cancelled()
                ended, frame = self._step(step, frame, resolved, result)
                if ended:
                    break
            else:
                result.detail = f"all {len(self.routine.steps)} steps of {self.routine.name!r} done"
        except (Cancelled, KeyboardInterrupt):
            result.outcome, result.detail = (
                ReplayOutcome.STOPPED,
                self.cancel.reason if self.cancel.cancelled else "stopped",
            )
        except CaptureError as exc:
            result.outcome, result.detail = ReplayOutcome.FAILED, f"the screen could not be captured: {exc}"
        self._emit(EventKind.FINISHED, result.steps_done, f"{result.outcome.value}: {result.detail}")
        return result

    # -- one step --------------------------------------------------------------------------------

    def _step(
        self, step: RoutineStep, frame: ScreenFrame, values: Mapping[str, str], result: ReplayResult
    ) -> tuple[bool, ScreenFrame]:
        """Run one step; (True, frame) when the replay ends here."""
        started = time.perf_counter()
        self._emit(EventKind.LOCATING, step.number, step.describe())
        located: Located | None = None
        model_calls = 0
        while step.target is not None:
            locator = TargetLocator(frame, self.grounder)
            found = locator.locate(step.target, *self._target_pictures(step))
            model_calls += locator.model_calls
            if isinstance(found, Located):
                located = found
                break
            choice = self._ask_problem(step, frame, self._not_found_words(step, found), effect_missing=False)
            if choice is ProblemChoice.RETRY:
                frame = self.frames.grab(self.monitor)
                continue
            return self._end(result, step, choice, f"step {step.number}: the target was not found"), frame
        locate_ms = (time.perf_counter() - started) * 1000
        action = self._action(step, located, values)
        if located is not None:
            self._emit(EventKind.LOCATED, step.number, located.detail, located.point)
        asked, why = self._why_ask(step, located)
        if asked:
            self._emit(EventKind.WAITING_APPROVAL, step.number, why)
            verdict = self.approver.decide(StepRequest(self.routine, step, action, frame, located, why, self.cancel))
            self.cancel.raise_if_cancelled()
            if verdict is Verdict.STOP:
                result.outcome, result.detail = ReplayOutcome.STOPPED, f"stopped by the user at step {step.number}"
                return True, frame
            if verdict is Verdict.SKIP:
                self._emit(EventKind.STEP_DONE, step.number, "skipped by the user")
                return False, frame
            if verdict is Verdict.APPROVE_ALL_EXACT:
                self._approved_exact = True
        self._emit(EventKind.ACTING, step.number, action.describe(), located.point if located else None)
        acted = time.perf_counter()
        outcome = self.performer.execute(action, self.cancel)
        act_ms = (time.perf_counter() - acted) * 1000
        if not outcome.ok:
            result.outcome = ReplayOutcome.FAILED
            result.detail = f"step {step.number}: the desktop refused {action.describe()}: {outcome.detail}"
            return True, frame
        settling = time.perf_counter()
        after = self._settled()
        target_now = (located.point.x, located.point.y) if located else None
        self._emit(EventKind.CHECKING, step.number)
        check = check_effect(step.expect, target_now, frame, after)
        if not check.seen:  # re-check once: the program may still have been busy
            after = self._settled()
            check = check_effect(step.expect, target_now, frame, after)
        settle_ms = (time.perf_counter() - settling) * 1000
        result.records.append(
            StepRecord(
                step.number,
                located.rung.value if located else "no target",
                locate_ms,
                act_ms,
                settle_ms,
                model_calls,
                asked,
                check.detail,
            )
        )
        result.steps_done += 1
        if not check.seen:
            choice = self._ask_problem(step, after, f"step {step.number} ran, but {check.detail}", effect_missing=True)
            if choice is not ProblemChoice.CONTINUE:
                return self._end(result, step, choice, f"step {step.number}: {check.detail}", done=True), after
        if located is not None and located.rung is Rung.MODEL and self.routine.folder is not None:
            proposed = propose_repair(self.routine, step, located.point, frame)
            if self.approver.offer_repair(RepairRequest(self.routine, step, located, frame, proposed)):
                result.repairs_written.append(write_repair(proposed))
                self.routine = proposed.routine
        self._emit(EventKind.STEP_DONE, step.number, check.detail)
        return False, after

    def _target_pictures(self, step: RoutineStep) -> tuple[np.ndarray, np.ndarray | None]:
        assert step.target is not None
        for relative in (step.target.crop, step.target.context):
            if relative not in self._pictures:
                self._pictures[relative] = _picture(self.routine, relative)
        crop = self._pictures[step.target.crop]
        assert crop is not None  # the loader checked the file exists
        return crop, self._pictures[step.target.context]

    def _why_ask(self, step: RoutineStep, located: Located | None) -> tuple[bool, str]:
        if step.irreversible:
            return True, "irreversible (send, save, delete, submit...): always asked"
        if located is not None and not located.exact:
            return True, f"found by {located.rung.value}: {located.detail}"
        if self._approved_exact:
            return False, ""
        if located is None:
            return True, "a step without a target"
        return True, f"found exactly ({located.detail})"

    def _action(self, step: RoutineStep, located: Located | None, values: Mapping[str, str]) -> Action:
        action = step.action
        if isinstance(action, TypeText) and step.text_parameter:
            action = replace(action, text=values[step.text_parameter])
        if located is None or step.target is None:
            return action
        dx = located.point.x - step.target.point[0]
        dy = located.point.y - step.target.point[1]
        return action.map_points(lambda p: Point(p.x + dx, p.y + dy))

    def _settled(self) -> ScreenFrame:
        frame, _ = wait_for_settle(
            lambda: self.frames.grab(self.monitor), SETTLE_TIMEOUT_S, SETTLE_POLL_S, sleep=self._sleep
        )
        return frame

    def _sleep(self, seconds: float) -> None:
        if self.cancel.sleep(seconds):
            self.cancel.raise_if_cancelled()

    def _not_found_words(self, step: RoutineStep, found: NotLocated) -> str:
        what = step.target.element if step.target and step.target.element else f"step {step.number}'s target"
        kind = "found in more than one place" if found.ambiguous else "not found"
        return f"{what} was {kind} ({found.detail})"

    def _ask_problem(
        self, step: RoutineStep, frame: ScreenFrame, problem: str, *, effect_missing: bool
    ) -> ProblemChoice:
        self._emit(EventKind.PROBLEM, step.number, problem)
        choice = self.approver.problem(ProblemRequest(self.routine, step, frame, problem, effect_missing, self.cancel))
        self.cancel.raise_if_cancelled()
        return choice

    def _end(
        self, result: ReplayResult, step: RoutineStep, choice: ProblemChoice, problem: str, *, done: bool = False
    ) -> bool:
        if choice is ProblemChoice.HAND_OVER:
            result.outcome = ReplayOutcome.HANDED_OVER
            result.detail = f"{problem}; handed to the agent"
            result.handover_task = handover_task(self.routine, step.number if not done else step.number + 1)
        elif choice is ProblemChoice.STOP:
            result.outcome, result.detail = ReplayOutcome.STOPPED, f"{problem}; stopped by the user"
        else:
            result.outcome, result.detail = ReplayOutcome.FAILED, problem
        return True

    def _emit(self, kind: EventKind, step: int, detail: str = "", point: Point | None = None) -> None:
        if self.listener is not None:
            self.listener(RoutineEvent(kind, step, detail, point))


def handover_task(routine: Routine, next_step: int) -> str:
    """The task the agent continues with: the routine's task, what was done, what was left."""
    done = [s for s in routine.steps if s.number < next_step]
    left = [s for s in routine.steps if s.number >= next_step]
    lines = [routine.task]
    if done:
        lines.append(
            "Already done by the routine " + repr(routine.name) + ": " + "; ".join(s.describe() for s in done) + "."
        )
    if left:
        lines.append("Still to do (the routine could not): " + "; ".join(s.describe() for s in left) + ".")
    lines.append("Continue from the screen as it is now.")
    return "\n".join(lines)
