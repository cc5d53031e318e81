"""The eval-only approver: approves every step, because a benchmark has no user to ask.

Holodesk never auto-approves a user's task unless the user chose it per action kind; this class is
used by `holodesk eval` alone, on a benchmark page opened for the purpose, and counts what it approved.
"""

from __future__ import annotations

from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest


class EvalAutoApproval:
    """Approves each proposed action as it is (no edits, no skips); `approved` counts them."""

    def __init__(self) -> None:
        self.approved = 0

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        if request.cancel.cancelled:
            return ApprovalDecision.stop()
        self.approved += 1
        return ApprovalDecision.approve()
