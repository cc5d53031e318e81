"""Routines replayed on real windows under Xvfb: the window must see the clicks and read the typed text.

A session is recorded on a real target window (its screenshots are real grabs), compiled and saved
as a routine, read back, and replayed through the real input performer (XTEST) and screen capture. The
window logs what it received; the tests read that log, not the runner's own account.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.rigs.target_client import TargetWindow
from bench.rigs.window_routine import record_ok_and_hello
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
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
from holodesk.automation.routines.routine_file import Routine
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(2400, 900)], indirect=True, ids=str, scope="module"),
]


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


@pytest.fixture(scope="module")
def capture(xvfb: XvfbServer) -> Iterator[ScreenCapture]:
    capture = ScreenCapture()
    yield capture
    capture.close()


@pytest.fixture(scope="module")
def routine(xvfb: XvfbServer, capture: ScreenCapture, tmp_path_factory: pytest.TempPathFactory) -> Routine:
    """Recorded on a window at (40, 40), which is then closed."""
    return record_ok_and_hello(capture, tmp_path_factory.mktemp("routine"))


def test_a_replay_on_the_window_as_recorded_clicks_ok_and_types_the_parameter(routine, capture):
    window = TargetWindow.start(40, 40)
    try:
        approver = ApproveAll()
        runner = RoutineRunner(routine, InputPerformer(X11Input(capture=capture)), capture, approver)
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
        result = RoutineRunner(routine, InputPerformer(X11Input(capture=capture)), capture, approver).run()
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
        result = RoutineRunner(routine, InputPerformer(X11Input(capture=capture)), capture, approver).run()
        assert result.outcome is ReplayOutcome.STOPPED
        assert approver.asked == [] and len(approver.problems) == 1
        assert "found in more than one place" in approver.problems[0].problem
        for window in (first, second):
            assert [e for e in window.sync() if e["event"] in ("press", "clicked")] == []
    finally:
        first.close()
        second.close()
