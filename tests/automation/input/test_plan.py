"""The one translation from action to primitive input steps: every kind and option, and each refusal."""

from __future__ import annotations

import pytest

from holodesk.automation.actions import (
    AskUser,
    Click,
    Done,
    Drag,
    HoldAndTap,
    KeyCombo,
    MouseButton,
    Move,
    PlanGoal,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    UpdatePlan,
    Wait,
)
from holodesk.automation.errors import ActionError
from holodesk.automation.input.plan import InputTarget, TextRoute, plan_action
from holodesk.automation.input.primitives import (
    ButtonClicks,
    ButtonDrag,
    KeyPresses,
    PastedText,
    Pause,
    PointerTo,
    TypedText,
    WheelScroll,
)
from holodesk.automation.input.programs import paste_keys

FIELD = InputTarget("Gedit", ("ctrl", "a"), ("ctrl", "v"), focus_settle_s=0.05)
AT = Point(40, 30)


@pytest.mark.parametrize(
    ("action", "steps"),
    [
        (Click(AT), (PointerTo(AT), ButtonClicks(MouseButton.LEFT, 1))),
        (Click(AT, count=2), (PointerTo(AT), ButtonClicks(MouseButton.LEFT, 2))),
        (Click(AT, count=3), (PointerTo(AT), ButtonClicks(MouseButton.LEFT, 3))),
        (Click(AT, button="right"), (PointerTo(AT), ButtonClicks(MouseButton.RIGHT, 1))),
        (Move(AT), (PointerTo(AT),)),
        (Drag(AT, Point(90, 80)), (PointerTo(AT), ButtonDrag(MouseButton.LEFT, AT, Point(90, 80)))),
        (Scroll("down", 4, at=AT), (PointerTo(AT), WheelScroll(ScrollDirection.DOWN, 4))),
        (Scroll("left", 1), (WheelScroll(ScrollDirection.LEFT, 1),)),
        (KeyCombo(("ctrl", "shift", "t")), (KeyPresses(("ctrl", "shift"), ("t",)),)),
        (KeyCombo(("backspace",), repeat=3), (KeyPresses((), ("backspace",) * 3),)),
        (HoldAndTap(("shift",), ("left", "left")), (KeyPresses(("shift",), ("left", "left")),)),
        (Wait(1.5), (Pause(1.5),)),
        (UpdatePlan((PlanGoal("open the inbox"),)), ()),
    ],
    ids=lambda value: value.describe() if hasattr(value, "describe") else "",
)
def test_each_action_kind_becomes_its_primitive_steps(action, steps) -> None:
    assert plan_action(action, FIELD) == steps


def test_typing_clicks_its_point_selects_all_types_and_presses_enter_in_that_order() -> None:
    steps = plan_action(TypeText("new", at=AT, overwrite=True, press_enter=True), FIELD)
    assert steps == (
        PointerTo(AT),
        ButtonClicks(MouseButton.LEFT, 1),
        Pause(0.05),
        KeyPresses(("ctrl",), ("a",), "to select the field's text"),
        TypedText("new"),
        KeyPresses((), ("enter",)),
    )


def test_an_empty_text_with_press_enter_presses_only_enter() -> None:
    assert plan_action(TypeText("", press_enter=True), FIELD) == (KeyPresses((), ("enter",)),)


def test_select_all_is_the_platforms_key() -> None:
    mac = InputTarget("TextEdit", ("super", "a"), ("super", "v"))
    assert plan_action(TypeText("x", overwrite=True), mac)[0] == KeyPresses(
        ("super",), ("a",), "to select the field's text"
    )


def test_text_the_layout_cannot_type_is_pasted_with_the_programs_key_and_the_reason() -> None:
    target = InputTarget("xterm", ("ctrl", "a"), paste_keys("linux", "xterm"), TextRoute(False, "no key for 'ü'"))
    assert plan_action(TypeText("grüß"), target) == (PastedText("grüß", ("shift", "insert"), "no key for 'ü'"),)


@pytest.mark.parametrize("program", ["xterm", "gnome-terminal-server", "kitty", "Xfce4-terminal"])
@pytest.mark.parametrize("enter", [False, True])
def test_overwrite_is_refused_in_a_terminal_with_or_without_enter(program: str, enter: bool) -> None:
    target = InputTarget(program, ("ctrl", "a"), ("ctrl", "shift", "v"))
    with pytest.raises(ActionError, match=f"overwrite cannot be honoured in a terminal \\({program}\\)"):
        plan_action(TypeText("ls", overwrite=True, press_enter=enter), target)
    # Without overwrite the same typing is planned.
    assert plan_action(TypeText("ls", press_enter=enter), target)


@pytest.mark.parametrize("enter", [False, True])
def test_overwrite_is_refused_where_the_focused_program_cannot_be_known(enter: bool) -> None:
    unknown = InputTarget(None, ("ctrl", "a"), ("ctrl", "v"))
    with pytest.raises(ActionError, match="cannot see which program has the keyboard focus") as refused:
        plan_action(TypeText("x", overwrite=True, press_enter=enter), unknown)
    assert ("Enter would run it" in str(refused.value)) is enter
    assert plan_action(TypeText("x", press_enter=enter), unknown)  # typing and Enter alone are fine


@pytest.mark.parametrize("action", [Done("finished"), AskUser("which file?")])
def test_answers_are_not_input(action) -> None:
    with pytest.raises(ActionError, match="is not executable"):
        plan_action(action, FIELD)
