"""The step engine with in-memory parts: decisions, stopping, loop guard, recording.

The end-to-end runs against a real window under Xvfb live in tests/e2e; here every part is a
small fake so each rule of the loop is checked on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from holodesk.automation.actions import Action, AskUser, Click, Done, KeyCombo, Point, TypeText, Wait
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace, Monitor, Rect
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import (
    ApprovalDecision,
    ApprovalRequest,
    EngineEvent,
    EngineSettings,
    EngineState,
    Outcome,
)
from holodesk.automation.errors import ActionError, CaptureError, ExecutionError
from holodesk.automation.input.performer import ExecutionResult
from holodesk.automation.input.plan import InputTarget, plan_action
from holodesk.automation.proposal import PastStep, Proposal, UnusableProposal
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import read_session
from tests.automation.frames import solid_frame, with_box
from tests.support.waiting import wait_until

# How long to wait for the engine's thread to reach a state: only a broken engine comes near it.
WAIT_S = 60.0
LEFT = Monitor(1, Rect(-640, 0, 640, 480))
RIGHT = Monitor(2, Rect(0, 0, 800, 600))


class FakeScreen:
    """Frames of the RIGHT monitor; each executed action can change what it shows."""

    def __init__(self) -> None:
        self.frame = solid_frame(800, 600, (30, 30, 30), monitors=(LEFT, RIGHT))
        self.grabs = 0

    def grab(self, monitor: int | None) -> ScreenFrame:
        self.grabs += 1
        return self.frame


@dataclass
class RecordingPerformer:
    screen: FakeScreen | None = None
    executed: list[Action] = field(default_factory=list)
    change_screen: bool = True
    delay_s: float = 0.0
    closed: int = 0  # runs that ended (the engine gives back the run's input set-up)

    def validate(self, action: Action) -> None:
        pass  # every action can run

    def close(self) -> None:
        self.closed += 1

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        if self.delay_s:
            # A long action that checks the token between sub-steps, as the input performer does.
            deadline = time.monotonic() + self.delay_s
            while time.monotonic() < deadline:
                cancel.raise_if_cancelled()
                time.sleep(0.005)
        self.executed.append(action)
        if self.screen is not None and self.change_screen:
            n = len(self.executed)
            self.screen.frame = with_box(self.screen.frame, (n * 37) % 700, (n * 53) % 500, 60, (200, n, 90))
        return ExecutionResult(action, True, action.describe(), 0.0)


class ListPolicy:
    """Proposals from a list; each entry is an Action (image space 800x600), or an exception to raise."""

    def __init__(self, answers: Sequence[object], delay_s: float = 0.0) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[list[PastStep], int]] = []
        self.delay_s = delay_s

    def propose(self, task, history, frames, cancel) -> Proposal:
        self.calls.append((list(history), len(frames)))
        if self.delay_s:
            time.sleep(self.delay_s)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Proposal(answer, f"raw:{answer.kind}", 800, 600, note=f"note {len(self.calls)}", space=ImagePixelSpace())

    def interrupt(self) -> None:
        pass  # a list has nothing to abandon


class ScriptedApprover:
    def __init__(self, *decisions: ApprovalDecision) -> None:
        self.decisions = list(decisions)
        self.requests: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        return self.decisions.pop(0) if self.decisions else ApprovalDecision.approve()


def make_engine(policy, approver, performer=None, tmp_path=None, questions=None, **settings):
    screen = FakeScreen()
    performer = performer or RecordingPerformer()
    performer.screen = screen
    events: list[EngineEvent] = []
    engine = StepEngine(
        policy,
        approver,
        performer,
        screen,
        EngineSettings(trajectory_root=tmp_path, settle_timeout_s=0.2, settle_poll_s=0.01, **settings),
        listener=events.append,
        questions=questions,
    )
    return engine, performer, events


def test_approved_steps_execute_in_screen_space_until_done(tmp_path):
    policy = ListPolicy([Click(Point(100, 50)), TypeText("hi", Point(10, 10)), Done("all set")])
    engine, performer, events = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path)
    result = engine.run("say hi")
    # Two steps taken; the final answer is not a step.
    assert (result.outcome, result.detail, result.steps) == (Outcome.DONE, "all set", 2)
    # The RIGHT monitor's frame starts at x=0, so image pixels map 1:1 here.
    assert performer.executed == [Click(Point(100, 50)), TypeText("hi", Point(10, 10))]
    # History grows with each step and holds model-space actions.
    assert [len(h) for h, _ in policy.calls] == [0, 1, 2]
    assert policy.calls[2][0][0].action == Click(Point(100, 50))
    assert events[-1].state is EngineState.FINISHED and events[-1].result == result
    assert performer.closed == 1  # the run's input set-up was given back when it ended
    session = read_session(result.folder)
    assert session.outcome == "done"
    assert [s["decision"] for s in session.steps] == ["approve", "approve", "final"]
    assert session.steps[0]["action_screen"] == {"kind": "click", "at": [100, 50], "button": "left", "count": 1}
    assert session.steps[0]["raw_text"] == "raw:click"
    assert all((result.folder / s["screenshot"]).is_file() for s in session.steps)


def test_skip_executes_nothing_and_tells_the_model(tmp_path):
    policy = ListPolicy([Click(Point(1, 1)), Done()])
    engine, performer, _ = make_engine(policy, ScriptedApprover(ApprovalDecision.skip()), tmp_path=tmp_path)
    assert engine.run("t").outcome is Outcome.DONE
    assert performer.executed == []
    assert "skipped by the user" in policy.calls[1][0][0].outcome


def test_edit_executes_the_edited_action_and_records_both(tmp_path):
    edited = Click(Point(-300, 200))  # moved onto the LEFT monitor
    policy = ListPolicy([Click(Point(100, 50)), Done()])
    engine, performer, _ = make_engine(policy, ScriptedApprover(ApprovalDecision.edit(edited)), tmp_path=tmp_path)
    result = engine.run("t")
    assert performer.executed == [edited]
    step = read_session(result.folder).steps[0]
    assert step["decision"] == "edit"
    assert step["action_screen"]["at"] == [100, 50] and step["edited_screen"]["at"] == [-300, 200]


def test_an_edit_off_every_monitor_executes_nothing(tmp_path):
    policy = ListPolicy([Click(Point(100, 50))])
    approver = ScriptedApprover(ApprovalDecision.edit(Click(Point(5000, 5000))))
    engine, performer, _ = make_engine(policy, approver, tmp_path=tmp_path)
    result = engine.run("t")
    assert result.outcome is Outcome.ERROR and "edited action cannot run" in result.detail
    assert performer.executed == []


def test_stop_at_approval_ends_the_run_without_acting(tmp_path):
    engine, performer, _ = make_engine(ListPolicy([Click(Point(1, 1))]), ScriptedApprover(ApprovalDecision.stop()))
    result = engine.run("t")
    assert result.outcome is Outcome.STOPPED
    assert performer.executed == []


def test_an_unusable_answer_is_recorded_and_executes_nothing(tmp_path):
    bad = UnusableProposal("unknown action 'teleport'", raw_text='{"action": "teleport"}')
    engine, performer, _ = make_engine(ListPolicy([bad]), ScriptedApprover(), tmp_path=tmp_path)
    result = engine.run("t")
    assert result.outcome is Outcome.ERROR and "teleport" in result.detail
    assert performer.executed == []
    (step,) = read_session(result.folder).steps
    assert step["raw_text"] == '{"action": "teleport"}'
    assert "decision" not in step


def test_a_target_outside_the_image_is_refused_before_approval(tmp_path):
    approver = ScriptedApprover()
    engine, performer, _ = make_engine(ListPolicy([Click(Point(900, 10))]), approver, tmp_path=tmp_path)
    result = engine.run("t")
    assert result.outcome is Outcome.ERROR and "off screen" in result.detail
    assert approver.requests == [] and performer.executed == []


def test_ask_user_and_step_limit_end_the_run(tmp_path):
    engine, _, _ = make_engine(ListPolicy([AskUser("Which folder?")]), ScriptedApprover())
    result = engine.run("t")
    # An approver that cannot take questions ends the run with the question; nothing ran: 0 steps.
    assert (result.outcome, result.detail, result.steps) == (Outcome.ASK_USER, "Which folder?", 0)
    engine, performer, _ = make_engine(ListPolicy([Wait(0.01)] * 5), ScriptedApprover(), max_steps=2)
    result = engine.run("t")
    assert (result.outcome, result.steps, len(performer.executed)) == (Outcome.STEP_LIMIT, 2, 2)


def test_the_same_action_on_an_unchanged_screen_warns_the_approver(tmp_path):
    click = Click(Point(5, 5))
    policy = ListPolicy([click, click, click, click, Done()])
    approver = ScriptedApprover()
    performer = RecordingPerformer(change_screen=False)
    engine, _, _ = make_engine(policy, approver, performer, tmp_path=tmp_path)
    result = engine.run("t")
    warnings = [bool(r.loop_warning) for r in approver.requests]
    assert warnings == [False, False, True, False]  # the streak restarts after the user decided
    assert "loop_warning" in read_session(result.folder).steps[2]


class BlockingPolicy(ListPolicy):
    """A model that computes until the test releases it (never, unless it does): says when it started."""

    def __init__(self, answers: Sequence[object]) -> None:
        super().__init__(answers)
        self.computing = threading.Event()
        self.release = threading.Event()

    def propose(self, task, history, frames, cancel) -> Proposal:
        self.computing.set()
        self.release.wait(WAIT_S)
        return super().propose(task, history, frames, cancel)


def wait_for_event(events: list[EngineEvent], state: EngineState, step: int | None = None) -> None:
    """Wait (bounded) until the engine, on its own thread, has told the listener `state` (at `step`)."""
    wait_until(
        lambda: any(e.state is state and step in (None, e.step) for e in list(events)),
        WAIT_S,
        f"the engine telling {state} at step {step}",
    )


def test_stop_during_model_compute_ends_the_run_without_waiting_for_the_model():
    policy = BlockingPolicy([Click(Point(1, 1))])
    engine, performer, _ = make_engine(policy, ScriptedApprover())
    finished = threading.Event()
    results = []
    engine.start("t", lambda r: (results.append(r), finished.set()))
    try:
        assert policy.computing.wait(WAIT_S)
        engine.stop()
        # The model is still computing (it never returns unless released): the run ended without it.
        assert finished.wait(WAIT_S)
        assert not policy.release.is_set()
    finally:
        policy.release.set()
    assert results[0].outcome is Outcome.STOPPED and performer.executed == []


def test_stop_during_a_long_action_stops_it_part_way(tmp_path):
    performer = RecordingPerformer(delay_s=10 * WAIT_S)  # ends early only when cancelled
    engine, _, events = make_engine(ListPolicy([Click(Point(1, 1))]), ScriptedApprover(), performer, tmp_path=tmp_path)
    thread = engine.start("t")
    wait_for_event(events, EngineState.ACTING, 1)
    engine.stop()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert performer.executed == []  # it raised Cancelled before completing
    session = read_session(next(tmp_path.iterdir()))
    assert session.outcome == "stopped"
    assert session.steps[0]["result"] == {"ok": False, "detail": "stopped part-way"}


def test_an_execution_failure_ends_the_run_with_the_reason(tmp_path):
    class Failing(RecordingPerformer):
        def execute(self, action, cancel):
            raise ExecutionError("XTEST refused the event")

    engine, _, events = make_engine(ListPolicy([Click(Point(1, 1))]), ScriptedApprover(), Failing(), tmp_path=tmp_path)
    result = engine.run("t")
    assert result.outcome is Outcome.FAILED and "XTEST refused" in result.detail
    assert [e.detail for e in events if e.state is EngineState.STEP_FAILED] == [result.detail]


def test_an_action_the_desktop_refused_part_way_fails_the_run_never_done(tmp_path):
    class RefusedPartWay(RecordingPerformer):
        def execute(self, action, cancel):
            return ExecutionResult(action, False, "type 'abc' failed: XError: BadValue", 0.01)

    policy = ListPolicy([TypeText("abc"), Done("all typed")])
    engine, _, events = make_engine(policy, ScriptedApprover(), RefusedPartWay(), tmp_path=tmp_path)
    result = engine.run("t")
    assert result.outcome is Outcome.FAILED and result.outcome.value == "failed"
    assert "BadValue" in result.detail and result.steps == 1
    assert [e.step for e in events if e.state is EngineState.STEP_FAILED] == [1]
    session = read_session(result.folder)
    assert session.outcome == "failed" and session.steps[0]["result"]["ok"] is False


class Validating(RecordingPerformer):
    """Refuses keys named 'f24' the way the input performer's validation does, before anything is sent."""

    def validate(self, action: Action) -> None:
        if isinstance(action, KeyCombo) and "f24" in action.keys:
            raise ActionError("the key 'f24' cannot be pressed on this system")


class TerminalFocus(RecordingPerformer):
    """The keyboard focus is in xterm: validation is the input layer's own plan for that program."""

    def validate(self, action: Action) -> None:
        plan_action(action, InputTarget("xterm", ("ctrl", "a"), ("ctrl", "shift", "v")))


def test_select_all_a_terminal_cannot_honour_is_shown_off_instead_of_ending_the_run(tmp_path):
    approver = ScriptedApprover()
    proposed = TypeText("ls -l", overwrite=True, press_enter=True)
    engine, performer, _ = make_engine(ListPolicy([proposed, Done()]), approver, TerminalFocus(), tmp_path)
    assert engine.run("t").outcome is Outcome.DONE
    (request,) = approver.requests
    assert request.action == TypeText("ls -l", press_enter=True)  # what the person approves is what runs
    assert "Select-all is off" in request.adjustment and "terminal (xterm)" in request.adjustment
    assert request.irreversible  # it presses Enter: always shown
    assert performer.executed == [TypeText("ls -l", press_enter=True)]
    assert "Select-all is off" in read_session(engine_folder(tmp_path)).steps[0]["adjustment"]


def test_an_action_that_cannot_run_fails_before_the_user_is_asked(tmp_path):
    approver = ScriptedApprover()
    engine, performer, events = make_engine(ListPolicy([KeyCombo(("f24",))]), approver, Validating(), tmp_path)
    result = engine.run("t")
    assert result.outcome is Outcome.FAILED and "f24" in result.detail
    assert approver.requests == [] and performer.executed == []
    assert any(e.state is EngineState.STEP_FAILED for e in events)


def test_a_corner_target_moves_one_pixel_in_and_the_user_is_told(tmp_path):
    approver = ScriptedApprover()
    engine, performer, _ = make_engine(ListPolicy([Click(Point(799, 0)), Done()]), approver, Validating(), tmp_path)
    assert engine.run("t").outcome is Outcome.DONE
    assert performer.executed == [Click(Point(798, 1))]
    assert approver.requests[0].action == Click(Point(798, 1))
    assert "corner" in approver.requests[0].adjustment and "(798, 1)" in approver.requests[0].adjustment
    assert "adjustment" in read_session(engine_folder(tmp_path)).steps[0]


def engine_folder(root):
    (folder,) = root.iterdir()
    return folder


def test_the_step_after_a_skip_says_the_skip(tmp_path):
    approver = ScriptedApprover(ApprovalDecision.skip())
    engine, performer, _ = make_engine(ListPolicy([Click(Point(100, 50)), Click(Point(200, 50)), Done()]), approver)
    assert engine.run("t").outcome is Outcome.DONE
    assert performer.executed == [Click(Point(200, 50))]
    assert approver.requests[1].previous_result == "skipped by the user: the action was not performed"


def test_no_visible_change_reaches_the_user_and_the_models_next_turn(tmp_path):
    policy = ListPolicy([Click(Point(100, 50)), Click(Point(200, 50)), Done()])
    performer = RecordingPerformer(change_screen=False)
    approver = ScriptedApprover()
    engine, _, events = make_engine(policy, approver, performer, tmp_path=tmp_path)
    assert engine.run("t").outcome is Outcome.DONE
    history = policy.calls[2][0]
    assert [past.result for past in history] == ["click at (100, 50): no visible change"] * 1 + [
        "click at (200, 50): no visible change"
    ]
    assert approver.requests[1].previous_result == "click at (100, 50): no visible change"
    assert [e.step for e in events if e.state is EngineState.NO_VISIBLE_CHANGE] == [1, 2]
    lines = (engine_folder(tmp_path) / "session.jsonl").read_text().splitlines()
    assert sum('"type": "effect"' in line for line in lines) == 2


def test_a_visible_change_is_not_reported_as_none(tmp_path):
    policy = ListPolicy([Click(Point(100, 50)), Done()])
    engine, _, events = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path)
    engine.run("t")
    assert [past.result for past in policy.calls[1][0]] == ["click at (100, 50)"]
    assert not any(e.state is EngineState.NO_VISIBLE_CHANGE for e in events)


def test_the_policy_sees_at_most_keep_screenshots_frames():
    policy = ListPolicy([Wait(0.01)] * 4 + [Done()])
    engine, _, _ = make_engine(policy, ScriptedApprover(), keep_screenshots=2)
    engine.run("t")
    assert [n for _, n in policy.calls] == [1, 2, 2, 2, 2]


def test_an_empty_task_is_refused():
    engine, _, _ = make_engine(ListPolicy([]), ScriptedApprover())
    with pytest.raises(ValueError, match="task is empty"):
        engine.run("  ")


def test_pause_holds_before_the_next_step_and_resume_continues():
    policy = ListPolicy([Wait(0.01), Done()])
    engine, performer, events = make_engine(policy, ScriptedApprover())
    engine.pause()
    thread = engine.start("t")
    wait_for_event(events, EngineState.PAUSED)
    assert policy.calls == []  # nothing proposed while paused
    engine.resume()
    thread.join(WAIT_S)
    assert events[-1].result.outcome is Outcome.DONE and len(performer.executed) == 1


def test_stop_while_paused_ends_the_run():
    engine, _, events = make_engine(ListPolicy([Done()]), ScriptedApprover())
    engine.pause()
    thread = engine.start("t")
    wait_for_event(events, EngineState.PAUSED)
    engine.stop()
    thread.join(WAIT_S)
    assert events[-1].result.outcome is Outcome.STOPPED


def test_a_stop_right_after_start_is_not_lost():
    engine, performer, events = make_engine(ListPolicy([Click(Point(1, 1))], delay_s=0.05), ScriptedApprover())
    engine.stop()  # before the engine thread has even begun
    thread = engine.start("t")
    thread.join(2)
    assert events[-1].result.outcome is Outcome.STOPPED and performer.executed == []


def test_an_engine_can_run_again_after_a_stopped_run():
    policy = ListPolicy([Done("second run")])
    engine, _, _ = make_engine(policy, ScriptedApprover())
    engine.stop()
    assert engine.run("first").outcome is Outcome.STOPPED
    assert engine.run("second").outcome is Outcome.DONE


def test_stop_interrupts_a_policy_that_can_be_interrupted():
    class Interruptible(BlockingPolicy):
        interrupted = threading.Event()

        def interrupt(self) -> None:
            self.interrupted.set()

    policy = Interruptible([Click(Point(1, 1))])
    engine, _, _ = make_engine(policy, ScriptedApprover())
    thread = engine.start("t")
    try:
        assert policy.computing.wait(WAIT_S)
        engine.stop()
        thread.join(WAIT_S)
    finally:
        policy.release.set()
    assert policy.interrupted.is_set()


class AnsweringApprover(ScriptedApprover):
    """Approves every step and answers questions from a list (None: the user stops instead)."""

    def __init__(self, *replies: str | None) -> None:
        super().__init__()
        self.replies = list(replies)
        self.questions: list[str] = []

    def answer_question(self, request) -> str | None:
        self.questions.append(request.question)
        return self.replies.pop(0)


def test_a_question_is_answered_and_the_reply_reaches_the_model_as_the_steps_result(tmp_path):
    policy = ListPolicy([AskUser("Which folder?"), Click(Point(100, 50)), Done("saved")])
    approver = AnsweringApprover("the Reports folder")
    engine, performer, events = make_engine(policy, approver, tmp_path=tmp_path, questions=approver)
    result = engine.run("save the file")
    assert (result.outcome, result.detail, result.steps) == (Outcome.DONE, "saved", 2)
    assert approver.questions == ["Which folder?"]
    assert performer.executed == [Click(Point(100, 50))]
    # The model's second turn sees the question step with the reply as its result.
    history, _ = policy.calls[1]
    assert [(p.action, p.result) for p in history] == [
        (AskUser("Which folder?"), "The user replied: the Reports folder")
    ]
    assert any(e.state is EngineState.WAITING_ANSWER and e.detail == "Which folder?" for e in events)
    first = read_session(result.folder).steps[0]
    assert (first["decision"], first["reply"]) == ("answered", "the Reports folder")


def test_no_reply_stops_the_run(tmp_path):
    approver = AnsweringApprover(None)
    policy = ListPolicy([AskUser("Which folder?"), Click(Point(1, 1))])
    engine, performer, _ = make_engine(policy, approver, tmp_path=tmp_path, questions=approver)
    result = engine.run("t")
    assert (result.outcome, result.steps, performer.executed) == (Outcome.STOPPED, 0, [])
    assert read_session(result.folder).steps[0]["decision"] == "stop"


def test_a_backend_failure_ends_the_run_in_words_not_as_an_internal_error(tmp_path):
    class ServerGone(Exception):
        pass

    policy = ListPolicy([Click(Point(1, 1)), ServerGone("Nothing is listening at http://gpu-box:8000/v1")])
    engine, performer, _ = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path)
    result = engine.run("t")
    assert result.outcome is Outcome.ERROR
    assert result.detail == "the model could not answer: Nothing is listening at http://gpu-box:8000/v1"
    assert result.steps == 1 and len(performer.executed) == 1
    assert read_session(result.folder).steps[1]["error"].startswith("the model could not answer")


def test_a_screen_that_can_no_longer_be_captured_fails_the_run_in_words(tmp_path):
    # What a real capture raises when the display closes or the desktop stops the screen sharing.
    class SharingStopped(FakeScreen):
        def grab(self, monitor):
            if self.grabs >= 1:
                raise CaptureError("screen sharing was stopped from the desktop: start the task again to share")
            return super().grab(monitor)

    policy = ListPolicy([Click(Point(1, 1)), Click(Point(2, 2))])
    engine, performer, _ = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path)
    engine.frames = SharingStopped()
    result = engine.run("t")
    assert result.outcome is Outcome.FAILED
    assert result.detail == (
        "the screen could not be captured: screen sharing was stopped from the desktop: start the task again to share"
    )
    assert len(performer.executed) == 1  # the step after the lost screen never acts
    assert read_session(result.folder).end["detail"] == result.detail
