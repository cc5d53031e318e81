"""An `act`'s record is closed after its answer, and always before the next run starts and at exit.

The closing (the final answer's screenshot, the end line) is held back by a gate here, so each test
sees the answer come first and then what waits for the record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from holodesk.app.mcp.act_arguments import ScreenSize
from holodesk.app.mcp.one_step import RECORD_INCOMPLETE, RecordIncomplete, StepRunner
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest
from holodesk.automation.trajectory import TrajectoryWriteError, iter_session_folders, read_session
from tests.app.mcp.test_one_step import CLICK, runner
from tests.app.mcp.test_one_step import Approver as ServerApprover
from tests.app.mcp.test_server_tools import call, desk

SCREEN = ScreenSize(640, 480)


def completely_recorded(folder: Path) -> bool:
    """The session has its end line and every screenshot its steps name is on disk."""
    session = read_session(folder)
    shots = [step["screenshot"] for step in session.steps]
    return session.end is not None and len(shots) == 2 and all((folder / shot).is_file() for shot in shots)


class Approver:
    """Approves; at each asking notes whether every earlier session was completely recorded by then."""

    def __init__(self, sessions: Path) -> None:
        self.sessions = sessions
        self.asked = threading.Semaphore(0)
        self.earlier_complete: list[bool] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        folders = sorted(iter_session_folders(self.sessions), key=lambda folder: folder.name)[:-1]
        self.earlier_complete.append(all(completely_recorded(folder) for folder in folders))
        self.asked.release()
        return ApprovalDecision.approve()


def gate_the_closing(steps: StepRunner, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Hold every record closing until the returned event is set."""
    gate = threading.Event()
    hand_over = steps.records.later

    def held(close: Callable[[], None]) -> None:
        def when_open() -> None:
            gate.wait(30)
            close()

        hand_over(when_open)

    monkeypatch.setattr(steps.records, "later", held)
    return gate


def test_the_answer_comes_before_the_record_closes_and_the_next_step_waits_for_it(tmp_path, monkeypatch):
    approver = Approver(tmp_path / "sessions")
    steps, performer = runner(approver, tmp_path)
    gate = gate_the_closing(steps, monkeypatch)
    first = steps.run(CLICK, SCREEN, "agent")
    assert first.ok, first.words
    assert approver.asked.acquire(timeout=0)  # the first step's asking
    (folder,) = iter_session_folders(tmp_path / "sessions")
    assert read_session(folder).end is None  # answered before its record closed
    reports = []
    second = threading.Thread(target=lambda: reports.append(steps.run(CLICK, SCREEN, "agent")), daemon=True)
    second.start()
    assert not approver.asked.acquire(timeout=1.0)  # the second waits for the first one's record
    assert approver.earlier_complete == [True]
    gate.set()
    second.join(10)
    assert reports and reports[0].ok, reports
    assert approver.earlier_complete == [True, True]  # the first session was whole when the second was shown
    assert len(performer.executed) == 2


def test_the_servers_end_waits_until_every_record_is_closed(tmp_path, monkeypatch):
    steps, _ = runner(Approver(tmp_path / "sessions"), tmp_path)
    gate = gate_the_closing(steps, monkeypatch)
    assert steps.run(CLICK, SCREEN, "agent").ok
    (folder,) = iter_session_folders(tmp_path / "sessions")
    assert not steps.wait_idle(0.3)  # the record is still open: the server's end would wait on
    assert not completely_recorded(folder)
    gate.set()
    assert steps.wait_idle(10)
    assert completely_recorded(folder)
    assert read_session(folder).outcome == "done"


def test_a_record_that_could_not_be_completed_refuses_the_next_step_in_words_once(tmp_path, monkeypatch):
    steps, performer = runner(Approver(tmp_path / "sessions"), tmp_path)
    hand_over = steps.records.later

    def failing(close: Callable[[], None]) -> None:
        def fail() -> None:
            close()
            raise TrajectoryWriteError("cannot record the session in /sessions: No space left on device")

        hand_over(fail)

    monkeypatch.setattr(steps.records, "later", failing)
    assert steps.run(CLICK, SCREEN, "agent").ok
    with pytest.raises(RecordIncomplete, match=f"{RECORD_INCOMPLETE}: cannot record .*No space left on device"):
        steps.run(CLICK, SCREEN, "agent")
    assert len(performer.executed) == 1  # the refused step did nothing
    monkeypatch.setattr(steps.records, "later", hand_over)
    assert steps.run(CLICK, SCREEN, "agent").ok  # said once; the next step runs


def test_the_agent_is_told_in_words_that_the_last_record_is_incomplete(tmp_path, monkeypatch):
    d, performer = desk(ServerApprover(ApprovalDecision.approve()), tmp_path)
    hand_over = d.steps.records.later

    def failing(close: Callable[[], None]) -> None:
        def fail() -> None:
            close()
            raise TrajectoryWriteError("cannot record the session in /sessions: No space left on device")

        hand_over(fail)

    monkeypatch.setattr(d.steps.records, "later", failing)
    assert not call(d, "act", {"action": "click", "x": 10, "y": 20}).is_error
    refused = call(d, "act", {"action": "click", "x": 11, "y": 20})
    assert refused.is_error and len(performer.executed) == 1
    words = refused.content[0].text
    assert words.startswith(f"act: {RECORD_INCOMPLETE}: cannot record the session") and "nothing was done" in words
