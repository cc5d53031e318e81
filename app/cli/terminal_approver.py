"""Approval in the terminal for `holodesk run`: the action in words, its target, an annotated screenshot.

Reads one line per decision: a(pprove), e(dit), s(kip) or q(uit). An edit asks for what the action
needs (a new target as "x,y" in screen pixels, new text, new keys) and is validated before it is
accepted; a bad edit is explained and asked again, never executed. When the model asks the user a
question, the question is shown and one line is read as the reply (an empty line asks again; q on
its own, end of input or Ctrl+C stops the run).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TextIO

from holodesk.automation.actions import Action, KeyCombo, Point, TypeText
from holodesk.automation.annotate import annotate
from holodesk.automation.coords import Monitor, monitor_at
from holodesk.automation.engine import ApprovalDecision, ApprovalRequest, QuestionRequest
from holodesk.automation.errors import ActionError, OffScreenError
from holodesk.automation.keys import parse_combination

# Model text may hold terminal escape sequences (colours, cursor moves, a fake prompt): shown escaped.
_CONTROL_CHARACTERS = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)} | {
    code: f"\\u{code:04x}" for code in (*range(0x80, 0xA0), 0x2028, 0x2029, 0x202E)
}


def printable(text: str) -> str:
    """`text` with control characters written as escapes (\\x1b, \\u202e): safe to print to a terminal."""
    return text.translate(_CONTROL_CHARACTERS)


PROMPT = "[a]pprove  [e]dit  [s]kip  [q]uit > "
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
        annotate(request.frame, request.action, f"{request.step}: {request.action.describe()}").save(picture)
        proposal = request.proposal
        self._say_lines(f"\nStep {request.step}: ", request.action.describe())
        if proposal.element:
            self._say_lines("  target:  ", proposal.element)
        if proposal.note:
            self._say_lines("  note:    ", proposal.note)
        if proposal.thought:
            self._say_lines("  thought: ", proposal.thought)
        self._say(f"  picture: {picture}")
        if request.loop_warning:
            self._say(f"  WARNING: {request.loop_warning}. Approve only if you are sure.")
        while True:
            try:
                answer = self._ask(PROMPT)
            except KeyboardInterrupt:  # Ctrl+C at the prompt means stop, not a traceback
                return ApprovalDecision.stop()
            if answer is None or answer in ("q", "quit", "stop"):
                return ApprovalDecision.stop()
            if answer in ("a", "approve", "y", "yes"):
                return ApprovalDecision.approve()
            if answer in ("s", "skip"):
                return ApprovalDecision.skip()
            if answer in ("e", "edit"):
                try:
                    edited = self._edit(request.action, request.frame.monitors)
                except KeyboardInterrupt:
                    return ApprovalDecision.stop()
                if edited is not None:
                    return ApprovalDecision.edit(edited)
                continue
            self._say(f"  please answer a, e, s or q (got '{printable(answer)}')")

    def answer_question(self, request: QuestionRequest) -> str | None:
        """Show the model's question and read the reply; None (stop) on q, end of input or Ctrl+C."""
        self._say(f"\nStep {request.step}: the model asks you:")
        for line in request.question.splitlines() or [""]:
            self._say(f"  {printable(line)}")
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
        first, *more = text.splitlines() or [""]
        self._say(label + printable(first))
        for line in more:
            self._say(" " * len(label.lstrip("\n")) + printable(line))

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()
