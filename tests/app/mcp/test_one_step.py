"""`act` as a run of the real StepEngine: approved steps run and are recorded, skips and stops do nothing."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from holodesk.app.mcp.act_arguments import ActRequest, ScreenSize
from holodesk.app.mcp.one_step import (
    CLIENT_CANCELLED,
    SKIPPED,
    STOPPED_AT_APPROVAL,
    DeskParts,
    RunHandle,
    StepBusy,
    StepRunner,
)
from holodesk.automation.actions import Action, Click, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest
from holodesk.automation.input.performer import ExecutionResult
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.automation.frames import solid_frame

# The captured monitor sits right of another: the agent's screenshot pixels land offset on the desktop.
LEFT = Monitor(1, Rect(0, 0, 500, 400))
RIGHT = Monitor(2, Rect(500, 0, 640, 480))


class Screen:
    def __init__(self) -> None:
        self.frame = solid_frame(640, 480, left=500, monitors=(LEFT, RIGHT))

    def grab(self, monitor: int | None) -> ScreenFrame:
        return self.frame


@dataclass
class Performer:
    executed: list[Action] = field(default_factory=list)

    def validate(self, action: Action) -> None:
        pass

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        self.executed.append(action)
        return ExecutionResult(action, True, action.describe(), 0.0)

    def close(self) -> None:
        pass


class Approver:
    """Answers with `decision`; with `hold`, waits (as a person would) until the run is cancelled."""

    def __init__(self, decision: ApprovalDecision, hold: bool = False) -> None:
        self.decision = decision
        self.hold = hold
        self.asked = threading.Event()
        self.requests: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        self.asked.set()
        while self.hold and not request.cancel.cancelled:
            time.sleep(0.01)
        return self.decision


def runner(approver: Approver, tmp_path: Path) -> tuple[StepRunner, Performer]:
    performer = Performer()
    parts = DeskParts(approver, performer, Screen(), tmp_path / "sessions", monitor=2)
    return StepRunner(parts, settle_timeout_s=0.2, settle_poll_s=0.01), performer


CLICK = ActRequest(Click(Point(10, 20)), "open the menu")


def test_an_approved_step_runs_on_the_desktop_and_is_recorded_with_the_clients_name(tmp_path):
    approver = Approver(ApprovalDecision.approve())
    steps, performer = runner(approver, tmp_path)
    report = steps.run(CLICK, ScreenSize(640, 480), "Claude Code")
    assert report.ok, report.words
    assert "the screen did not visibly change afterwards" in report.words  # this fake screen never changes
    assert performer.executed == [Click(Point(510, 20))]  # screenshot pixels, mapped onto monitor 2
    assert approver.requests[0].action == Click(Point(510, 20))
    assert approver.requests[0].proposal.note == "open the menu"
    (folder,) = iter_session_folders(tmp_path / "sessions")
    session = read_session(folder)
    assert session.task.startswith("Claude Code via MCP: click at")
    assert session.header["settings"]["mcp_client"] == "Claude Code"
    assert session.steps[0]["decision"] == "approve" and session.steps[0]["result"]["ok"]


def test_a_skip_does_nothing_and_says_so(tmp_path):
    steps, performer = runner(Approver(ApprovalDecision.skip()), tmp_path)
    report = steps.run(CLICK, ScreenSize(640, 480), "agent")
    assert not report.ok and report.words.startswith(SKIPPED)
    assert performer.executed == []


def test_a_stop_at_approval_does_nothing_and_says_so(tmp_path):
    steps, performer = runner(Approver(ApprovalDecision.stop()), tmp_path)
    report = steps.run(CLICK, ScreenSize(640, 480), "agent")
    assert not report.ok and report.words.startswith(STOPPED_AT_APPROVAL)
    assert performer.executed == [] and report.result.outcome.value == "stopped"


def test_a_cancel_from_the_client_withdraws_the_waiting_step(tmp_path):
    approver = Approver(ApprovalDecision.approve(), hold=True)  # would approve, were it not withdrawn
    steps, performer = runner(approver, tmp_path)
    reports = []
    thread = threading.Thread(
        target=lambda: reports.append(steps.run(CLICK, ScreenSize(640, 480), "agent")), daemon=True
    )
    thread.start()
    assert approver.asked.wait(10)
    assert steps.busy()
    try:
        steps.run(CLICK, ScreenSize(640, 480), "agent")
        raise AssertionError("a second step was accepted while one waits")
    except StepBusy:
        pass
    steps.stop()
    thread.join(10)
    (report,) = reports
    assert report.words.startswith(CLIENT_CANCELLED) and performer.executed == []
    (folder,) = iter_session_folders(tmp_path / "sessions")
    assert read_session(folder).outcome == "stopped"


def test_a_screen_of_another_size_than_the_screenshot_ends_the_step_before_asking(tmp_path):
    approver = Approver(ApprovalDecision.approve())
    steps, performer = runner(approver, tmp_path)
    report = steps.run(CLICK, ScreenSize(1920, 1080), "agent")
    assert not report.ok and "take a new screenshot" in report.words
    assert approver.requests == [] and performer.executed == []


def test_a_stop_before_the_run_starts_ends_it_before_the_person_is_asked(tmp_path):
    approver = Approver(ApprovalDecision.approve())
    steps, performer = runner(approver, tmp_path)
    handle = RunHandle()
    handle.stop()  # the client cancelled as its call was arriving
    report = steps.run(CLICK, ScreenSize(640, 480), "agent", handle)
    assert report.words.startswith(CLIENT_CANCELLED) and report.result.outcome.value == "stopped"
    assert approver.requests == [] and performer.executed == []
    # The stop was that run's: the next one is asked and runs.
    assert steps.run(CLICK, ScreenSize(640, 480), "agent").ok
