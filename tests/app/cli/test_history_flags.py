"""`holodesk history` on a session the engine recorded: a step whose screen did not change is shown as
flagged, never as a plain "ok"."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from bench.rigs.routine_scenes import Button, screen
from holodesk.app.cli.history_command import show_session
from holodesk.automation.actions import Click, Done, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, EngineSettings, Outcome
from holodesk.automation.proposal import PastStep, Proposal
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import iter_session_folders
from tests.automation.routines.test_routine_policy import Drawn, Performer

OK = Button("OK", 100, 100)


class ClickThenDone:
    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        frame = frames[-1]
        action = Click(Point(*OK.centre)) if not history else Done("finished")
        return Proposal(action, "", frame.width, frame.height)

    def interrupt(self) -> None:
        pass


class ApproveAll:
    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve()


def test_a_step_that_changed_nothing_is_flagged_in_the_history(tmp_path: Path):
    frames = Drawn(screen([OK]))  # the same picture after the click: nothing changed
    settings = EngineSettings(trajectory_root=tmp_path, settle_timeout_s=0.2, settle_poll_s=0.05, max_steps=3)
    result = StepEngine(ClickThenDone(), ApproveAll(), Performer(), frames, settings).run("press OK")
    assert result.outcome is Outcome.DONE
    (folder,) = iter_session_folders(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert show_session(tmp_path, folder.name, out, err) == 0, err.getvalue()
    (row,) = [line for line in out.getvalue().splitlines() if line.strip().startswith("1 ")]
    assert "no visible change" in row and " ok" not in row, out.getvalue()
