"""Approval requests for the GUI tests: a proposal on a synthetic frame with a known monitor.

The in-process GUI tests run Qt's offscreen platform (one 800x600 screen at scale 1), so the frame's
monitor matches it: a target the panel accepts is one the offscreen screen shows.
"""

from __future__ import annotations

from holodesk.automation.actions import Action
from holodesk.automation.approval_rules import approval_rule
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine_protocols import ApprovalRequest
from holodesk.automation.proposal import Proposal
from tests.automation.frames import solid_frame

SCREEN_SIZE = (800, 600)


def approval_request(
    action: Action,
    *,
    step: int = 1,
    note: str = "",
    thought: str = "",
    loop_warning: str = "",
    cancel: CancelToken | None = None,
    element: str = "",
) -> ApprovalRequest:
    frame = solid_frame(*SCREEN_SIZE)
    proposal = Proposal(action, "raw model text", frame.width, frame.height, note, thought, element=element)
    # What the engine's approval rules say of a model's step, as the engine fills it in.
    rule = approval_rule(action, None)
    return ApprovalRequest(
        step,
        "test task",
        proposal,
        action,
        frame,
        cancel or CancelToken(),
        loop_warning,
        may_approve_all=rule.may_approve_all,
        why_asked=rule.why_asked,
        irreversible=rule.irreversible,
    )
