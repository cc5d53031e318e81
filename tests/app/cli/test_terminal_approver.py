"""The terminal approver shows the step in words, the model's target description, note and thought,
with every control character escaped, and reads one answer a line."""

from __future__ import annotations

import io
from pathlib import Path

from holodesk.app.cli.terminal_approver import TerminalApprover, printable
from holodesk.automation.actions import Click, PlanGoal, Point, UpdatePlan
from holodesk.automation.engine import Decision
from tests.app.gui.approval_requests import approval_request


def decide(tmp_path: Path, request, answers: str = "a\n") -> tuple[Decision, str]:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    decision = TerminalApprover(tmp_path, io.StringIO(answers), out).decide(request)
    return decision.decision, out.getvalue()


def test_the_target_description_is_shown_escaped(tmp_path: Path) -> None:
    hostile = "OK button\x1b[2J\x1b]0;pwned\x07 \u202eevil"
    request = approval_request(Click(Point(120, 80)), element=hostile, note="n\x1b[31m", thought="t\x08X")
    decision, shown = decide(tmp_path, request)
    assert decision is Decision.APPROVE
    assert "  target:  OK button\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil" in shown
    assert "  note:    n\\x1b[31m" in shown and "  thought: t\\x08X" in shown
    assert not any(ch in shown for ch in "\x1b\x07\x08\u202e")


def test_a_plan_is_shown_one_goal_a_line(tmp_path: Path) -> None:
    plan = UpdatePlan((PlanGoal("Find the mail", "done"), PlanGoal("Reply\x1b[1m", "running")))
    _, shown = decide(tmp_path, approval_request(plan, step=2))
    assert "Step 2: update the plan:\n        1. Find the mail [done]\n        2. Reply\\x1b[1m [running]\n" in shown


def test_printable_keeps_ordinary_text() -> None:
    assert printable("Grüße — 東京 'quoted' \"x\"") == "Grüße — 東京 'quoted' \"x\""
