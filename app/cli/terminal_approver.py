"""Approval in the terminal for `holodesk run`: the action in words, its target, an annotated screenshot.

Everything that comes from the model (note, thought, the action's text) is printed through
automation.display_text: control characters escaped, never raw, and text to type in full with its
whitespace visible; long text as its length, start and end, with the full text on request (t).

Reads one line per decision: a(pprove), e(dit), s(kip) or q(uit). An edit asks for what the action
needs (a new target as "x,y" in screen pixels, new text, new keys) and is validated before it is
accepted; a bad edit is explained and asked again, never executed.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from holodesk.automation.actions import Action, KeyCombo, Point, TypeText
from holodesk.automation.annotate import annotate, caption_for
from holodesk.automation.display_text import safe_text, text_summary, visible_text
from holodesk.automation.engine import ApprovalDecision, ApprovalRequest, EngineEvent, EngineState
from holodesk.automation.errors import ActionError
from holodesk.automation.keys import parse_combination

PROMPT = "[a]pprove  [e]dit  [s]kip  [q]uit > "
PROMPT_WITH_TEXT = "[a]pprove  [e]dit  [s]kip  [q]uit  [t]ext in full > "


class TerminalApprover:
    """An Approver that asks on a text stream; `out_dir` receives the annotated screenshots."""

    def __init__(self, out_dir: Path, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.out_dir = out_dir
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        out_dir.mkdir(parents=True, exist_ok=True)

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        picture = self.out_dir / f"step-{request.step:04d}-proposal.png"
        annotate(request.frame, request.action, f"{request.step}: {caption_for(request.action)}").save(picture)
        proposal = request.proposal
        action = request.action
        long_text = isinstance(action, TypeText) and text_summary(action.text) != visible_text(action.text)
        self._say(f"\nStep {request.step}: {caption_for(action)}")
        if isinstance(action, TypeText):
            self._say(f"  text:    {len(action.text)} characters, spaces as · : {text_summary(action.text)}")
        if proposal.note:
            self._say(f"  note:    {safe_text(proposal.note)}")
        if proposal.thought:
            self._say(f"  thought: {safe_text(proposal.thought)}")
        if request.previous_result:
            self._say(f"  step {request.step - 1} result: {safe_text(request.previous_result)}")
        if request.adjustment:
            self._say(f"  NOTE: {safe_text(request.adjustment)}")
        self._say(f"  picture: {picture}")
        if request.loop_warning:
            self._say(f"  WARNING: {request.loop_warning}. Approve only if you are sure.")
        while True:
            try:
                answer = self._ask(PROMPT_WITH_TEXT if long_text else PROMPT)
            except KeyboardInterrupt:  # Ctrl+C at the prompt means stop, not a traceback
                return ApprovalDecision.stop()
            if answer is None or answer in ("q", "quit", "stop"):
                return ApprovalDecision.stop()
            if answer in ("a", "approve", "y", "yes"):
                return ApprovalDecision.approve()
            if answer in ("s", "skip"):
                return ApprovalDecision.skip()
            if answer in ("t", "text") and isinstance(action, TypeText):
                self._say(f"  full text ({len(action.text)} characters, spaces as ·):\n{visible_text(action.text)}")
                continue
            if answer in ("e", "edit"):
                edited = self._edit(request.action)
                if edited is not None:
                    return ApprovalDecision.edit(edited)
                continue
            self._say(f"  please answer a, e, s or q (got {safe_text(answer)!r})")

    def _edit(self, action: Action) -> Action | None:
        try:
            if isinstance(action, TypeText):
                text = self._ask("  new text > ", lower=False)
                return None if text is None else dataclasses.replace(action, text=text)
            if isinstance(action, KeyCombo):
                keys = self._ask("  new keys (e.g. ctrl+shift+t) > ")
                return None if keys is None else KeyCombo(parse_combination(keys))
            points = action.points()
            if not points:
                self._say("  this action has nothing to edit; approve, skip or quit")
                return None
            answer = self._ask(f"  new target x,y in screen pixels (now {points[0].x},{points[0].y}) > ")
            if answer is None:
                return None
            x_text, _, y_text = answer.replace(" ", "").partition(",")
            target = Point(int(x_text), int(y_text))
        except (ActionError, ValueError) as exc:
            self._say(f"  not a valid edit: {exc}")
            return None
        # Move the first point (click target, drag start, typing position); keep the rest.
        first = points[0]
        return action.map_points(lambda p: target if p == first else p)

    def _ask(self, prompt: str, lower: bool = True) -> str | None:
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            return None  # end of input: the safe answer is to stop
        line = line.rstrip("\n")
        return line.strip().lower() if lower else line

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()


def terminal_event_printer(stdout: TextIO | None = None) -> Callable[[EngineEvent], None]:
    """An engine listener that prints, escaped, what the user must not miss: failed and no-effect steps."""
    out = stdout or sys.stdout

    def on_event(event: EngineEvent) -> None:
        if event.state is EngineState.STEP_FAILED:
            out.write(f"  STEP {event.step} FAILED: {safe_text(event.detail)}\n")
        elif event.state is EngineState.NO_VISIBLE_CHANGE:
            out.write(f"  step {event.step}: {safe_text(event.detail)}\n")
        else:
            return
        out.flush()

    return on_event
