"""Approval in the terminal for `holodesk run`: the action in words, its target, an annotated screenshot.

Everything that comes from the model (note, thought, the action's text) is printed through
automation.display_text: control characters escaped, never raw, and text to type in full with its
whitespace visible; long text as its length, start and end, with the full text on request (t).

Layout: the model's words come first, bounded, with runs of spaces visible, wrapped here and
indented (so none of it starts at the left edge like Holodesk's own lines); the proposal comes last,
whole (every key a typing step presses, select-all and Enter included), right above the prompt, and
is repeated there after anything else is printed. A note cannot push it off a 24-line terminal, nor
draw a fake proposal in its place.

Reads one line per decision: a(pprove), e(dit), s(kip) or q(uit); where the engine's approval rules
let "approve all" cover the step (a routine's step found exactly where recorded, typing nothing), A
approves it and every later such step. An edit asks for what the action
needs (a new target as "x,y" in screen pixels, new text and whether select-all and Enter go with it,
new keys) and is validated before it is accepted; a bad edit is explained and asked again, never
executed. When the model asks the user a question, the question is shown and one line is read as
the reply (an empty line asks again; q on its own, end of input or Ctrl+C stops the run).

A routine's step is shown the same way, with where it comes from and how its target was found
instead of the model's words. What only a routine asks is asked here too: a problem (target not
found, effect missing): r(etry), g(o on: only when the step ran), c(ontinue with the agent), q(uit);
a repair: its diff, then y/N. End of input is always the safe answer (stop, or no repair).
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from holodesk.automation.action_picture import annotate, caption_for, typing_in_words
from holodesk.automation.actions import Action, KeyCombo, Point, TypeText
from holodesk.automation.coords import Monitor, monitor_at
from holodesk.automation.display_text import bounded_prose, safe_text, text_summary, visible_text
from holodesk.automation.engine_protocols import (
    ApprovalDecision,
    ApprovalRequest,
    Decision,
    EngineEvent,
    EngineState,
    QuestionRequest,
)
from holodesk.automation.errors import ActionError, OffScreenError
from holodesk.automation.keys import parse_combination
from holodesk.automation.routines.replay import ProblemChoice, ProblemRequest, RepairRequest

PROMPT = "[a]pprove  [e]dit  [s]kip  [q]uit > "
PROMPT_WITH_TEXT = "[a]pprove  [e]dit  [s]kip  [q]uit  [t]ext in full > "
PROMPT_ALL_EXACT = "[a]pprove  [A]pprove this and every exact step  [e]dit  [s]kip  [q]uit > "
PROBLEM_PROMPT = "[r]etry  [c]ontinue with the agent  [q]uit > "
PROBLEM_PROMPT_RAN = "[r]etry the check  [g]o on  [c]ontinue with the agent  [q]uit > "
REPAIR_PROMPT = "write this repair into the routine? [y/N] > "
REPLY_PROMPT = "your reply (q alone stops) > "
# Model text is bounded so that, with the step's own lines below it, it fits a 24-line terminal.
MAX_PROSE_CHARS = 300
MAX_ELEMENT_CHARS = 160
MAX_QUESTION_CHARS = 600
MAX_PROPOSAL_LINES = 12  # a plan's goals; every other proposal is one to four lines
DEFAULT_WIDTH = 80
MIN_WIDTH = 40


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        action = request.action
        long_text = isinstance(action, TypeText) and text_summary(action.text) != visible_text(action.text)
        self._say_context(request, picture)
        self._say_proposal(request)
        prompt = PROMPT_ALL_EXACT if request.may_approve_all else PROMPT_WITH_TEXT if long_text else PROMPT
        while True:
            try:
                raw = self._ask(prompt, lower=False)
            except KeyboardInterrupt:  # Ctrl+C at the prompt means stop, not a traceback
                return ApprovalDecision.stop()
            if raw is not None and raw.strip() == "A" and request.may_approve_all:
                return ApprovalDecision(Decision.APPROVE_ALL_EXACT)
            answer = raw.strip().lower() if raw is not None else None
            if answer is None or answer in ("q", "quit", "stop"):
                return ApprovalDecision.stop()
            if answer in ("a", "approve", "y", "yes"):
                return ApprovalDecision.approve()
            if answer in ("s", "skip"):
                return ApprovalDecision.skip()
            if answer in ("t", "text") and isinstance(action, TypeText):
                count = len(action.text)
                self._say(f"  full text ({count} character{'s' if count != 1 else ''}, spaces as ·):")
                self._say_wrapped("    ", visible_text(action.text))
            elif answer in ("e", "edit"):
                try:
                    edited = self._edit(request.action, request.frame.monitors)
                except KeyboardInterrupt:
                    return ApprovalDecision.stop()
                if edited is not None:
                    return ApprovalDecision.edit(edited)
            else:
                self._say(f"  please answer a, e, s or q (got {_shorten(safe_text(answer), 40)!r})")
            self._say_proposal(request)  # the proposal stays the last thing above the prompt

    def _say_context(self, request: ApprovalRequest, picture: Path) -> None:
        """What comes with a proposal: the model's own words (bounded, indented, escaped), or where a
        routine's step comes from and how its target was found; why it is asked; the last step."""
        proposal = request.proposal
        grounding = proposal.grounding
        if grounding is not None:
            self._say(f"\nStep {request.step}: {safe_text(grounding.source)}")
            rows = [
                ("  step:    ", proposal.note, MAX_PROSE_CHARS),
                ("  target:  ", proposal.element, MAX_ELEMENT_CHARS),
                ("  found:   ", grounding.how, MAX_PROSE_CHARS),
            ]
        else:
            rows = [
                ("  target:  ", proposal.element, MAX_ELEMENT_CHARS),
                ("  note:    ", proposal.note, MAX_PROSE_CHARS),
                ("  thought: ", proposal.thought, MAX_PROSE_CHARS),
            ]
            # A model that gave no words with its step (a bare tool call) is not said to say something.
            said = any(text.strip() for _, text, _ in rows)
            self._say(f"\nStep {request.step}, the model says:" if said else f"\nStep {request.step}:")
        for label, text, limit in rows:
            if text.strip():
                self._say_wrapped(label, bounded_prose(text, limit))
        if grounding is not None and request.why_asked:
            self._say_wrapped("  asked because: ", bounded_prose(request.why_asked, MAX_PROSE_CHARS))
        if request.previous_result:
            self._say_wrapped(f"  step {request.step - 1} result: ", bounded_prose(request.previous_result, 300))
        if request.adjustment:
            self._say_wrapped("  NOTE: ", bounded_prose(request.adjustment, 300))
        self._say(f"  picture: {picture}")  # ours, not the model's: left whole, to be copied

    def _say_proposal(self, request: ApprovalRequest) -> None:
        """The step itself, whole: every key it presses, and text to type with its whitespace visible."""
        action = request.action
        self._say(f"Step {request.step} proposes:")
        if isinstance(action, TypeText):
            self._say_wrapped("  ", typing_in_words(action, focused_field=True))
            self._say_wrapped("  text:  ", f"spaces as · : {text_summary(action.text)}")
        else:
            for index, line in enumerate(action.describe().split("\n")[:MAX_PROPOSAL_LINES]):
                indent = "  " if index == 0 else "    "  # a plan's goals under its first line
                self._say(indent + _shorten(safe_text(line), self._width() - len(indent)))
        if request.loop_warning:
            self._say_wrapped("  WARNING: ", f"{safe_text(request.loop_warning)}. Approve only if you are sure.")

    def answer_question(self, request: QuestionRequest) -> str | None:
        """Show the model's question and read the reply; None (stop) on q, end of input or Ctrl+C."""
        note = request.proposal.note
        if note.strip():
            self._say(f"\nStep {request.step}, the model says:")
            self._say_wrapped("  note:    ", bounded_prose(note, MAX_PROSE_CHARS))
        self._say(f"\nStep {request.step}: the model asks you:")
        self._say_wrapped("  ", bounded_prose(request.question, MAX_QUESTION_CHARS))
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

    # -- what only a routine asks (called on the engine's proposing thread) --

    def problem(self, request: ProblemRequest) -> ProblemChoice:
        """Target not found, or effect missing: look again, go on (only when the step ran), continue with
        the agent, or quit (also at the end of input)."""
        self._say(f"\nStep {request.step.number}: {safe_text(request.problem)}")
        if request.detail:  # how each way of looking fared: under the sentence, as the tray's details
            self._say(f"  ({safe_text(request.detail)})")
        prompt = PROBLEM_PROMPT_RAN if request.effect_missing else PROBLEM_PROMPT
        while True:
            answer = self._ask(prompt)
            if answer is None or answer in ("q", "quit") or request.cancel.cancelled:
                return ProblemChoice.STOP
            if answer in ("r", "retry"):
                return ProblemChoice.RETRY
            if answer in ("c", "agent"):
                return ProblemChoice.HAND_OVER
            if answer in ("g", "go") and request.effect_missing:
                return ProblemChoice.CONTINUE
            self._say("  please answer " + ("r, g, c or q" if request.effect_missing else "r, c or q"))

    def offer_repair(self, request: RepairRequest) -> bool:
        """The repaired routine as a diff, then y/N (no repair at the end of input)."""
        self._say(f"\nStep {request.step.number} was found by {request.located.rung.value}; the repaired routine:")
        for line in request.repair.diff.splitlines():
            self._say("  " + safe_text(line))
        return self._ask(REPAIR_PROMPT) in ("y", "yes")

    def _edit(self, action: Action, monitors: tuple[Monitor, ...]) -> Action | None:
        """The edited action, or None after saying why the edit cannot be used (the caller asks again)."""
        try:
            if isinstance(action, TypeText):
                text = self._ask("  new text (empty: keep it) > ", lower=False)
                if text is None:
                    return None
                overwrite = self._yes_no("  first select all and type over the field's text?", action.overwrite)
                enter = self._yes_no("  then press Enter?", action.press_enter)
                if overwrite is None or enter is None:
                    return None
                return dataclasses.replace(action, text=text or action.text, overwrite=overwrite, press_enter=enter)
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

    def _yes_no(self, question: str, now: bool) -> bool | None:
        """y or n (empty keeps `now`); None at the end of input. Asks again until it can tell."""
        while True:
            answer = self._ask(f"{question} [{'Y/n' if now else 'y/N'}] > ")
            if answer is None:
                return None
            if answer in ("", "y", "yes", "n", "no"):
                return now if not answer else answer.startswith("y")
            self._say("  please answer y or n")

    def _ask(self, prompt: str, lower: bool = True) -> str | None:
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            return None  # end of input: the safe answer is to stop
        line = line.rstrip("\n")
        return line.strip().lower() if lower else line

    def _width(self) -> int:
        """The terminal's width (80 when the output is not a terminal)."""
        try:
            return max(MIN_WIDTH, os.get_terminal_size(self.stdout.fileno()).columns)
        except (OSError, ValueError, io.UnsupportedOperation):
            return DEFAULT_WIDTH

    def _say_wrapped(self, label: str, text: str) -> None:
        """`text` after `label`, wrapped here so that no line of it starts at the terminal's left edge.

        The terminal never wraps a line itself (each is narrower than it), so model text cannot draw
        a line that looks like one of Holodesk's own.
        """
        indent = " " * max(len(label), 4)
        width = max(self._width() - len(indent), 20)
        first = True
        for paragraph in text.split("\n"):
            for line in textwrap.wrap(paragraph, width, break_on_hyphens=False, drop_whitespace=True) or [""]:
                self._say((label if first else indent) + line)
                first = False

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
