"""What the step loop writes about a session and its steps beside what happened (the metadata).

The session's settings, where each step's picture lies on the desktop, and what a proposal said
(its text, action in model space, timings, grounding). automation/engine.py puts these into the
records automation/trajectory.py writes; here they are only turned into plain data.
"""

from __future__ import annotations

from typing import Any

from holodesk.automation.engine_protocols import EngineSettings
from holodesk.automation.proposal import Proposal
from holodesk.automation.screen import ScreenFrame


def proposal_meta(proposal: Proposal) -> dict[str, Any]:
    """What a step's record says of the proposal: its text, note, action in model space, picture size,
    timings, and (when there are any) the element, the task asked, rejected answers and grounding."""
    record: dict[str, Any] = {
        "raw_text": proposal.raw_text,
        "note": proposal.note,
        "thought": proposal.thought,
        "action_model": proposal.action.to_dict(),
        "image_size": [proposal.image_width, proposal.image_height],
        "timings": proposal.timings.to_dict(),
    }
    if proposal.element:
        record["element"] = proposal.element
    if proposal.task_asked:
        record["task_asked"] = proposal.task_asked
    if proposal.rejected:
        record["rejected_answers"] = [{"raw_text": r.raw_text, "error": r.error} for r in proposal.rejected]
    if proposal.grounding is not None:
        record["grounding"] = {
            "source": proposal.grounding.source,
            "how": proposal.grounding.how,
            "exact": proposal.grounding.exact,
            **proposal.grounding.record,
        }
    return record


def frame_meta(frame: ScreenFrame) -> dict[str, Any]:
    """Where a step's picture lies on the desktop: its region and every monitor (physical pixels, scale)."""
    region = frame.region
    return {
        "region": {"left": region.left, "top": region.top, "width": region.width, "height": region.height},
        "monitors": [
            {
                "index": m.index,
                "left": m.rect.left,
                "top": m.rect.top,
                "width": m.rect.width,
                "height": m.rect.height,
                "scale": m.scale,
                "name": m.name,
            }
            for m in frame.monitors
        ],
    }


def timings_meta(timings: Any) -> dict[str, Any] | None:
    """An unusable answer's timings as recorded (UnusableProposal carries them untyped), or None."""
    return timings.to_dict() if hasattr(timings, "to_dict") else None


def settings_meta(settings: EngineSettings) -> dict[str, Any]:
    """The run's settings as the session's first record names them, with what its starter adds."""
    return {
        "max_steps": settings.max_steps,
        "monitor": settings.monitor,
        "history_steps": settings.history_steps,
        "keep_screenshots": settings.keep_screenshots,
        **settings.session_meta,
    }
