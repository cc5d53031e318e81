"""Runs actions on an input backend: validates the whole plan first, then performs it step by step.

`validate` checks every point against the monitors (and, where the backend's fail-safe needs it,
refuses corner pixels), plans the action (automation.input.plan: options that cannot be honoured are
refused there) and has the backend check every primitive; nothing is sent until all of it passed.
`execute` validates again, then performs the steps inside the backend's `acting` block, checking the
CancelToken between steps; pauses (a Wait, the focus settling after a click) are the performer's own
and stoppable. The result says what was sent, in the backend's words; a refusal of the desktop
part-way is ok=False with its reason. Keys the program could not be shown to have read (the
backend's Unconfirmed) make the result say the text was sent, never typed, and why (`unconfirmed`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from holodesk.automation.actions import Action, HoldAndTap, KeyCombo, TypeText, UpdatePlan
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import monitor_at
from holodesk.automation.errors import ActionError, DesktopRefused
from holodesk.automation.input.backend import InputBackend, Unconfirmed
from holodesk.automation.input.corners import is_corner
from holodesk.automation.input.injected import InjectedInput
from holodesk.automation.input.plan import plan_action
from holodesk.automation.input.primitives import KeyPresses, PastedText, Pause, Primitive, TypedText


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """What happened to one action. `ok` is False when the desktop refused it part-way. `unconfirmed`:
    why what the program received could not be confirmed, in words ("" when it could)."""

    action: Action
    ok: bool
    detail: str
    duration_s: float
    unconfirmed: str = ""


class InputPerformer:
    """Performs screen-space actions on `backend`, one at a time (the engine's ActionPerformer)."""

    def __init__(self, backend: InputBackend) -> None:
        self.backend = backend
        self._busy = threading.Lock()

    @property
    def injected(self) -> InjectedInput:
        return self.backend.injected

    def close(self) -> None:
        """Give back what the backend set up on the desktop; call when the run or the app ends."""
        self.backend.close()

    def validate(self, action: Action) -> None:
        """Raise ActionError, OffScreenError or ClipboardError if the action cannot be performed as asked."""
        self._plan(action)

    def _plan(self, action: Action) -> tuple[Primitive, ...]:
        points = action.points()
        if points:
            monitors = self.backend.monitors()
            for point in points:
                monitor = monitor_at(point, monitors)
                if self.backend.capabilities.refuses_corners and is_corner(point, monitor):
                    raise ActionError(
                        f"screen point {point} is a corner of {monitor}: pyautogui's fail-safe would stop the run there"
                    )
        steps = plan_action(action, self.backend.input_target(action))
        for step in steps:
            if not isinstance(step, Pause):
                self.backend.check(step)
        return steps

    def execute(self, action: Action, cancel: CancelToken | None = None) -> ExecutionResult:
        """Validate, then perform the action.

        ActionError / OffScreenError / ClipboardError: nothing was sent. ExecutionError: no input can
        be sent at all (no display, no portal session). Cancelled: `cancel` fired; what was held has
        been released. A valid action the desktop refused part-way returns ok=False with the reason.
        """
        started = time.monotonic()
        cancel = cancel if cancel is not None else CancelToken()
        with self._busy:
            steps = self._plan(action)
            cancel.raise_if_cancelled()
            if isinstance(action, UpdatePlan):  # a plan changes nothing on screen
                return ExecutionResult(action, True, action.listing(), time.monotonic() - started)
            notes: list[tuple[Primitive, str | Unconfirmed]] = []
            try:
                pauses = [step for step in steps if isinstance(step, Pause)]
                if len(pauses) == len(steps):  # a Wait sends nothing: no device is opened for it
                    for pause in pauses:
                        self._pause(pause, cancel)
                else:
                    with self.backend.acting(action, steps):
                        for step in steps:
                            cancel.raise_if_cancelled()
                            if isinstance(step, Pause):
                                self._pause(step, cancel)
                            else:
                                notes.append((step, self.backend.perform(step, cancel)))
            except DesktopRefused as exc:
                return ExecutionResult(action, False, f"{action.describe()} failed: {exc}", time.monotonic() - started)
            whys = [note.why for _, note in notes if isinstance(note, Unconfirmed)]
            return ExecutionResult(
                action, True, _words(action, notes), time.monotonic() - started, unconfirmed="; ".join(whys)
            )

    @staticmethod
    def _pause(step: Pause, cancel: CancelToken) -> None:
        if cancel.sleep(step.seconds):
            cancel.raise_if_cancelled()


def _words(action: Action, notes: list[tuple[Primitive, str | Unconfirmed]]) -> str:
    """The step's result: the action, and what each step sent in the backend's words."""
    described = action.describe()
    unconfirmed = any(isinstance(note, Unconfirmed) for _, note in notes)
    if isinstance(action, TypeText) and (action.overwrite or action.press_enter or unconfirmed):
        parts = [
            _step_words(step, note) for step, note in notes if isinstance(step, KeyPresses | TypedText | PastedText)
        ]
        if unconfirmed:  # never "type ...": what arrived is not known
            return "; ".join(parts)
        return f"{described}: {'; '.join(parts)}" if parts else described
    said = [_note(note) for step, note in notes if note and isinstance(action, TypeText | KeyCombo | HoldAndTap)]
    if unconfirmed:
        return f"{described}: sent, {'; '.join(said)}"
    return f"{described} ({'; '.join(said)})" if said else described


def _note(note: str | Unconfirmed) -> str:
    """The backend's words for a step; for unconfirmed keys, that they could not be confirmed and why."""
    if not isinstance(note, Unconfirmed):
        return note
    extra = f"; {note.note}" if note.note else ""
    return f"but whether the program read them as sent could not be confirmed: {note.why}{extra}"


def _step_words(step: Primitive, note: str | Unconfirmed) -> str:
    """One part of a typing step's result, in the past tense; the backend's note (a paste, a refocus) after it."""
    if isinstance(step, KeyPresses):
        purpose = f" {step.purpose}" if step.purpose else ""
        said = f"{'sent' if isinstance(note, Unconfirmed) else 'pressed'} {'+'.join(step.keys)}{purpose}"
    elif isinstance(step, TypedText | PastedText):
        shown = step.text if len(step.text) <= 60 else step.text[:57] + "..."
        verb = "sent the keys of" if isinstance(note, Unconfirmed) else "typed"
        said = f"{verb} {shown!r}" if shown else ""
    else:
        return _note(note)
    words = _note(note)
    if isinstance(note, Unconfirmed):
        return f"{said}, {words}" if said else words
    return f"{said} ({words})" if words and said else words or said
