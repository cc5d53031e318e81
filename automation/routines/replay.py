"""Replaying a routine is a run of the step engine: the routine is the proposer.

`RoutinePolicy` implements the engine's `Policy`: each `propose` returns the routine's next step,
its target found again on the current screen through the locator ladder (the model's `locate` as
the last rung, where one is given), in the frame's own pixels, with a `Grounding` that says how the
target was found. Everything else is the engine's, as for the agent's steps: approval (its rules,
`automation.auto_approval`, decide what "approve all" covers), stop and pause, write-ahead
recording of every step into a session (`holodesk history` lists the replay), releasing the input
the run held, listener isolation.

Before proposing the next step, the proposer judges the effect of the step before on what it acted
on (`effects`): the window it typed into or clicked, asked of the desktop (`windows`) just before
it ran and again after, not a rectangle fixed to the recorded point. Where the effect cannot be
judged fairly it says so and goes on. A target that no locator finds unambiguously is never
guessed, and a missing effect (evidence that the step did not happen) is checked once more: then
the user is asked (`RoutineQuestions`): look again, go on, continue with
the agent, or stop. "Continue with the agent" hands the same run, its session and its history to
the model's policy, with a task that says what the routine did and what is left, in the values given
with --set. A step found by the model, that then did what it did when recorded, is offered as a
repair of the routine file, only when its effect was seen without asking the user.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from holodesk.automation.actions import Action, Done, HoldAndTap, KeyCombo, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import FrameMapping, ImagePixelSpace, ModelSpace
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import (
    ActionPerformer,
    Approver,
    EngineEvent,
    EngineSettings,
    FrameSource,
    QuestionAnswerer,
    ShowsOwnRegions,
)
from holodesk.automation.errors import AutomationError, OffScreenError
from holodesk.automation.proposal import (
    EndRun,
    Grounding,
    PastStep,
    Policy,
    Proposal,
    RunEndWords,
    UnusableProposal,
)
from holodesk.automation.routines.effects import ActedOn, EffectCheck, judge_effect
from holodesk.automation.routines.locators import Grounder, Located, NotLocated, Rung, TargetLocator
from holodesk.automation.routines.pictures import PictureError, load_picture
from holodesk.automation.routines.repair import CannotRepair, ProposedRepair, propose_repair, write_repair
from holodesk.automation.routines.routine_file import Routine, RoutineStep
from holodesk.automation.routines.verdicts import StepVerdict, how_found, judge_step
from holodesk.automation.routines.windows import WindowProbe, desktop_windows
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.screen_change import wait_for_settle
from holodesk.automation.trajectory import VERDICTS_KEY

log = logging.getLogger(__name__)

SETTLE_TIMEOUT_S = 3.0
# A locator's detail up to this long, with one reason, goes into the question's sentence; a longer one
# (how each way of looking fared) is shown apart, under the sentence or behind Show Details.
SHORT_DETAIL = 80
SETTLE_POLL_S = 0.05
# Words in a target's description that make a step irreversible whatever the file says (the
# compiler writes `irreversible = true` for them; a hand edit cannot turn that off).
IRREVERSIBLE_WORDS = re.compile(
    r"\b(send|save|delete|submit|remove|pay|buy|purchase|post|publish|confirm|order|transfer|erase|discard|sign)\b",
    re.IGNORECASE,
)


class ProblemChoice(StrEnum):
    RETRY = "retry"  # look again (the user fixed the screen)
    CONTINUE = "continue"  # the effect is fine after all: go on with the next step
    HAND_OVER = "hand_over"  # continue with the agent
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class ProblemRequest:
    """The replay cannot go on by itself: the target is not found, or the effect did not appear."""

    routine: Routine
    step: RoutineStep
    frame: ScreenFrame
    problem: str  # one sentence: what is wrong
    effect_missing: bool  # True: the step ran; CONTINUE is offered
    cancel: CancelToken
    detail: str = ""  # how each way of looking fared, for a "details" view ("" when the sentence says it all)


@dataclass(frozen=True, slots=True)
class RepairRequest:
    """A step the pictures no longer found was located another way; write that into the routine?"""

    routine: Routine
    step: RoutineStep
    located: Located
    frame: ScreenFrame
    repair: ProposedRepair  # the routine as it would be, and the diff to review
    cancel: CancelToken  # the run's (the engine's): a stop withdraws the question


class RoutineQuestions(Protocol):
    """What only a routine asks (the terminal and the tray each answer): a problem, a repair.

    Called on the engine's proposing thread; must return promptly once `request.cancel` is cancelled
    (a problem) or the run is stopped."""

    def problem(self, request: ProblemRequest) -> ProblemChoice: ...

    def offer_repair(self, request: RepairRequest) -> bool: ...


@dataclass(frozen=True, slots=True)
class HandOver:
    """The agent that takes the run over: its policy and the coordinate space its history is in."""

    policy: Policy
    space: ModelSpace


@dataclass(frozen=True, slots=True)
class StepRecord:
    """How one routine step was found: its rung, the time it took (ms) and the model calls."""

    number: int
    rung: str
    locate_ms: float
    model_calls: int


class ParameterError(AutomationError):
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


def task_with_values(routine: Routine, values: Mapping[str, str]) -> str:
    """The routine's task as this run's task: a parameter's recorded value in its words is replaced by
    the value given; a given value the words do not contain is added to them. Each value is said once,
    and the recorded one not at all (the agent must not read two values for one thing)."""
    task = routine.task
    added: list[str] = []
    for parameter in routine.parameters:
        value = values.get(parameter.name)
        if value is None or value == parameter.default:
            continue
        if parameter.default and parameter.default in task:
            task = task.replace(parameter.default, value)
        else:
            added.append(f"{parameter.description or parameter.name}: {value!r}")
    return f"{task} (this time with {'; '.join(added)})" if added else task


# What the run's outcome says the agent (or a replay that did not finish) did, after "then the agent".
_AGENT_ENDS = {
    "done": "finished",
    "stopped": "was stopped",
    "step_limit": "reached the step limit",
    "ask_user": "asked you",
    "failed": "failed",
    "error": "failed",
}


def _flagged_words(steps: Sequence[int]) -> str:
    which = ", ".join(str(number) for number in steps)
    return f"step {which} flagged" if len(steps) == 1 else f"steps {which} flagged"


def handover_task(routine: Routine, next_step: int, values: Mapping[str, str]) -> str:
    """The task the agent continues with: the routine's task as this run's (`task_with_values`), what
    was done, what was left, in the values given for this run (not the recorded ones)."""
    done = [s for s in routine.steps if s.number < next_step]
    left = [s for s in routine.steps if s.number >= next_step]
    lines = [task_with_values(routine, values)]
    if done:
        lines.append(
            "Already done by the routine "
            + repr(routine.name)
            + ": "
            + "; ".join(s.describe(values) for s in done)
            + "."
        )
    if left:
        lines.append("Still to do (the routine could not): " + "; ".join(s.describe(values) for s in left) + ".")
    lines.append("Continue from the screen as it is now.")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Ran:
    """A step proposed and (as the history will say) maybe performed: what its effect check needs."""

    step: RoutineStep
    located: Located | None
    before: ScreenFrame
    acted: ActedOn  # the window it acts on and where the keys went, as they were before it ran


class _HandOverNow(Exception):
    """The user chose "continue with the agent": `where` ("at step 2 of 3", "after step 2 of 3") and `why`
    in words, for the notice and the run's end."""

    def __init__(self, next_step: int, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.next_step = next_step
        self.where = where
        self.why = why


class RoutinePolicy:
    """The routine as the engine's proposer (see the module's docstring). One run per instance.

    The questions asked while proposing carry the token `propose` is given (the engine's): they end
    when the run is stopped, however the policy was built. `agent` builds the agent for "continue
    with the agent" (the model loads then), or returns why there is none; None: the choice is not
    offered.
    `notify` receives a line for each step found and each effect checked.
    """

    def __init__(
        self,
        routine: Routine,
        values: Mapping[str, str],
        frames: FrameSource,
        questions: RoutineQuestions,
        *,
        grounder: Grounder | None = None,
        agent: Callable[[], HandOver | str] | None = None,
        monitor: int | None = 1,
        notify: Callable[[str], None] | None = None,
        windows: Callable[[], WindowProbe | None] = desktop_windows,
    ) -> None:
        self.routine = routine
        self.values = parameter_values(routine, values)
        self.frames = frames
        self.questions = questions
        self.grounder = grounder
        self.agent = agent
        self.monitor = monitor
        self.notify = notify
        self.windows = windows()  # None: effects are judged on the whole screen
        self.records: list[StepRecord] = []
        self.repairs_written: list[Path] = []
        self.handover_task = ""  # set when the agent took over
        self._next = 0  # index of the next routine step
        self._ran: _Ran | None = None
        self._pictures: dict[str, np.ndarray] = {}
        # What the last step's check could not judge, said again with the next step (its panel and its
        # session record) and at the end: a front end without `notify` (the tray) shows it there.
        self._unjudged: list[str] = []
        # The verdicts on steps that ran, each recorded with the next proposal (`verdicts`).
        self._verdicts: list[StepVerdict] = []
        self._handover: HandOver | None = None
        self._agent_proposals = 0
        # Every model call, counted as it is made: a locate whose step then went to the agent has no
        # record, and the agent's steps (a refused answer asked again: two calls) have none either.
        self._locate_calls = 0
        self._agent_calls = 0
        # For the run's end in words (`end_words`): the routine step at hand (proposed, or asked about),
        # how many steps ran, which were flagged, and where and why the agent took over.
        self._at_step = 0
        self._steps_ran = 0
        self._all_proposed = False  # the routine's end was proposed: every step had run
        self._flagged: list[int] = []
        self._handed: _HandOverNow | None = None
        self.ended: RunEndWords | None = None  # how the run ended, once it has (`end_words`)

    @property
    def model_calls(self) -> int:
        """Every call to the model this run made: to locate targets, and the agent's after a hand-over."""
        return self._locate_calls + self._agent_calls

    @property
    def handed_over(self) -> bool:
        return self._handover is not None

    @property
    def handed_over_words(self) -> str:
        """After a hand-over, the line an agent's step is shown with: whose step it is, since where."""
        handed = self._handed
        if handed is None:
            return ""
        return f"The agent continues the routine {self.routine.name!r}, handed over {handed.where}: {handed.why}"

    # -- the Policy protocol ------------------------------------------------------------------------

    def interrupt(self) -> None:
        if self._handover is not None:
            self._handover.policy.interrupt()

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        if self._handover is not None:
            return self._agent_propose(history, frames, cancel)
        frame = frames[-1]
        try:
            ran, self._ran = self._ran, None
            if ran is not None and history and history[-1].performed and not history[-1].outcome:
                frame = self._effect_seen(ran, frame, cancel)
            if self._next >= len(self.routine.steps):
                return self._finished(frame)
            step = self.routine.steps[self._next]
            self._at_step = step.number
            proposal = self._step_proposal(step, frame, cancel)
        except _HandOverNow as handing:
            return self._hand_over(handing, history, frames, cancel)
        self._next += 1
        return proposal

    # -- one step -------------------------------------------------------------------------------------

    def _step_proposal(self, step: RoutineStep, frame: ScreenFrame, cancel: CancelToken) -> Proposal:
        started = time.perf_counter()
        located: Located | None = None
        model_calls = 0
        while step.target is not None:
            locator = TargetLocator(frame, self.grounder)
            found = locator.locate(step.target, *self._target_pictures(step))
            model_calls += locator.model_calls
            self._locate_calls += locator.model_calls
            if isinstance(found, Located):
                located = found
                break
            problem, detail = self._not_found_words(step, found), found.detail
            if ";" not in detail and len(detail) <= SHORT_DETAIL:  # one reason: said in the sentence itself
                problem, detail = f"{problem} ({detail})", ""
            choice = self._ask(step, frame, problem, cancel, effect_missing=False, detail=detail)
            if choice is ProblemChoice.RETRY:
                frame = self._settled(cancel)
                continue
            where = f"at step {step.number} of {len(self.routine.steps)}"
            raise _HandOverNow(step.number, where, self._not_found_words(step, found))  # its detail was shown
        self.records.append(
            StepRecord(
                step.number,
                located.rung.value if located else "no target",
                (time.perf_counter() - started) * 1000,
                model_calls,
            )
        )
        action = self._action(step, located)
        if located is not None:
            self._say(f"step {step.number} located: {located.detail}")
        self._ran = _Ran(step, located, frame, self._acted_before(action))
        return self._proposal(step, action, located, frame)

    def _proposal(self, step: RoutineStep, action: Action, located: Located | None, frame: ScreenFrame) -> Proposal:
        """The step as a proposal in the frame's own pixels (ImagePixelSpace over the frame's size)."""
        region = frame.region
        mapping = FrameMapping(region, region.width, region.height)
        try:
            in_frame = action.map_points(lambda p: mapping.screen_to_model(p, ImagePixelSpace()))
        except OffScreenError as exc:
            raise EndRun(f"step {step.number}'s target is off the captured screen: {exc}", stopped=False) from exc
        total = len(self.routine.steps)
        source = f"routine {self.routine.name!r}, step {step.number} of {total}"
        element = step.target.element if step.target is not None else ""
        how = how_found(located)
        said, self._unjudged = self._unjudged, []
        thought = "; ".join([*said, how]) if said else how
        irreversible = step.irreversible or bool(element and IRREVERSIBLE_WORDS.search(element))
        grounding = Grounding(
            exact=located is not None and located.exact,
            how=how,
            source=source,
            irreversible=irreversible,
            record={
                "routine": self.routine.name,
                "routine_step": step.number,
                "rung": located.rung.value if located is not None else "",
                "score": round(located.score, 4) if located is not None else None,
                **self._verdicts_record(),
            },
        )
        return Proposal(
            action=in_frame,
            raw_text="",
            image_width=region.width,
            image_height=region.height,
            note=f"Routine {self.routine.name!r}, step {step.number} of {total}: {step.describe(self.values)}",
            thought=thought,
            space=ImagePixelSpace(),
            element=element,
            grounding=grounding,
        )

    def _action(self, step: RoutineStep, located: Located | None) -> Action:
        """The step's action in screen pixels: its parameter's value typed, moved to where the target is."""
        action = step.action
        if isinstance(action, TypeText) and step.text_parameter:
            action = replace(action, text=self.values[step.text_parameter])
        if located is None or step.target is None:
            return action
        dx = located.point.x - step.target.point[0]
        dy = located.point.y - step.target.point[1]
        return action.map_points(lambda p: Point(p.x + dx, p.y + dy))

    def _target_pictures(self, step: RoutineStep) -> tuple[np.ndarray, np.ndarray | None]:
        assert step.target is not None
        folder = self.routine.folder
        if folder is None:
            raise EndRun(f"the routine {self.routine.name!r} has no folder: its pictures cannot be read", stopped=False)
        for relative in (step.target.crop, step.target.context):
            if relative and relative not in self._pictures:
                try:
                    self._pictures[relative] = load_picture(folder, relative)
                except PictureError as exc:
                    raise EndRun(f"step {step.number}: {exc}", stopped=False) from None
        context = self._pictures.get(step.target.context) if step.target.context else None
        return self._pictures[step.target.crop], context

    # -- effects, repairs, the end ---------------------------------------------------------------------

    def _effect_seen(self, ran: _Ran, after: ScreenFrame, cancel: CancelToken) -> ScreenFrame:
        """Judge the step's effect (once more on a settled screen if missing); the user decides when it
        is still missing. Returns the frame the next step is located on.

        A repair is offered only for a step whose effect was seen without asking: never after the
        user was told that nothing changed, nor when the effect could not be judged."""
        step = ran.step
        self._steps_ran += 1
        check = self._check(ran, after)
        if not check.seen:  # the program may still have been busy
            after = self._settled(cancel)
            check = self._check(ran, after)
        asked = False
        problem = ""
        while not check.seen:
            asked = True
            problem = problem or check.detail
            # The step in words too: "it typed there" alone does not say what it typed, nor where.
            ran_but = f"step {step.number}, {step.describe(self.values)}, ran, but {check.detail}"
            choice = self._ask(step, after, ran_but, cancel, effect_missing=True)
            if choice is ProblemChoice.CONTINUE:
                break
            if choice is ProblemChoice.RETRY:
                after = self._settled(cancel)
                check = self._check(ran, after)
                continue
            where = f"after step {step.number} of {len(self.routine.steps)}"
            raise _HandOverNow(step.number + 1, where, ran_but)
        if asked and not check.seen:
            self._say(f"step {step.number}: going on as asked ({check.detail})")
        elif not check.judged:
            self._say(f"step {step.number}: {check.detail}")
            self._unjudged.append(f"step {step.number}: {check.detail}")
        else:
            self._say(f"step {step.number} done: {check.detail}")
        verdict = judge_step(step.number, ran.located, check, problem)
        self._verdicts.append(verdict)
        if verdict.flags:
            self._flagged.append(step.number)
        fair = check.seen and check.judged and not asked
        if fair and ran.located is not None and ran.located.rung is Rung.MODEL and self.routine.folder is not None:
            self._offer_repair(step, ran.located, ran.before, cancel)
        return after

    def _acted_before(self, action: Action) -> ActedOn:
        """The window `action` will act on and where keys go, asked just before it runs."""
        typing = isinstance(action, (TypeText, KeyCombo, HoldAndTap))
        if self.windows is None:
            return ActedOn(typing)
        keys = self.windows.keyboard_window()
        focus = keys.window.id if keys.window is not None else None
        at = action.at if isinstance(action, TypeText) else None
        points = [at] if at is not None else ([] if typing else action.points())
        if points:
            return ActedOn(typing, self.windows.window_at(points[0].x, points[0].y), focus_before=focus)
        return ActedOn(typing, keys.window, focus_before=focus, nowhere=keys.why)

    def _check(self, ran: _Ran, after: ScreenFrame) -> EffectCheck:
        anchor = (ran.located.point.x, ran.located.point.y) if ran.located is not None else None
        own = self.frames.own_regions() if isinstance(self.frames, ShowsOwnRegions) else ()
        acted = ran.acted
        if self.windows is not None:
            keys = self.windows.keyboard_window()
            window_after = self.windows.window(acted.window.id) if acted.window is not None else None
            focus_after = keys.window.id if keys.window is not None else None
            acted = replace(acted, window_after=window_after, focus_after=focus_after)
        return judge_effect(ran.step.expect, acted, ran.before, after, target=anchor, ignore=own)

    def _offer_repair(self, step: RoutineStep, located: Located, frame: ScreenFrame, cancel: CancelToken) -> None:
        try:
            proposed = propose_repair(self.routine, step, located.point, frame)
        except CannotRepair as exc:
            self._say(str(exc))
            return
        accepted = self.questions.offer_repair(RepairRequest(self.routine, step, located, frame, proposed, cancel))
        cancel.raise_if_cancelled()  # a repair answered after a stop is not written
        if accepted:
            try:
                self.repairs_written.append(write_repair(proposed))
            except OSError as exc:
                self._say(f"the repair could not be written: {exc}")
                return
            self.routine = proposed.routine

    def _finished(self, frame: ScreenFrame) -> Proposal:
        self._all_proposed = True
        total = len(self.routine.steps)
        said, self._unjudged = self._unjudged, []
        flagged = f" ({_flagged_words(self._flagged)}: see its steps in the history)" if self._flagged else ""
        steps = "the 1 step" if total == 1 else f"all {total} steps"
        done = "; ".join([f"{steps} of {self.routine.name!r} done{flagged}", *said])
        # Not exact, and a Done is never approved: the grounding only carries the last step's verdict.
        grounding = Grounding(
            exact=False, how="the routine's end", source=f"routine {self.routine.name!r}, after step {total}",
            record={"routine": self.routine.name, **self._verdicts_record()},
        )  # fmt: skip
        return Proposal(
            action=Done(done),
            raw_text="",
            image_width=frame.region.width,
            image_height=frame.region.height,
            space=ImagePixelSpace(),
            grounding=grounding,
        )

    def _verdicts_record(self) -> dict[str, list[dict[str, object]]]:
        """The verdicts not yet recorded, for the next proposal's grounding record (none: nothing)."""
        verdicts, self._verdicts = self._verdicts, []
        return {VERDICTS_KEY: [verdict.to_record() for verdict in verdicts]} if verdicts else {}

    # -- the agent takes over --------------------------------------------------------------------------

    def _hand_over(
        self, handing: _HandOverNow, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        if self.agent is None:
            raise EndRun(f"{handing.why}; there is no agent to continue with", stopped=False)
        agent = self.agent()
        if isinstance(agent, str):
            raise EndRun(f"{handing.why}; the agent could not take over: {agent}", stopped=False)
        self._handover = agent
        self._handed = handing
        self.handover_task = handover_task(self.routine, handing.next_step, self.values)
        self._say(f"handed over to the agent {handing.where}: {handing.why}")
        return self._agent_propose(history, frames, cancel)

    def _agent_propose(
        self, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        """The agent's proposal, given the run's history with the routine's steps in its own space."""
        assert self._handover is not None
        routine_steps = max(0, len(history) - self._agent_proposals)
        region = frames[-1].region
        mapping = FrameMapping(region, region.width, region.height)
        space = self._handover.space

        def in_agent_space(past: PastStep) -> PastStep:
            try:
                screen = past.action.map_points(lambda p: mapping.model_to_screen(p, ImagePixelSpace()))
                return replace(past, action=screen.map_points(lambda p: mapping.screen_to_model(p, space)))
            except OffScreenError:
                return past

        shown = [in_agent_space(p) for p in history[:routine_steps]] + list(history[routine_steps:])
        try:
            proposal = self._handover.policy.propose(self.handover_task, shown, frames, cancel)
        except UnusableProposal:
            self._agent_calls += 2  # the answer, and the one asked again, were both unusable
            raise
        except Exception:  # counted as an agent call, then re-raised
            self._agent_calls += 1
            raise
        self._agent_calls += 1 + len(proposal.rejected)  # a refused answer was asked again
        self._agent_proposals += 1
        return replace(proposal, task_asked=self.handover_task)  # recorded: the run's task is the routine's

    # -- the run's end ---------------------------------------------------------------------------------

    def end_words(self, outcome: str, detail: str) -> RunEndWords:
        """How the replay ended, in words (`DescribesEnd`): done with its flagged steps named; stopped or
        ended at which step, and what had run; handed over where and why, then what the agent did.
        Kept as `ended` for the front end's notice."""
        self.ended = self._end_words(outcome, detail)
        return self.ended

    def _end_words(self, outcome: str, detail: str) -> RunEndWords:
        name, total = self.routine.name, len(self.routine.steps)
        handed = self._handed
        if handed is not None:
            then = _AGENT_ENDS.get(outcome, outcome)
            return RunEndWords(
                f"routine {name!r} handed over to the agent {handed.where} because {handed.why}; then the agent"
                f" {then}: {detail}",
                f"handed over {handed.where.split(' of ')[0]}, then the agent {then}",
            )
        if outcome == "done":
            flagged = _flagged_words(self._flagged) if self._flagged else "every step as recorded"
            return RunEndWords(detail, f"done, {flagged}")
        how = "stopped" if outcome == "stopped" else _AGENT_ENDS.get(outcome, outcome)
        if self._all_proposed:  # every step ran; the end came after (a stop while the record closed)
            return RunEndWords(detail, f"{how} after its last step")
        if not self._at_step:  # the engine's words say when ("..., before the first step")
            return RunEndWords(detail, f"{how} before its first step")
        ran = (
            f"{self._steps_ran} of its {total} steps ran and {'was' if self._steps_ran == 1 else 'were'} checked"
            if self._steps_ran
            else "none of its steps had run"
        )
        where = f"at step {self._at_step} of {total}"
        return RunEndWords(f"routine {name!r} {how} {where} ({ran}): {detail}", f"{how} {where}")

    # -- helpers ---------------------------------------------------------------------------------------

    def _ask(
        self,
        step: RoutineStep,
        frame: ScreenFrame,
        problem: str,
        cancel: CancelToken,
        *,
        effect_missing: bool,
        detail: str = "",
    ) -> ProblemChoice:
        self._say(f"step {step.number} problem: {problem}" + (f" ({detail})" if detail else ""))
        request = ProblemRequest(self.routine, step, frame, problem, effect_missing, cancel, detail)
        choice = self.questions.problem(request)
        cancel.raise_if_cancelled()
        if choice is ProblemChoice.STOP:
            raise EndRun(f"{problem}; stopped by the user", stopped=True)
        if choice is ProblemChoice.HAND_OVER and self.agent is None:
            raise EndRun(f"{problem}; there is no agent to continue with", stopped=False)
        return choice

    def _settled(self, cancel: CancelToken) -> ScreenFrame:
        def sleep(seconds: float) -> None:
            if cancel.sleep(seconds):
                cancel.raise_if_cancelled()

        frame, _ = wait_for_settle(lambda: self.frames.grab(self.monitor), SETTLE_TIMEOUT_S, SETTLE_POLL_S, sleep=sleep)
        return frame

    def _not_found_words(self, step: RoutineStep, found: NotLocated) -> str:
        """One sentence; how each way of looking fared is `found.detail`, shown apart (it runs long)."""
        what = step.target.element if step.target and step.target.element else f"step {step.number}'s target"
        kind = "found in more than one place" if found.ambiguous else "not found on the screen"
        return f"{what} was {kind}"

    def _say(self, line: str) -> None:
        if self.notify is None:
            return
        try:
            self.notify(line)
        except Exception:  # like the engine's listeners: a broken front end must not end the replay
            log.exception("the routine's notify failed")


def routine_engine(
    policy: RoutinePolicy,
    approver: Approver,
    performer: ActionPerformer,
    frames: FrameSource,
    *,
    trajectory_root: Path | None,
    monitor: int | None,
    agent_steps: int,
    keep_screenshots: int = 3,
    listener: Callable[[EngineEvent], None] | None = None,
    questions: QuestionAnswerer | None = None,
    session_meta: Mapping[str, Any] | None = None,
) -> StepEngine:
    """The step engine that replays `policy`'s routine (then the agent's `agent_steps` at most), recording
    a session under `trajectory_root` (with `session_meta` added to its settings, such as who asked for
    the run); the policy's questions end with the engine's stop."""
    routine = policy.routine
    engine = StepEngine(
        policy,
        approver,
        performer,
        frames,
        EngineSettings(
            max_steps=len(routine.steps) + max(1, agent_steps),
            monitor=monitor,
            settle_timeout_s=SETTLE_TIMEOUT_S,
            settle_poll_s=SETTLE_POLL_S,
            keep_screenshots=keep_screenshots,
            trajectory_root=trajectory_root,
            session_meta={"routine": routine.name, "routine_folder": str(routine.folder or ""), **(session_meta or {})},
            settle_first=True,
        ),
        listener=listener,
        questions=questions,
    )
    return engine
