"""Asks about one step with the real TerminalApprover on this process's terminal (see terminal_screen.py).

argv[1] is JSON: {"action": {...}, "step": N, "note": str, "thought": str, "element": str}. The
decision is printed last, as JSON: {"decision": ..., "action": {...} | null}.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from holodesk.app.cli.terminal_approver import TerminalApprover
from holodesk.automation.actions import action_from_dict
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine_protocols import ApprovalRequest
from holodesk.automation.proposal import Proposal
from tests.automation.frames import solid_frame


def main() -> None:
    spec = json.loads(sys.argv[1])
    action = action_from_dict(spec["action"])
    frame = solid_frame(800, 600)
    proposal = Proposal(
        action,
        "raw",
        frame.width,
        frame.height,
        spec.get("note", ""),
        spec.get("thought", ""),
        element=spec.get("element", ""),
    )
    request = ApprovalRequest(spec.get("step", 1), "a task", proposal, action, frame, CancelToken(), "")
    with tempfile.TemporaryDirectory() as pictures:
        decision = TerminalApprover(Path(pictures)).decide(request)
    edited = decision.action.to_dict() if decision.action is not None else None
    print(json.dumps({"decision": decision.decision.value, "action": edited}))


if __name__ == "__main__":
    main()
