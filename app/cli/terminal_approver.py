"""Approval in the terminal for `holodesk run`: the action in words, its target, an annotated screenshot.

Everything that comes from the model (note, thought, the action's text) is printed through
automation.display_text: control characters escaped, never raw, and text to type in full with its
whitespace visible; long text as its length, start and end, with the full text on request (t).

Reads one line per decision: a(pprove), e(dit), s(kip) or q(uit). An edit asks for what the action
needs (a new target as "x,y" in screen pixels, new text, new keys) and is validated before it is
accepted; a bad edit is explained and asked again, never executed. When the model asks the user a
question, the question is shown and one line is read as the reply (an empty line asks again; q on
its own, end of input or Ctrl+C stops the run).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from holodesk.automation.actions import Action, KeyCombo, Point, TypeText
from holodesk.automation.annotate import annotate, caption_for
from holodesk.automation.coords import Monitor, monitor_at
from holodesk.automation.display_text import safe_text, text_summary, visible_text
from holodesk.automation.engine import ApprovalDecision, ApprovalRequest, EngineEvent, EngineState, QuestionRequest
from holodesk.automation.errors import ActionError, OffScreenError
from holodesk.automation.keys import parse_combination

PROMPT = "[a]pprove  [e]dit  [s]kip  [q]uit > "
PROMPT_WITH_TEXT = "[a]pprove  [e]dit  [s]kip  [q]uit  [t]ext in full > "
REPLY_PROMPT = "your reply (q alone stops) > "


def _point(text: str) -> Point:
    """ "x,y" in screen pixels, or a ValueError that says what was expected."""
    x_text, comma, y_text = text.replace(" ", "").partition(",")
    try:
        if not comma:
            raise ValueError
        return Point(int(x_text), int(y_text))
    except ValueError:
        raise ValueError(f"expected two whole numbers as x,y (for example 640,360), got {text!r}") from None


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
        if isinstance(action, TypeText):
            # The text goes on its own line, in full when short; long text as its start and end (t: all).
            where = f" at {action.at}" if action.at is not None else ""
            self._say(f"\nStep {request.step}: type{where}")
            self._say(f"  text:    {len(action.text)} characters, spaces as · : {text_summary(action.text)}")
        else:
            self._say_lines(f"\nStep {request.step}: ", action.describe())  # every line escaped
        if proposal.element:
            self._say_lines("  target:  ", proposal.element)
        if proposal.note:
            self._say_lines("  note:    ", proposal.note)
        if proposal.thought:
            self._say_lines("  thought: ", proposal.thought)
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
                try:
                    edited = self._edit(request.action, request.frame.monitors)
                except KeyboardInterrupt:
                    return ApprovalDecision.stop()
                if edited is not None:
                    return ApprovalDecision.edit(edited)
                continue
            self._say(f"  please answer a, e, s or q (got {safe_text(answer)!r})")

    def answer_question(self, request: QuestionRequest) -> str | None:
        """Show the model's question and read the reply; None (stop) on q, end of input or Ctrl+C."""
        self._say(f"\nStep {request.step}: the model asks you:")
        for line in request.question.split("\n"):
            self._say(f"  {safe_text(line)}")
        while True:
            try:
                reply = self._ask(REPLY_PROMPT, lower=False)
            except KeyboardInterrupt:
                return None
            if reply is None or reply.strip().lower() in ("q", "quit", "stop"):
                return None
            if reply.strip():
                return reply.strip()
            self._say("  the reply is empty: type an answer, or q to stop")

    def _edit(self, action: Action, monitors: tuple[Monitor, ...]) -> Action | None:
        """The edited action, or None after saying why the edit cannot be used (the caller asks again)."""
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
            target = _point(answer)
            monitor_at(target, monitors)  # a target off every screen is refused here, not at execution
        except (ActionError, OffScreenError, ValueError) as exc:
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

    def _say_lines(self, label: str, text: str) -> None:
        """`text` after `label`, its lines indented under the first, every line escaped."""
        first, *more = text.split("\n")  # only \n breaks a line: \r and the like are shown escaped
        self._say(label + safe_text(first))
        for line in more:
            self._say(" " * len(label.lstrip("\n")) + safe_text(line))

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
