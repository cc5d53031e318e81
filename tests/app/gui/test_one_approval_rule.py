"""One approval rule object, asked by the engine ("approve all") and by the tray's approver (the ticked
kinds): the two cannot disagree about a step that must be shown (issue 47).

A rule unlike the shipped one is handed to both. Each side's verdict on a table of steps (asked, or let
through unshown) must follow that rule, not a copy of the shipped one: a side that decided with its own
copy would let this rule's always-shown click through, and show its covered Enter.
Runs the engine with in-memory parts and the approver on Qt's offscreen platform.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

from holodesk.app.gui.gui_approver import GuiApprover
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.qt import Qt
from holodesk.automation.actions import Action, Click, KeyCombo, Move, Point, Scroll, ScrollDirection, TypeText
from holodesk.automation.approval_rules import ApprovalRule
from holodesk.automation.auto_approval import AUTO_APPROVAL, AutoApproval
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, EngineSettings, Outcome
from holodesk.automation.proposal import Grounding
from tests.app.gui.approval_requests import approval_request
from tests.automation.test_engine import FakeScreen, RecordingPerformer
from tests.automation.test_engine_approval_rules import EXACT, ApproveAll, GroundedPolicy

ENTER = KeyCombo(("enter",))


class UnlikeTheShippedRule(AutoApproval):
    """Shows every click, however it was found; lets a lone Enter through. The rest as shipped."""

    def assess(self, action: Action, grounding: Grounding | None, paste_text: str | None = None) -> ApprovalRule:
        if isinstance(action, Click):
            return ApprovalRule(False, False, "this test's rule shows every click", per_kind_may_cover=False)
        if action == ENTER:
            return ApprovalRule(True, False, "this test's rule lets Enter through")
        return super().assess(action, grounding, paste_text)


# (step, asked by the engine once "approve all" was chosen, asked by the approver with every kind ticked)
TABLE: list[tuple[Action, bool, bool]] = [
    (Click(Point(20, 20)), True, True),  # the shipped rule lets both through
    (ENTER, False, False),  # the shipped rule shows it on both
    (Scroll(ScrollDirection.DOWN, at=Point(40, 40)), False, False),  # as shipped
    (TypeText("abc"), True, False),  # as shipped: "approve all" never covers typing, a ticked kind may
]
ALL_KINDS = {"click", "key", "scroll", "type", "move"}


def engine_asked(rule: AutoApproval) -> list[bool]:
    """Per row: whether the engine showed the step, "approve all" having been chosen on a first move."""
    screen = FakeScreen()
    approver = ApproveAll()
    answers: list[tuple[Action, Grounding | None]] = [(Move(Point(10, 10)), EXACT)]
    answers += [(action, EXACT) for action, _, _ in TABLE]
    engine = StepEngine(
        GroundedPolicy(answers), approver, RecordingPerformer(screen), screen, EngineSettings(monitor=2),
        auto_approval=rule,
    )  # fmt: skip
    result = engine.run("replay")
    assert result.outcome is Outcome.DONE, result.detail
    shown = [request.action for request in approver.shown]
    assert shown[0] == Move(Point(10, 10))
    return [action in shown[1:] for action, _, _ in TABLE]


def shown(qtbot, approver: GuiApprover, request: ApprovalRequest) -> bool:  # type: ignore[no-untyped-def]
    """Whether the approver showed the step (then answered Skip on its panel) or let it through unshown."""
    result: Future[ApprovalDecision] = Future()
    threading.Thread(target=lambda: result.set_result(approver.decide(request)), daemon=True).start()
    qtbot.waitUntil(lambda: result.done() or approver.panel.isVisible(), timeout=3000)
    asked = approver.panel.isVisible()
    if asked:
        qtbot.mouseClick(approver.panel.named_widgets()["skip"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(result.done, timeout=3000)
    assert result.result() == (ApprovalDecision.skip() if asked else ApprovalDecision.approve())
    return asked


def gui_asked(qtbot, approver: GuiApprover, rule: AutoApproval) -> list[bool]:  # type: ignore[no-untyped-def]
    """Per row: whether the approver, every kind ticked, showed the step: found exactly, its request
    filled in from `rule` as the engine given that rule fills it in."""
    verdicts: list[bool] = []
    for action, _, _ in TABLE:
        request = approval_request(action)
        said = rule.assess(action, EXACT)
        request = dataclasses.replace(
            request,
            proposal=dataclasses.replace(request.proposal, grounding=EXACT),
            may_approve_all=said.may_approve_all,
            why_asked=said.why_asked,
            irreversible=said.irreversible,
        )
        verdicts.append(shown(qtbot, approver, request))
    return verdicts


@pytest.fixture
def approver_with(qtbot) -> Iterator[Callable[[AutoApproval], GuiApprover]]:  # type: ignore[no-untyped-def]
    made: list[GuiApprover] = []

    def make(rule: AutoApproval) -> GuiApprover:
        approver = GuiApprover(OverlayController(), auto_approve_kinds=ALL_KINDS, auto_approval=rule)
        qtbot.addWidget(approver.panel)
        made.append(approver)
        return approver

    yield make
    for approver in made:
        approver.panel.retract()
        approver.overlay.clear()


def test_the_engine_and_the_approver_both_follow_the_rule_they_are_given(qtbot, approver_with) -> None:  # type: ignore[no-untyped-def]
    rule = UnlikeTheShippedRule()
    assert engine_asked(rule) == [engine for _, engine, _ in TABLE]
    assert gui_asked(qtbot, approver_with(rule), rule) == [gui for _, _, gui in TABLE]
    # Where the rule says a step is always shown, both sides showed it.
    for action, engine, gui in TABLE:
        if rule.always_shown(rule.assess(action, EXACT), looping=False):
            assert engine and gui, action


def test_the_shipped_rule_is_the_one_both_sides_ask_by_default(qtbot) -> None:  # type: ignore[no-untyped-def]
    screen = FakeScreen()
    engine = StepEngine(GroundedPolicy([]), ApproveAll(), RecordingPerformer(screen), screen)
    approver = GuiApprover(OverlayController())
    qtbot.addWidget(approver.panel)
    assert engine.auto_approval is AUTO_APPROVAL and approver.auto_approval is AUTO_APPROVAL
