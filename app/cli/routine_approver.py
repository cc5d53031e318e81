"""Approval of a routine's steps in the terminal: one line read per question.

A step: a(pprove), A (approve it and every later step that locates exactly), s(kip), q(uit); the
step's target is drawn on a picture in `out_dir`. A problem (target not found, effect missing):
r(etry), c(ontinue with the agent), g(o on: only when the step ran), q(uit). A repair: its diff,
then y/N. End of input or Ctrl+C is always the safe answer (stop, or no repair).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from holodesk.automation.action_picture import annotate, caption_for
from holodesk.automation.display_text import safe_text
from holodesk.automation.routines.replay import (
    ProblemChoice,
    ProblemRequest,
    RepairRequest,
    RoutineEvent,
    StepRequest,
    Verdict,
)

STEP_PROMPT = "[a]pprove  [A]pprove this and every exact step  [s]kip  [q]uit > "
PROBLEM_PROMPT = "[r]etry  [c]ontinue with the agent  [q]uit > "
PROBLEM_PROMPT_RAN = "[r]etry the check  [g]o on  [c]ontinue with the agent  [q]uit > "
REPAIR_PROMPT = "write this repair into the routine? [y/N] > "


class TerminalRoutineApprover:
    def __init__(self, out_dir: Path, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.out_dir = out_dir
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        out_dir.mkdir(parents=True, exist_ok=True)

    def decide(self, request: StepRequest) -> Verdict:
        total = len(request.routine.steps)
        picture = self.out_dir / f"routine-step-{request.step.number:02d}.png"
        annotate(request.frame, request.action, f"{request.step.number}: {caption_for(request.action)}").save(picture)
        self._say(f"\nStep {request.step.number} of {total}: {safe_text(request.step.describe())}")
        self._say(f"  will: {safe_text(request.action.describe())}")
        self._say(f"  asked because: {safe_text(request.why_asked)}")
        self._say(f"  picture: {picture}")
        while True:
            answer = self._ask(STEP_PROMPT, lower=False)
            if answer is None or answer.lower() in ("q", "quit"):
                return Verdict.STOP
            if answer == "A":
                return Verdict.APPROVE_ALL_EXACT
            if answer.lower() in ("a", "y", "approve"):
                return Verdict.APPROVE
            if answer.lower() in ("s", "skip"):
                return Verdict.SKIP
            self._say("  please answer a, A, s or q")

    def problem(self, request: ProblemRequest) -> ProblemChoice:
        self._say(f"\nStep {request.step.number}: {safe_text(request.problem)}")
        prompt = PROBLEM_PROMPT_RAN if request.effect_missing else PROBLEM_PROMPT
        while True:
            answer = self._ask(prompt)
            if answer is None or answer in ("q", "quit"):
                return ProblemChoice.STOP
            if answer in ("r", "retry"):
                return ProblemChoice.RETRY
            if answer in ("c", "agent"):
                return ProblemChoice.HAND_OVER
            if answer in ("g", "go") and request.effect_missing:
                return ProblemChoice.CONTINUE
            self._say("  please answer " + ("r, g, c or q" if request.effect_missing else "r, c or q"))

    def offer_repair(self, request: RepairRequest) -> bool:
        self._say(f"\nStep {request.step.number} was found by {request.located.rung.value}; the repaired routine:")
        for line in request.repair.diff.splitlines():
            self._say("  " + safe_text(line))
        answer = self._ask(REPAIR_PROMPT)
        return answer in ("y", "yes")

    def _ask(self, prompt: str, lower: bool = True) -> str | None:
        self.stdout.write(prompt)
        self.stdout.flush()
        try:
            line = self.stdin.readline()
        except KeyboardInterrupt:
            return None
        if not line:
            return None
        return line.strip().lower() if lower else line.strip()

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()


def routine_event_printer(stdout: TextIO) -> Callable[[RoutineEvent], None]:
    """A runner listener printing each step's locator and effect as it goes."""

    def on_event(event: RoutineEvent) -> None:
        if event.kind.value in ("located", "step_done", "problem"):
            stdout.write(f"  step {event.step} {event.kind.value.replace('_', ' ')}: {safe_text(event.detail)}\n")
            stdout.flush()

    return on_event
