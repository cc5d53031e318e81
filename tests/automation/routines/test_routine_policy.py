"""The routine as the engine's proposer, on drawn screens: what the engine guarantees holds for it.

A broken listener or front end does not end a replay; a picture that breaks after the routine was
loaded ends it in words; "continue with the agent" hands the agent the same run with the routine's
steps in the agent's own coordinates and the values given for this run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.automation.actions import Action, Click, Done, MouseButton, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import NormalizedSpace
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision, EngineEvent, Outcome
from holodesk.automation.input.performer import ExecutionResult
from holodesk.automation.proposal import PastStep, Proposal
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.replay import (
    HandOver,
    ProblemChoice,
    ProblemRequest,
    RepairRequest,
    RoutinePolicy,
    routine_engine,
)
from holodesk.automation.routines.routine_file import Routine, load_routine, write_routine
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import read_session

OK, CANCEL = Button("OK", 100, 100), Button("Cancel", 300, 100)


class Drawn:
    def __init__(self, frame: ScreenFrame) -> None:
        self.frame = frame

    def grab(self, monitor: int | None) -> ScreenFrame:
        return self.frame


class Performer:
    def __init__(self) -> None:
        self.actions: list[Action] = []

    def validate(self, action: Action) -> None:
        pass

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        self.actions.append(action)
        return ExecutionResult(action, True, "done", 0.0)

    def close(self) -> None:
        pass


class Answers:
    """Approves every step; answers every problem with `choice`."""

    def __init__(self, choice: ProblemChoice = ProblemChoice.STOP) -> None:
        self.choice = choice
        self.problems: list[str] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve()

    def problem(self, request: ProblemRequest) -> ProblemChoice:
        self.problems.append(request.problem)
        return self.choice

    def offer_repair(self, request: RepairRequest) -> bool:
        return False


class Agent:
    def __init__(self) -> None:
        self.seen: list[tuple[str, list[PastStep]]] = []

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        self.seen.append((task, list(history)))
        return Proposal(Done("finished"), "", frames[-1].width, frames[-1].height)

    def interrupt(self) -> None:
        pass


@pytest.fixture
def routine(tmp_path: Path) -> Routine:
    frame = screen([OK, CANCEL])
    steps = [(frame, click_step(*OK.centre, "the OK button")), (frame, click_step(*CANCEL.centre, "the Cancel button"))]
    session = record_session(tmp_path / "sessions", "ok then cancel", steps, end=frame)
    return load_routine(save_compiled(compile_session(session, "two"), tmp_path / "routines"))


def test_a_listener_and_a_notify_that_raise_do_not_end_the_replay(routine, tmp_path):
    def broken(_: object) -> None:
        raise RuntimeError("the front end broke")

    answers, performer, frames = Answers(), Performer(), Drawn(screen([OK, CANCEL]))
    policy = RoutinePolicy(routine, {}, frames, answers, notify=broken)
    engine = routine_engine(
        policy, answers, performer, frames, trajectory_root=tmp_path / "s", monitor=1, agent_steps=1, listener=broken
    )
    result = engine.run(routine.task)
    assert result.outcome is Outcome.DONE, result.detail
    assert performer.actions == [Click(Point(*OK.centre)), Click(Point(*CANCEL.centre))]


def test_a_picture_broken_after_loading_ends_the_replay_in_words(routine, tmp_path):
    assert routine.folder is not None and routine.steps[1].target is not None
    (routine.folder / routine.steps[1].target.crop).write_text("not a picture")
    answers, performer, frames = Answers(), Performer(), Drawn(screen([OK, CANCEL]))
    policy = RoutinePolicy(routine, {}, frames, answers)
    events: list[EngineEvent] = []
    engine = routine_engine(
        policy, answers, performer, frames, trajectory_root=tmp_path / "s", monitor=1, agent_steps=1,
        listener=events.append,
    )  # fmt: skip
    result = engine.run(routine.task)
    assert result.outcome is Outcome.FAILED
    said = "routine 'two' failed at step 2 of 2 (1 of its 2 steps ran and was checked): step 2: the picture"
    assert result.detail.startswith(said), result.detail
    assert "is not a PNG file" in result.detail
    assert performer.actions == [Click(Point(*OK.centre))]  # step 1 ran; nothing was guessed for step 2


def test_the_agent_takes_over_the_same_run_with_the_routine_steps_in_its_own_coordinates(routine, tmp_path):
    answers, performer = Answers(ProblemChoice.HAND_OVER), Performer()
    frames = Drawn(screen([OK]))  # Cancel is gone: step 2 is not found
    agent = Agent()
    policy = RoutinePolicy(routine, {}, frames, answers, agent=lambda: HandOver(agent, NormalizedSpace()))
    engine = routine_engine(
        policy, answers, performer, frames, trajectory_root=tmp_path / "s", monitor=1, agent_steps=3
    )
    result = engine.run(routine.task)
    assert result.outcome is Outcome.DONE and result.detail.endswith("; then the agent finished: finished")
    assert len(answers.problems) == 1 and "the Cancel button was not found" in answers.problems[0]
    ((task, history),) = agent.seen
    assert task.startswith("ok then cancel\nAlready done by the routine 'two': click the OK button")
    # The routine's click, in the agent's space (0-1000 of the 800x600 screen), not in pixels.
    (click,) = [p.action for p in history]
    assert click == Click(Point(round((OK.centre[0] + 0.5) * 1000 / 800), round((OK.centre[1] + 0.5) * 1000 / 600)))
    assert history[0].note.startswith("Routine 'two', step 1 of 2")
    # The session says what the agent was asked, on the agent's own steps only.
    (folder,) = (tmp_path / "s").iterdir()
    steps = read_session(folder).steps
    assert [step.get("task_asked") for step in steps] == [None, task]


class Recording(Answers):
    def __init__(self) -> None:
        super().__init__()
        self.shown: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.shown.append(request)
        return ApprovalDecision(Decision.APPROVE_ALL_EXACT)


def test_a_hand_edited_file_cannot_make_a_send_step_reversible(tmp_path):
    send = Button("Send", 100, 100)
    frame = screen([send, CANCEL])
    steps = [
        (frame, click_step(*CANCEL.centre, "the Cancel button")),
        (frame, click_step(*send.centre, "the Send button")),
    ]
    session = record_session(tmp_path / "sessions", "cancel then send", steps, end=frame)
    folder = save_compiled(compile_session(session, "send"), tmp_path / "routines")
    routine = load_routine(folder)
    assert routine.steps[1].irreversible
    write_routine(replace(routine, steps=tuple(replace(s, irreversible=False) for s in routine.steps)), folder)
    edited = load_routine(folder)
    assert not edited.steps[1].irreversible  # the file now says so
    answers, performer, frames = Recording(), Performer(), Drawn(frame)
    policy = RoutinePolicy(edited, {}, frames, answers)
    engine = routine_engine(policy, answers, performer, frames, trajectory_root=None, monitor=1, agent_steps=1)
    assert engine.run(edited.task).outcome is Outcome.DONE
    # "Approve all" on the first click did not cover the Send click: its words make it irreversible.
    assert [r.action for r in answers.shown] == [Click(Point(*CANCEL.centre)), Click(Point(*send.centre))]
    assert answers.shown[1].irreversible


def test_a_routine_step_with_the_middle_button_loads_and_is_always_shown_with_what_it_pastes(tmp_path):
    """A routine file may say button = "middle" (the agent's middle click, saved as a routine): it loads,
    and its replay shows the step every time, with the selection it would paste, whatever "approve all"
    or a hand-edited `irreversible = false` say (automation/approval_rules.py)."""
    frame = screen([OK, CANCEL])
    steps = [(frame, click_step(*CANCEL.centre, "the Cancel button")), (frame, click_step(*OK.centre, "the OK button"))]
    session = record_session(tmp_path / "sessions", "cancel then paste", steps, end=frame)
    folder = save_compiled(compile_session(session, "paste"), tmp_path / "routines")
    routine = load_routine(folder)
    middle = replace(routine.steps[1], action=Click(Point(*OK.centre), MouseButton.MIDDLE), irreversible=False)
    write_routine(replace(routine, steps=(routine.steps[0], middle)), folder)
    assert 'button = "middle"' in (folder / "routine.toml").read_text(encoding="utf-8")
    edited = load_routine(folder)
    assert edited.steps[1].action == Click(Point(*OK.centre), MouseButton.MIDDLE) and not edited.steps[1].irreversible
    answers, performer, frames = Recording(), Performer(), Drawn(frame)
    policy = RoutinePolicy(edited, {}, frames, answers)
    engine = routine_engine(policy, answers, performer, frames, trajectory_root=None, monitor=1, agent_steps=1)
    engine.read_paste = lambda: "echo PWNED\n"  # the selection, as the engine reads it when it asks
    assert engine.run(edited.task).outcome is Outcome.DONE
    assert [r.action for r in answers.shown] == [
        Click(Point(*CANCEL.centre)),
        Click(Point(*OK.centre), MouseButton.MIDDLE),
    ]
    assert answers.shown[1].irreversible and answers.shown[1].paste_text == "echo PWNED\n"
    assert "echo·PWNED⏎" in answers.shown[1].why_asked


def test_a_target_found_26_px_away_is_found_nearby_and_never_approved_all(routine, tmp_path):
    """Issue 49: such a step was called "found exactly where recorded" and offered approve-all."""
    nearby = Button("OK", OK.left + 26, OK.top)
    answers, performer, frames = Recording(), Performer(), Drawn(screen([nearby, CANCEL]))
    policy = RoutinePolicy(routine, {}, frames, answers, windows=lambda: None)
    engine = routine_engine(policy, answers, performer, frames, trajectory_root=None, monitor=1, agent_steps=1)
    assert engine.run(routine.task).outcome is Outcome.DONE
    first, second = answers.shown  # "approve all" was answered on the first: it covered nothing
    assert not first.may_approve_all and first.why_asked.startswith("found nearby, not exactly where recorded")
    assert "(+26, +0) px from where recorded" in first.why_asked
    assert second.may_approve_all and second.why_asked.startswith("found exactly where recorded")
    assert performer.actions == [Click(Point(nearby.centre[0], nearby.centre[1])), Click(Point(*CANCEL.centre))]


class Offers(Answers):
    """Answers problems with `choice` and counts the repairs it is offered (declining them)."""

    def __init__(self, choice: ProblemChoice) -> None:
        super().__init__(choice)
        self.offered: list[RepairRequest] = []

    def offer_repair(self, request: RepairRequest) -> bool:
        self.offered.append(request)
        return False


class Changing(Performer):
    """A performer whose clicks change the drawn screen (to `after`) when `changes` is set."""

    def __init__(self, frames: Drawn, after: ScreenFrame, changes: bool) -> None:
        super().__init__()
        self.frames, self.after, self.changes = frames, after, changes

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        if self.changes:
            self.frames.frame = self.after
        return super().execute(action, cancel)


@pytest.mark.parametrize("changes", [True, False], ids=["effect seen", "nothing changed"])
def test_a_repair_is_offered_only_when_the_steps_own_effect_was_seen(tmp_path, changes):
    """Issue 49: after "nothing changed" and "go on", the tray offered a repair saying the step ran as expected."""
    before, after = screen([OK]), screen([OK], background=(40, 40, 40))  # the click changes the whole page
    session = record_session(
        tmp_path / "sessions", "press ok", [(before, click_step(*OK.centre, "the OK button"))], end=after
    )
    routine = load_routine(save_compiled(compile_session(session, "ok"), tmp_path / "routines"))
    target = routine.steps[0].target
    assert routine.folder is not None and target is not None and routine.steps[0].expect.changed
    noise = np.random.default_rng(1).integers(0, 256, size=(60, 60, 3), dtype=np.uint8)
    for relative in (target.crop, target.context):  # restyled: only the model finds it now
        Image.fromarray(noise).save(routine.folder / relative)
    answers, frames = Offers(ProblemChoice.CONTINUE), Drawn(before)
    performer = Changing(frames, after, changes)
    policy = RoutinePolicy(routine, {}, frames, answers, grounder=PointAt(Point(*OK.centre)), windows=lambda: None)
    engine = routine_engine(policy, answers, performer, frames, trajectory_root=None, monitor=1, agent_steps=1)
    assert engine.run(routine.task).outcome is Outcome.DONE
    if changes:
        assert answers.problems == [] and len(answers.offered) == 1
    else:
        assert answers.problems == [
            "step 1, click the OK button, ran, but nothing changed anywhere on the screen after the click, where the"
            " recorded click changed the screen (800x600 when recorded)"
        ]
        assert answers.offered == []  # one question for the step, never a repair that contradicts it


class PointAt:
    def __init__(self, point: Point) -> None:
        self.point = point

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        return self.point
