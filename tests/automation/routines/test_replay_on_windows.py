"""Routines replayed on real windows under Xvfb, as runs of the step engine: the window must see the
clicks and read the typed text, and the replay must be a recorded session.

A session is recorded on a real target window (its screenshots are real grabs), compiled and saved
as a routine, read back, and replayed through the real input performer (XTEST) and screen capture. The
window logs what it received; the tests read that log and the session on disk, not the proposer's
own account.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.routine_scenes import click_step, record_session
from bench.rigs.target_client import TargetWindow
from bench.rigs.window_routine import record_ok_and_hello, settled
from holodesk.automation.actions import Click, TypeText
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision, Outcome, RunResult
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.locators import Rung
from holodesk.automation.routines.replay import (
    ProblemChoice,
    ProblemRequest,
    RepairRequest,
    RoutinePolicy,
    routine_engine,
)
from holodesk.automation.routines.routine_file import Routine, load_routine
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(2400, 900)], indirect=True, ids=str, scope="module"),
]


class ApproveAll:
    """Answers every step it is shown with "approve all" and remembers it; stops at any problem."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []
        self.problems: list[ProblemRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision(Decision.APPROVE_ALL_EXACT)

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


def replay(
    routine: Routine, capture: ScreenCapture, approver: ApproveAll, sessions: Path, values: dict[str, str] | None = None
) -> tuple[RunResult, RoutinePolicy]:
    policy = RoutinePolicy(routine, values or {}, capture, approver)
    performer = InputPerformer(X11Input(capture=capture))
    engine = routine_engine(policy, approver, performer, capture, trajectory_root=sessions, monitor=1, agent_steps=1)
    return engine.run(routine.task), policy


def test_approve_all_on_the_window_as_recorded_still_shows_the_typing_step_and_the_replay_is_a_session(
    routine, capture, tmp_path
):
    window = TargetWindow.start(40, 40)
    try:
        approver = ApproveAll()
        assert [(p.name, p.default) for p in routine.parameters] == [("text_1", "hello routine")]
        result, policy = replay(routine, capture, approver, tmp_path, {"text_1": "typed by a routine"})
        assert result.outcome is Outcome.DONE, result.detail
        events = window.sync()
        assert {"event": "clicked", "widget": "ok"} in events
        assert [e["text"] for e in events if e["event"] == "text"][-1] == "typed by a routine"
    finally:
        window.close()
    # "Approve all" was answered on the click (found exactly); the typing step was shown all the same.
    assert [r.action.kind for r in approver.asked] == ["click", "type"]
    assert approver.asked[0].may_approve_all and not approver.asked[1].may_approve_all
    assert approver.asked[1].why_asked == "it types: always shown"
    assert policy.model_calls == 0 and [r.rung for r in policy.records] == [Rung.NEAR.value, Rung.NEAR.value]
    # The replay is a session like an agent's run: each step written, with how its target was found.
    (folder,) = iter_session_folders(tmp_path)
    session = read_session(folder)
    assert session.outcome == "done" and session.header["settings"]["routine"] == routine.name
    steps = [s for s in session.steps if s.get("decision") != "final"]
    assert [s["action_screen"]["kind"] for s in steps] == ["click", "type"]
    assert all(s["result"]["ok"] and (folder / s["screenshot"]).is_file() for s in steps)
    assert [s["grounding"]["rung"] for s in steps] == [Rung.NEAR.value, Rung.NEAR.value]


def test_a_moved_window_is_found_and_each_step_is_asked_on_its_own(routine, capture, tmp_path):
    window = TargetWindow.start(300, 220)
    try:
        approver = ApproveAll()
        result, _ = replay(routine, capture, approver, tmp_path)
        assert result.outcome is Outcome.DONE, result.detail
        events = window.sync()
        assert {"event": "clicked", "widget": "ok"} in events
        assert [e["text"] for e in events if e["event"] == "text"][-1] == "hello routine"
        assert len(approver.asked) == 2  # found away from the recorded spot: never approved in bulk
        assert not any(r.may_approve_all for r in approver.asked)
        assert approver.asked[0].why_asked.startswith(f"found by {Rung.ANYWHERE.value}")
    finally:
        window.close()


def test_two_windows_that_both_match_are_refused_and_neither_is_clicked(routine, capture, tmp_path):
    # Side by side with the same surroundings, both away from the recorded spot: nothing tells them apart.
    first, second = TargetWindow.start(100, 200), TargetWindow.start(1300, 200)
    try:
        approver = ApproveAll()
        result, _ = replay(routine, capture, approver, tmp_path)
        assert result.outcome is Outcome.STOPPED
        assert approver.asked == [] and len(approver.problems) == 1
        assert "found in more than one place" in approver.problems[0].problem
        for window in (first, second):
            assert [e for e in window.sync() if e["event"] in ("press", "clicked")] == []
    finally:
        first.close()
        second.close()


def test_the_effect_of_a_step_without_a_target_is_checked_where_the_moved_window_is(capture, tmp_path):
    """Click the field, then type where the focus is (no target: its effect was recorded in screen
    pixels). Replayed on the window moved, the typing's effect is looked for where the window is now."""
    window = TargetWindow.start(40, 40)
    try:
        performer = InputPerformer(X11Input(capture=capture))
        field = window.centre("field")
        before_click = capture.grab(1)
        performer.execute(Click(field))
        before_typing = settled(capture)
        typing = {
            "action_model": {"kind": "type"},
            "action_screen": {"kind": "type", "text": "focus typed", "press_enter": False, "overwrite": False},
            "decision": "approve",
            "result": {"ok": True, "detail": "typed"},
        }
        performer.execute(TypeText("focus typed"))
        window.sync()
        end = settled(capture)
    finally:
        window.close()
    session = record_session(
        tmp_path / "recorded",
        "type focus typed into the field",
        [(before_click, click_step(field.x, field.y, "the text field")), (before_typing, typing)],
        end,
    )
    routine = load_routine(save_compiled(compile_session(session, "focus"), tmp_path / "routines"))
    assert routine.steps[1].target is None and routine.steps[1].expect.changed
    moved = TargetWindow.start(420, 300)
    try:
        approver = ApproveAll()
        result, _ = replay(routine, capture, approver, tmp_path / "replays")
        assert approver.problems == [], approver.problems[0].problem
        assert result.outcome is Outcome.DONE, result.detail
        assert [e["text"] for e in moved.sync() if e["event"] == "text"][-1] == "focus typed"
    finally:
        moved.close()


def test_a_click_on_a_plain_area_is_a_warning_at_save_and_its_replay_asks_instead_of_guessing(capture, tmp_path):
    """The window's pad is one colour wherever it is clicked (like a terminal's background)."""
    window = TargetWindow.start(40, 40)
    try:
        pad = window.centre("pad")
        frame = capture.grab(1)
        InputPerformer(X11Input(capture=capture)).execute(Click(pad))
        window.sync()
        end = settled(capture)
        session = record_session(tmp_path / "recorded", "click the pad", [(frame, click_step(pad.x, pad.y, ""))], end)
        compiled = compile_session(session, "pad")
        assert compiled.warnings == [
            "step 1: its target's picture is one plain colour (a click on a plain background): no replay can find it"
            " again (it has no description for the model either): a replay stops there and asks"
        ]
        routine = load_routine(save_compiled(compiled, tmp_path / "routines"))
        window.sync()
        approver = ApproveAll()
        result, _ = replay(routine, capture, approver, tmp_path / "replays")
        assert result.outcome is Outcome.STOPPED and approver.asked == []
        assert len(approver.problems) == 1 and "one plain colour" in approver.problems[0].problem
        assert [e for e in window.sync() if e["event"] in ("press", "clicked")] == []  # nothing was guessed
    finally:
        window.close()
