"""Routines replayed on real windows under Xvfb: the window must see the clicks and read the typed text.

A session is recorded on a real target window (its screenshots are real grabs), compiled and saved
as a routine, read back, and replayed through the real executor (XTEST) and screen capture. The
window logs what it received; the tests read that log, not the runner's own account.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from holodesk.automation.actions import Click, TypeText
from holodesk.automation.executor import Executor
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.locators import Rung
from holodesk.automation.routines.replay import (
    ProblemChoice,
    ProblemRequest,
    RepairRequest,
    ReplayOutcome,
    RoutineRunner,
    StepRequest,
    Verdict,
)
from holodesk.automation.routines.routine_file import Routine, load_routine
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.screen_change import wait_for_settle
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer
from tests.automation.routines.scenes import click_step, record_session
from tests.support.target_client import TargetWindow

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(2400, 900)], indirect=True, ids=str, scope="module"),
]
TASK = "press OK, then write hello routine in the field"


class ApproveAll:
    """Approves every step and remembers why each was asked; stops at any problem."""

    def __init__(self) -> None:
        self.asked: list[StepRequest] = []
        self.problems: list[ProblemRequest] = []

    def decide(self, request: StepRequest) -> Verdict:
        self.asked.append(request)
        return Verdict.APPROVE_ALL_EXACT

    def problem(self, request: ProblemRequest) -> ProblemChoice:
        self.problems.append(request)
        return ProblemChoice.STOP

    def offer_repair(self, request: RepairRequest) -> bool:
        return False


def settled(capture: ScreenCapture) -> ScreenFrame:
    frame, _ = wait_for_settle(lambda: capture.grab(1), 3.0, 0.05)
    return frame


@pytest.fixture(scope="module")
def capture(xvfb: XvfbServer) -> Iterator[ScreenCapture]:
    capture = ScreenCapture()
    yield capture
    capture.close()


@pytest.fixture(scope="module")
def routine(xvfb: XvfbServer, capture: ScreenCapture, tmp_path_factory: pytest.TempPathFactory) -> Routine:
    """Recorded on a window at (40, 40), which is then closed."""
    root = tmp_path_factory.mktemp("routine")
    window = TargetWindow.start(40, 40)
    try:
        executor = Executor(capture=capture)
        steps = []
        frame = capture.grab(1)
        ok = window.centre("ok")
        steps.append((frame, click_step(ok.x, ok.y, "the OK button")))
        executor.execute(Click(window.centre("ok")))
        field = window.centre("field")
        frame = settled(capture)  # as the engine does: the next step starts on the settled screen
        typing = {
            "action_model": {"kind": "type"},
            "action_screen": {
                "kind": "type",
                "text": "hello routine",
                "at": [field.x, field.y],
                "press_enter": False,
                "overwrite": False,
            },
            "element": "the text field",
            "decision": "approve",
            "result": {"ok": True, "detail": "typed"},
        }
        steps.append((frame, typing))
        executor.execute(TypeText("hello routine", at=field))
        window.sync()
        end = settled(capture)
    finally:
        window.close()
    session = record_session(root / "sessions", TASK, steps, end=end)
    folder = save_compiled(compile_session(session, "ok and hello"), root / "routines")
    return load_routine(folder)


def test_a_replay_on_the_window_as_recorded_clicks_ok_and_types_the_parameter(routine, capture):
    window = TargetWindow.start(40, 40)
    try:
        approver = ApproveAll()
        runner = RoutineRunner(routine, Executor(capture=capture), capture, approver)
        assert [(p.name, p.default) for p in routine.parameters] == [("text_1", "hello routine")]
        result = runner.run({"text_1": "typed by a routine"})
        assert result.outcome is ReplayOutcome.DONE, result.detail
        events = window.sync()
        assert {"event": "clicked", "widget": "ok"} in events
        assert [e["text"] for e in events if e["event"] == "text"][-1] == "typed by a routine"
        # Both targets were where recorded: one approval for all, no model.
        assert len(approver.asked) == 1 and result.model_calls == 0
        assert [r.rung for r in result.records] == [Rung.NEAR.value, Rung.NEAR.value]
    finally:
        window.close()


def test_a_moved_window_is_found_and_each_step_is_asked_on_its_own(routine, capture):
    window = TargetWindow.start(300, 220)
    try:
        approver = ApproveAll()
        result = RoutineRunner(routine, Executor(capture=capture), capture, approver).run()
        assert result.outcome is ReplayOutcome.DONE, result.detail
        events = window.sync()
        assert {"event": "clicked", "widget": "ok"} in events
        assert [e["text"] for e in events if e["event"] == "text"][-1] == "hello routine"
        assert len(approver.asked) == 2  # found away from the recorded spot: never approved in bulk
        assert all(r.located is not None and not r.located.exact for r in approver.asked)
        assert "found by template anywhere" in approver.asked[0].why_asked
    finally:
        window.close()


def test_two_windows_that_both_match_are_refused_and_neither_is_clicked(routine, capture):
    # Side by side with the same surroundings, both away from the recorded spot: nothing tells them apart.
    first, second = TargetWindow.start(100, 200), TargetWindow.start(1300, 200)
    try:
        approver = ApproveAll()
        result = RoutineRunner(routine, Executor(capture=capture), capture, approver).run()
        assert result.outcome is ReplayOutcome.STOPPED
        assert approver.asked == [] and len(approver.problems) == 1
        assert "found in more than one place" in approver.problems[0].problem
        for window in (first, second):
            assert [e for e in window.sync() if e["event"] in ("press", "clicked")] == []
    finally:
        first.close()
        second.close()
