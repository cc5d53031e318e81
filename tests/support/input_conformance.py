"""The cases every input backend must pass, with one rule: exact, or refused in words before anything is sent.

Each case starts from a text field holding `start`, performs its actions and expects the field to
hold `text` (and Enter pressed in it when `enter`). A backend may refuse a case instead: then its
`validate` raises ActionError with words for one of the actions, and the field must be unchanged
with no Enter. The X11 input performer runs them in tests/automation/test_typing_layouts.py, the Wayland
input performer in tests/automation/wayland/test_portal_backend.py, each against a Qt text field that logs
what it received. A fence (one more typed character) marks the end of a case's input: once the
field shows it, everything sent before it has been read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from holodesk.automation.actions import Action, HoldAndTap, KeyCombo, TypeText
from holodesk.automation.errors import ActionError
from holodesk.automation.input.performer import ExecutionResult

FENCE = "#"


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    start: str
    actions: tuple[Action, ...]
    text: str
    enter: bool = False


CASES = (
    Case("type", "", (TypeText("Hello, World! <a href='x'>|~`^{}</a> 100% @home"),),
         "Hello, World! <a href='x'>|~`^{}</a> 100% @home"),
    Case("type non-ASCII", "", (TypeText("Grüße — 東京 👍"),), "Grüße — 東京 👍"),
    Case("overwrite", "old text", (TypeText("new", overwrite=True),), "new"),
    Case("press_enter", "", (TypeText("sent", press_enter=True),), "sent", enter=True),
    Case("empty text with press_enter", "kept", (TypeText("", press_enter=True),), "kept", enter=True),
    Case("overwrite and press_enter", "pending", (TypeText("run", overwrite=True, press_enter=True),), "run",
         enter=True),
    Case("key combination", "abc", (KeyCombo(("ctrl", "a")), TypeText("z")), "z"),
    Case("repeat", "abcdef", (KeyCombo(("backspace",), repeat=3),), "abc"),
    Case("hold and tap", "abcdef", (HoldAndTap(("shift",), ("left", "left")), TypeText("X")), "abcdX"),
    Case("symbol keys", "", (KeyCombo(("/",)), KeyCombo(("@",)), KeyCombo(("1",))), "/@1"),
)  # fmt: skip


class Performer(Protocol):
    def validate(self, action: Action) -> None: ...

    def execute(self, action: Action) -> ExecutionResult: ...


@dataclass(frozen=True, slots=True)
class Field:
    """A backend's view of the test field: empty it and type `start`; read what it received up to the fence."""

    prepare: Callable[[str], None]
    # (the field's text once it ends with FENCE, whether Enter was pressed in it) since prepare
    read_until_fence: Callable[[], tuple[str, bool]]


def run_case(performer: Performer, field: Field, case: Case) -> str | None:
    """None when the case passed (exact, or refused in words with nothing sent); else what went wrong."""
    field.prepare(case.start)
    refusal = _refusal(performer, case.actions)
    if refusal is None:
        for action in case.actions:
            result = performer.execute(action)
            if not result.ok:
                return f"{action.describe()} failed: {result.detail}"
    performer.execute(TypeText(FENCE))
    text, enter = field.read_until_fence()
    expected = (case.start, False) if refusal is not None else (case.text, case.enter)
    if refusal == "":
        return "refused without words"
    if (text, enter) != expected:
        what = f"refused ({refusal}) but " if refusal is not None else ""
        return f"{what}the field got {text!r}, Enter {enter}; expected {expected[0]!r}, Enter {expected[1]}"
    return None


def _refusal(performer: Performer, actions: Sequence[Action]) -> str | None:
    for action in actions:
        try:
            performer.validate(action)
        except ActionError as exc:
            return str(exc)
    return None
