"""Action types validate themselves on construction and round-trip through their dict form."""

from __future__ import annotations

import math

import pytest

from holodesk.automation.actions import (
    ACTION_TYPES,
    AskUser,
    Click,
    Done,
    Drag,
    GoalStatus,
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
    action_from_dict,
)
from holodesk.automation.errors import ActionError

VALID_ACTIONS = [
    Click(Point(10, 20)),
    Click(Point(-1920, 5), MouseButton.RIGHT, 1),
    Click(Point(0, 0), "middle", 3),
    Move(Point(7, 8)),
    Drag(Point(1, 2), Point(300, 400)),
    Scroll(ScrollDirection.DOWN, 5, Point(50, 60)),
    Scroll("left"),
    TypeText("Grüße — 東京"),
    TypeText("hello", Point(3, 4)),
    KeyCombo(("Control", "Shift", "T")),
    KeyCombo(("enter",)),
    Wait(2),
    Done("42 unread"),
    Done(),
    AskUser("Which account?"),
    TypeText("new name", Point(3, 4), press_enter=True, overwrite=True),
    KeyCombo(("ctrl", "z"), repeat=3),
    HoldAndTap(("shift",), ("end", "left")),
    UpdatePlan((PlanGoal("Open the inbox", GoalStatus.DONE), PlanGoal("Archive the newsletters", "running"))),
]


@pytest.mark.parametrize("action", VALID_ACTIONS, ids=lambda a: a.describe())
def test_dict_round_trip_gives_an_equal_action(action):
    assert action_from_dict(action.to_dict()) == action


def test_every_kind_is_registered_once():
    assert set(ACTION_TYPES) == {
        *("click", "move", "drag", "scroll", "type", "key", "hold_and_tap", "wait", "done", "ask_user", "plan")
    }


def test_key_names_are_normalized_on_construction():
    assert KeyCombo(("Control", "Shift", "T")).keys == ("ctrl", "shift", "t")
    assert KeyCombo(("cmd", "Return")).keys == ("super", "enter")


def test_map_points_converts_every_point_and_keeps_the_rest():
    drag = Drag(Point(1, 2), Point(3, 4), MouseButton.RIGHT)
    doubled = drag.map_points(lambda p: Point(p.x * 2, p.y * 2))
    assert doubled == Drag(Point(2, 4), Point(6, 8), MouseButton.RIGHT)
    assert Scroll("up").map_points(lambda p: Point(0, 0)) == Scroll("up")
    assert TypeText("x", Point(1, 1)).map_points(lambda p: Point(9, 9)).at == Point(9, 9)


def test_points_lists_only_set_points():
    assert Scroll("up").points() == ()
    assert Drag(Point(1, 2), Point(3, 4)).points() == (Point(1, 2), Point(3, 4))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Point(1.5, 2), "coordinate x must be an integer"),
        (lambda: Point(1, True), "coordinate y must be an integer"),
        (lambda: Point(1, "2"), "coordinate y must be an integer"),
        (lambda: Point(10**7, 0), "out of bounds"),
        (lambda: Click((1, 2)), "click target must be a Point"),
        (lambda: Click(Point(1, 2), count=0), "click count must be 1, 2 or 3"),
        (lambda: Click(Point(1, 2), count=4), "click count must be 1, 2 or 3"),
        (lambda: Click(Point(1, 2), "back"), "unknown mouse button 'back'"),
        (lambda: Scroll("sideways"), "unknown scroll direction"),
        (lambda: Scroll("up", 0), "scroll amount must be between 1 and 100"),
        (lambda: Scroll("up", 101), "scroll amount must be between 1 and 100"),
        (lambda: Scroll("up", 2.0), "scroll amount must be an integer"),
        (lambda: TypeText(""), "text to type is empty"),
        (lambda: TypeText("   "), "text to type is empty"),
        (lambda: TypeText("a\x00b"), "NUL"),
        (lambda: TypeText("x" * 10_001), "at most 10000"),
        (lambda: TypeText(5), "must be a string"),
        (lambda: KeyCombo(("ctrl", "hyper")), "unknown key name 'hyper'"),
        (lambda: KeyCombo(()), "1 to 5 keys"),
        (lambda: KeyCombo("ctrl+c"), "sequence of key names"),
        (lambda: KeyCombo(("ctrl", "control", "c")), "repeats a key"),
        (lambda: KeyCombo(("ctrl", "shift")), "only modifiers"),
        (lambda: Wait(0), "between 0 and 60"),
        (lambda: Wait(61), "between 0 and 60"),
        (lambda: Wait(math.nan), "finite number"),
        (lambda: Wait(math.inf), "finite number"),
        (lambda: AskUser(""), "question is empty"),
        (lambda: TypeText("x", press_enter=1), "press_enter must be true or false"),
        (lambda: TypeText("x", overwrite="yes"), "overwrite must be true or false"),
        (lambda: KeyCombo(("tab",), repeat=21), "repeats 1 to 20 times"),
        (lambda: KeyCombo(("tab",), repeat=0), "repeats 1 to 20 times"),
        (lambda: HoldAndTap(("shift",), ()), "1 to 5 keys"),
        (lambda: HoldAndTap(("a", "b", "c", "d"), ("x",)), "1 to 3 keys"),
        (lambda: HoldAndTap(("shift", "shift"), ("x",)), "repeat a key"),
        (lambda: HoldAndTap(("shift",), ("Shift",)), "both held and tapped"),
        (lambda: HoldAndTap("shift", ("x",)), "sequence of key names"),
        (lambda: UpdatePlan(()), "1 to 20 goals"),
        (lambda: UpdatePlan(("open it",)), "must be PlanGoal"),
        (lambda: PlanGoal("", "todo"), "title is empty"),
        (lambda: PlanGoal("x", "maybe"), "unknown goal status 'maybe'"),
    ],
)
def test_invalid_actions_fail_with_a_specific_error(make, message):
    with pytest.raises(ActionError, match=message.replace("(", r"\(").replace("|", r"\|")):
        make()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "teleport", "to": [1, 2]}, "unknown action kind 'teleport'"),
        ({"to": [1, 2]}, "unknown action kind None"),
        ({"kind": "click", "at": [1, 2], "force": 3}, "unexpected fields for click: force"),
        ({"kind": "click", "at": [1, 2, 3]}, r"click.at must be \[x, y\]"),
        ({"kind": "click"}, "malformed click action"),
        ({"kind": "click", "at": [1.5, 2]}, "must be an integer"),
        ("click", "must be an object"),
        ({"kind": "plan", "goals": [{"title": "x", "status": "todo", "due": 1}]}, "plan goal must be"),
        ({"kind": "plan", "goals": ["x"]}, "plan goal must be"),
        ({"kind": "hold_and_tap", "hold": "shift", "taps": ["x"]}, "sequence of key names"),
    ],
)
def test_action_from_dict_rejects_malformed_records(data, message):
    with pytest.raises(ActionError, match=message):
        action_from_dict(data)


def test_descriptions_say_what_will_happen():
    assert Click(Point(1, 2), count=2).describe() == "double-click at (1, 2)"
    assert Click(Point(1, 2), "right").describe() == "right click at (1, 2)"
    assert Scroll("down", 1).describe() == "scroll down 1 notch"
    assert KeyCombo(("ctrl", "c")).describe() == "press ctrl+c"
    assert TypeText("a" * 100).describe().endswith("...'")
