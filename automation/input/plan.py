"""Every action and option becomes primitive input steps here, once, for every backend.

`plan_action` is pure: what it needs to know about the desktop (which program has the focus, its
select-all and paste keys, whether the text can be typed) comes in an `InputTarget` the backend
reads. An option that cannot be honoured in the focused program is refused here, in words, before
anything is sent: overwrite selects all with ctrl+a, which in a terminal moves to the start of the
shell's line instead, so overwrite is refused in a terminal and wherever the backend cannot tell
which program has the focus. Actions that send no input (Done, AskUser) are refused; UpdatePlan
plans nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from holodesk.automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    HoldAndTap,
    KeyCombo,
    MouseButton,
    Move,
    Scroll,
    TypeText,
    UpdatePlan,
    Wait,
)
from holodesk.automation.errors import ActionError, SelectAllNotHonoured
from holodesk.automation.input.primitives import (
    ButtonClicks,
    ButtonDrag,
    KeyPresses,
    PastedText,
    Pause,
    PointerTo,
    Primitive,
    TypedText,
    WheelScroll,
)
from holodesk.automation.input.programs import is_terminal

ENTER = "enter"
SELECTS_THE_TEXT = "to select the field's text"


@dataclass(frozen=True, slots=True)
class TextRoute:
    """How an action's text reaches the program: typed by key events, or pasted (`reason` says why)."""

    typed: bool
    reason: str = ""


TYPED = TextRoute(typed=True)


@dataclass(frozen=True, slots=True)
class InputTarget:
    """What the plan needs to know about the desktop for one action; the backend reads it.

    `focused_program` is the WM_CLASS class of the window that will receive keys, or None when the
    backend cannot tell (then overwrite is refused: the program might be a terminal).
    """

    focused_program: str | None
    select_all_keys: tuple[str, ...]
    paste_keys: tuple[str, ...]
    text_route: TextRoute = TYPED
    focus_settle_s: float = 0.05


def plan_action(action: Action, target: InputTarget) -> tuple[Primitive, ...]:
    """The primitive steps that perform `action`, in order; ActionError (in words) when it cannot be honoured."""
    if isinstance(action, Done | AskUser):
        raise ActionError(f"{action.kind!r} is not executable: it ends the run or asks the user, it sends no input")
    if isinstance(action, Click):
        return (PointerTo(action.at), ButtonClicks(action.button, action.count))
    if isinstance(action, Move):
        return (PointerTo(action.to),)
    if isinstance(action, Drag):
        return (PointerTo(action.start), ButtonDrag(action.button, action.start, action.end))
    if isinstance(action, Scroll):
        at: tuple[Primitive, ...] = (PointerTo(action.at),) if action.at is not None else ()
        return (*at, WheelScroll(action.direction, action.amount))
    if isinstance(action, KeyCombo):
        return (KeyPresses(action.keys[:-1], action.keys[-1:] * action.repeat),)
    if isinstance(action, HoldAndTap):
        return (KeyPresses(action.hold, action.taps),)
    if isinstance(action, TypeText):
        return _typing(action, target)
    if isinstance(action, Wait):
        return (Pause(action.seconds),)
    if isinstance(action, UpdatePlan):
        return ()
    raise ActionError(f"Holodesk does not know how to perform {type(action).__name__}")


def _typing(action: TypeText, target: InputTarget) -> tuple[Primitive, ...]:
    """Click `at` (and let the focus settle), select all (overwrite), the text, Enter (press_enter)."""
    if action.overwrite:
        _check_overwrite(action, target.focused_program)
    steps: list[Primitive] = []
    if action.at is not None:
        steps += [PointerTo(action.at), ButtonClicks(MouseButton.LEFT, 1), Pause(target.focus_settle_s)]
    if action.overwrite:
        keys = target.select_all_keys
        steps.append(KeyPresses(keys[:-1], keys[-1:], SELECTS_THE_TEXT))
    if action.text:
        route = target.text_route
        steps.append(
            TypedText(action.text) if route.typed else PastedText(action.text, target.paste_keys, route.reason)
        )
    if action.press_enter:
        steps.append(KeyPresses((), (ENTER,)))
    return tuple(steps)


def _check_overwrite(action: TypeText, program: str | None) -> None:
    if program is None:
        then = "press Enter as its own step" if action.press_enter else "type without overwrite"
        raise SelectAllNotHonoured(
            "overwrite is refused here: Holodesk cannot see which program has the keyboard focus on this desktop "
            "(Wayland does not say), and in a terminal select-all (ctrl+a) moves to the start of the shell's line "
            f"instead, so the text would not replace it{', and Enter would run it' if action.press_enter else ''}; "
            f"select the text with a key combination first (ctrl+a in a text field), then {then}",
            words="Holodesk cannot see which program has the keyboard focus on this desktop, and in a terminal"
            " select-all (ctrl+a) would move to the start of the line instead",
        )
    if is_terminal(program):
        raise SelectAllNotHonoured(
            f"overwrite cannot be honoured in a terminal ({program}): select-all there is ctrl+a, "
            "which moves to the start of the shell's line and would run what is already on it; "
            "clear the line with a key combination (ctrl+e, then ctrl+u) and type without overwrite",
            words=f"the keyboard focus is in a terminal ({program}), where select-all (ctrl+a) moves to the start of"
            " the line instead of selecting it",
        )
