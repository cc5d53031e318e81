"""The replay's verdict on one step, as the session records it and `holodesk history` shows it.

A step is flagged, in words, when its target was not found exactly where recorded, when its effect
could not be judged, or when the user was asked about it (its effect did not appear). The verdict
is known only after the step ran, so it rides in the next proposal's grounding record
(`trajectory.VERDICTS_KEY`), and the session reader puts it back on its own step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from holodesk.automation.routines.effects import EffectCheck
from holodesk.automation.routines.locators import Located, Rung


@dataclass(frozen=True, slots=True)
class StepVerdict:
    """What the replay concluded about routine step `step`: its flags (none: it went as recorded)."""

    step: int
    flags: tuple[str, ...]
    detail: str

    def to_record(self) -> dict[str, Any]:
        return {"routine_step": self.step, "flags": list(self.flags), "detail": self.detail}


def how_found(located: Located | None) -> str:
    """How the step's target was found, in words (the approval panel's and the history's)."""
    if located is None:
        return "a step without a target (keys, or typing where the focus is)"
    if located.exact:  # the detail would say "where recorded" again: the score is what is left to say
        return f"found exactly where recorded (score {located.score:.2f})"
    if located.rung is Rung.NEAR:
        return f"found nearby, not exactly where recorded ({located.detail})"
    return f"found by {located.rung.value} ({located.detail})"


def judge_step(step: int, located: Located | None, check: EffectCheck, asked: str) -> StepVerdict:
    """The verdict after the effect check: `asked` is the problem put to the user ("" when none was)."""
    flags: list[str] = []
    if located is not None and not located.exact:
        flags.append(how_found(located))
    if asked:
        then = "seen when looked at again" if check.seen else "you chose to go on"
        flags.append(f"you were asked: {asked}; {then}")
    elif not check.judged:
        flags.append(f"not judged: {check.detail}")
    return StepVerdict(step, tuple(flags), check.detail)
