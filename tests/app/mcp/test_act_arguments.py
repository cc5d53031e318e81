"""The `act` tool's arguments: what they become, and the words for each kind of wrong input."""

from __future__ import annotations

import pytest

from holodesk.app.mcp.act_arguments import BadToolInput, ScreenSize, read_act
from holodesk.automation.actions import Click, Drag, KeyCombo, Point, Scroll, TypeText, Wait

SCREEN = ScreenSize(1280, 800)


def test_each_kind_becomes_its_action_in_screenshot_pixels():
    assert read_act({"action": "click", "x": 10, "y": 20}, SCREEN).action == Click(Point(10, 20))
    assert read_act({"action": "double_click", "x": 10, "y": 20}, SCREEN).action == Click(Point(10, 20), count=2)
    assert (
        read_act({"action": "click", "x": 1, "y": 2, "button": "right"}, SCREEN)
        .action.describe()
        .startswith("right click")
    )
    typed = read_act({"action": "type", "text": "hi", "press_enter": True}, SCREEN).action
    assert typed == TypeText("hi", None, press_enter=True)
    assert read_act({"action": "key", "keys": "ctrl+shift+t"}, SCREEN).action == KeyCombo(("ctrl", "shift", "t"))
    assert read_act({"action": "scroll", "direction": "down", "amount": 5}, SCREEN).action == Scroll("down", 5)
    drag = read_act({"action": "drag", "x": 1, "y": 2, "to_x": 30, "to_y": 40}, SCREEN).action
    assert drag == Drag(Point(1, 2), Point(30, 40))
    assert read_act({"action": "wait", "seconds": 2}, SCREEN).action == Wait(2.0)


def test_normalized_coordinates_are_fractions_of_the_screenshot():
    action = read_act({"action": "click", "x": 500, "y": 1000, "coordinates": "normalized"}, SCREEN).action
    assert action == Click(Point(640, 799))


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"action": "tap"}, "action must be one of click, double_click, type, key, scroll, drag, wait, got 'tap'"),
        ({"action": "click", "x": 5}, "y must be a whole number, got None"),
        ({"action": "click"}, "x and y are needed for this action"),
        ({"action": "click", "x": "5", "y": 5}, "x must be a whole number, got '5'"),
        ({"action": "click", "x": 1280, "y": 5}, "x=1280, y=5 is off the screen: the screenshot is 1280x800 pixels"),
        ({"action": "click", "x": -1, "y": 5}, "x=-1, y=5 is off the screen"),
        (
            {"action": "click", "x": 1001, "y": 5, "coordinates": "normalized"},
            "normalized coordinates run 0-1000",
        ),
        ({"action": "key", "keys": "ctrl+banana"}, "unknown key name 'banana'"),
        ({"action": "type", "text": "x" * 10_001}, "text to type is 10001 characters long (at most 10000)"),
        ({"action": "type"}, "text is needed for this action"),
        ({"action": "click", "x": 1, "y": 1, "colour": "red"}, "act does not take colour"),
        ({"action": "scroll", "direction": "sideways"}, "direction must be one of up, down, left, right"),
        ({"action": "wait", "seconds": 600}, "wait must be between 0 and 60 seconds"),
        ({"action": "type", "text": "a", "press_enter": "yes"}, "press_enter must be true or false"),
    ],
)
def test_bad_input_is_refused_in_words(arguments, words):
    with pytest.raises(BadToolInput) as refused:
        read_act(arguments, SCREEN)
    assert words in str(refused.value)
