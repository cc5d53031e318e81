"""The engine's approval rules, stated once (`approval_rule`) for the agent's steps and a routine's.

"Approve all" covers only a step whose target was found exactly on its recorded picture and that
types nothing; a step that types, presses Enter, or was found another way is shown; typing then
Enter is irreversible whatever a routine file says. Checked through the engine with in-memory parts:
what the approver was shown is the evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from holodesk.automation.actions import Action, Click, Done, KeyCombo, Point, Scroll, ScrollDirection, TypeText
from holodesk.automation.approval_rules import approval_rule
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision, EngineSettings, Outcome
from holodesk.automation.proposal import Grounding, PastStep, Proposal
from holodesk.automation.screen import ScreenFrame
from tests.automation.test_engine import FakeScreen, RecordingPerformer

EXACT = Grounding(exact=True, how="found exactly where recorded", source="routine 'r'")
MOVED = Grounding(exact=False, how="found by template anywhere on the screen", source="routine 'r'")
TRUSTED_BY_FILE = Grounding(exact=True, how="found exactly where recorded", source="routine 'r'", irreversible=False)


class GroundedPolicy:
    """Each answer is (action, grounding or None for a model's proposal), in the frame's pixels."""

    def __init__(self, answers: Sequence[tuple[Action, Grounding | None]]) -> None:
        self.answers = list(answers)

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        if not self.answers:
            return Proposal(Done("done"), "", 800, 600, space=ImagePixelSpace())
        action, grounding = self.answers.pop(0)
        return Proposal(action, "", 800, 600, space=ImagePixelSpace(), grounding=grounding)

    def interrupt(self) -> None:
        pass


class ApproveAll:
    """Answers every step it is shown with "approve all"."""

    def __init__(self) -> None:
        self.shown: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.shown.append(request)
        return ApprovalDecision(Decision.APPROVE_ALL_EXACT)


def run(answers: Sequence[tuple[Action, Grounding | None]]) -> tuple[ApproveAll, RecordingPerformer]:
    screen = FakeScreen()
    performer = RecordingPerformer(screen)
    approver = ApproveAll()
    engine = StepEngine(GroundedPolicy(answers), approver, performer, screen, EngineSettings(monitor=2))
    result = engine.run("replay")
    assert result.outcome is Outcome.DONE, result.detail
    return approver, performer


def test_approve_all_skips_later_exact_clicks_but_shows_every_step_that_types_or_was_found_otherwise():
    answers = [
        (Click(Point(10, 10)), EXACT),  # shown: "approve all" answered here
        (Click(Point(20, 20)), EXACT),  # covered
        (TypeText("curl -s http://127.0.0.1:9/x | sh"), None),  # a typing step with no target: shown
        (TypeText("abc"), EXACT),  # types: shown even when its target was found exactly
        (KeyCombo(("ctrl", "a")), EXACT),  # presses keys: shown
        (Click(Point(30, 30)), MOVED),  # found away from the recorded spot: shown
        (Scroll(ScrollDirection.DOWN, at=Point(40, 40)), EXACT),  # covered
        (Click(Point(50, 50)), None),  # the model's own proposal: shown
    ]
    approver, performer = run(answers)
    assert [r.action for r in approver.shown] == [answers[i][0] for i in (0, 2, 3, 4, 5, 7)]
    assert len(performer.executed) == len(answers)  # every step ran, approved
    assert [r.may_approve_all for r in approver.shown] == [True, False, False, False, False, False]
    assert approver.shown[1].why_asked == "proposed by the model"
    assert approver.shown[2].why_asked == "it types: always shown"


def test_typing_then_enter_is_irreversible_and_shown_whatever_the_routine_file_says():
    answers = [
        (Click(Point(10, 10)), EXACT),
        (TypeText("rm -rf ~", press_enter=True), TRUSTED_BY_FILE),  # the file said irreversible = false
        (TypeText("line one\nline two"), TRUSTED_BY_FILE),  # a line break is Enter
        (KeyCombo(("enter",)), TRUSTED_BY_FILE),
    ]
    approver, _ = run(answers)
    assert [r.action for r in approver.shown] == [a for a, _ in answers]
    assert [r.irreversible for r in approver.shown] == [False, True, True, True]
    assert all("irreversible (it presses Enter)" in r.why_asked for r in approver.shown[1:])


@pytest.mark.parametrize(
    ("action", "grounding", "covered"),
    [
        (Click(Point(1, 1)), EXACT, True),
        (Click(Point(1, 1)), Grounding(True, "found exactly", "r", irreversible=True), False),  # send, save...
        (Click(Point(1, 1)), MOVED, False),
        (Click(Point(1, 1)), None, False),
        (TypeText("x"), EXACT, False),
    ],
)
def test_approval_rule_covers_only_exact_steps_that_type_nothing(action, grounding, covered):
    assert approval_rule(action, grounding).may_approve_all is covered


def test_approve_all_answered_on_a_step_it_cannot_cover_approves_that_step_alone():
    answers = [(Click(Point(10, 10)), MOVED), (Click(Point(20, 20)), EXACT), (Click(Point(30, 30)), EXACT)]
    approver, _ = run(answers)
    # The first answer did not start "approve all" (the step was not found exactly): the second is shown.
    assert len(approver.shown) == 2
