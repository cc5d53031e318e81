"""The holotron profile: every accepted answer shape, hostile answers, requests, images, prompts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

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
    PlanGoal,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    UpdatePlan,
    Wait,
)
from holodesk.automation.coords import FrameMapping, NormalizedSpace, Rect
from holodesk.automation.errors import OffScreenError
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import ParseError
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ImageBudget, PreparedImage
from holodesk.inference.profiles.holotron import (
    HOLOTRON_TOOLS,
    IMAGE_PLACEHOLDER,
    NAVIGATION_TOKENS,
    NAVIGATION_TOKENS_THINKING,
    HolotronProfile,
    localization_schema,
    navigation_schema,
    step_json,
)
from holodesk.inference.profiles.prompting import PromptError, default_prompts_dir


@pytest.fixture(scope="module")
def profile() -> HolotronProfile:
    return HolotronProfile()


def frame(width: int, height: int, left: int = 0, top: int = 0) -> ScreenFrame:
    return ScreenFrame(
        pixels=np.zeros((height, width, 4), np.uint8),
        region=Rect(left, top, width, height),
        monitor=None,
        monitors=(),
        captured_at=0.0,
    )


def step(action: dict[str, object] | str, note: str = "", thought: str = "") -> str:
    return json.dumps({"note": note, "thought": thought, "action": action})


# -- valid navigation answers ----------------------------------------------------------------------

P = Point

VALID: list[tuple[str, str, Action]] = [
    # desktop tool calls as the step's action object
    ("click", step({"name": "click_desktop", "x": 500, "y": 300}), Click(P(500, 300))),
    ("click corners", step({"name": "click_desktop", "x": 0, "y": 1000}), Click(P(0, 1000))),
    (
        "right click",
        step({"name": "click_desktop", "x": 1, "y": 2, "button": "right"}),
        Click(P(1, 2), MouseButton.RIGHT),
    ),
    ("triple click", step({"name": "click_desktop", "x": 1, "y": 2, "clicks": 3}), Click(P(1, 2), count=3)),
    ("double click", step({"name": "double_click_desktop", "x": 10, "y": 20}), Click(P(10, 20), count=2)),
    ("move", step({"name": "move_to_desktop", "x": 999, "y": 1}), Move(P(999, 1))),
    (
        "drag",
        step({"name": "drag_to_desktop", "start_x": 1, "start_y": 2, "x": 3, "y": 4}),
        Drag(P(1, 2), P(3, 4)),
    ),
    (
        "drag aliases",
        step({"name": "drag_to_desktop", "from_x": 1, "from_y": 2, "to_x": 3, "to_y": 4}),
        Drag(P(1, 2), P(3, 4)),
    ),
    # H Company's scroll_desktop scrolls 10 wheel clicks when scroll_size is left out
    ("scroll", step({"name": "scroll_desktop", "direction": "down"}), Scroll(ScrollDirection.DOWN, 10)),
    (
        "scroll at",
        step({"name": "scroll_desktop", "direction": "UP", "amount": 5, "x": 400, "y": 600}),
        Scroll(ScrollDirection.UP, 5, P(400, 600)),
    ),
    ("write", step({"name": "write_desktop", "content": "hello"}), TypeText("hello")),
    ("write text alias", step({"name": "write_desktop", "text": "héllo 東京"}), TypeText("héllo 東京")),
    ("write at", step({"name": "write_desktop", "content": "a", "x": 5, "y": 6}), TypeText("a", P(5, 6))),
    ("hotkey", step({"name": "hotkey_desktop", "keys": "ctrl+c"}), KeyCombo(("ctrl", "c"))),
    (
        "hotkey list",
        step({"name": "hotkey_desktop", "keys": ["Control", "Shift", "T"]}),
        KeyCombo(("ctrl", "shift", "t")),
    ),
    ("hotkey one key", step({"name": "hotkey_desktop", "key": "Return"}), KeyCombo(("enter",))),
    (
        "hold and tap",
        step({"name": "hold_and_tap_key_desktop", "hold_keys": "alt", "tap_key": "tab"}),
        HoldAndTap(("alt",), ("tab",)),
    ),
    (
        "hold and tap list",
        step({"name": "hold_and_tap_key_desktop", "hold_keys": ["ctrl", "shift"], "tap_key": "esc", "count": 1}),
        HoldAndTap(("ctrl", "shift"), ("esc",)),
    ),
    (
        "hold and tap twice",
        step({"name": "hold_and_tap_key_desktop", "hold_keys": "alt", "tap_key": "tab", "count": 2}),
        HoldAndTap(("alt",), ("tab", "tab")),
    ),
    (
        "plan only (older text shape)",
        step({"name": "update_plan", "plan": "1. open\n2. archive"}),
        UpdatePlan((PlanGoal("open"), PlanGoal("archive"))),
    ),
    ("wait", step({"name": "wait"}), Wait()),
    ("wait seconds", step({"name": "wait", "seconds": 2.5}), Wait(2.5)),
    ("answer", step({"name": "answer", "content": "42"}), Done("42")),
    ("answer empty", step({"name": "answer"}), Done("")),
    ("ask user", step({"name": "ask_user", "question": "Which account?"}), AskUser("Which account?")),
    # number spellings that are unambiguous integers
    ("integral floats", step({"name": "click_desktop", "x": 500.0, "y": 3e2}), Click(P(500, 300))),
    ("digit strings", step({"name": "click_desktop", "x": "500", "y": " 300 "}), Click(P(500, 300))),
    ("null optional", step({"name": "click_desktop", "x": 1, "y": 2, "button": None}), Click(P(1, 2))),
    # web (Surfer-H) vocabulary
    ("click_element", step({"name": "click_element", "element": "OK", "x": 10, "y": 20}), Click(P(10, 20))),
    (
        "write_element",
        step({"name": "write_element", "content": "cats", "element": "Search", "x": 10, "y": 20}),
        TypeText("cats", P(10, 20)),
    ),
    ("web scroll", step({"name": "scroll", "direction": "left"}), Scroll(ScrollDirection.LEFT)),
    ("go_back", step({"name": "go_back"}), KeyCombo(("alt", "left"))),
    ("refresh", step({"name": "refresh"}), KeyCombo(("f5",))),
    ("web answer", step({"name": "answer", "content": "Paris"}), Done("Paris")),
    # the action as a call-like string, or a bare name
    (
        "call string",
        step('click_element(element="OK", x=10, y=20)'),
        Click(P(10, 20)),
    ),
    ("positional call string", step("click_element('OK', 10, 20)"), Click(P(10, 20))),
    ("call string scroll word", step("scroll(down)"), Scroll(ScrollDirection.DOWN)),
    ("bare name", step("go_back"), KeyCombo(("alt", "left"))),
    ("bare name with ()", step("refresh()"), KeyCombo(("f5",))),
    ("wait(seconds)", step("wait(3)"), Wait(3.0)),
    (
        "write_element call",
        step('write_element(content="a \\"b\\"", element="Name", x=1, y=2)'),
        TypeText('a "b"', P(1, 2)),
    ),
    (
        "flat siblings",
        '{"note": "", "thought": "", "action": "click_element", "element": "OK", "x": 7, "y": 8}',
        Click(P(7, 8)),
    ),
    # tool call objects and tags
    (
        "name + arguments",
        '{"name": "click_desktop", "arguments": {"x": 1, "y": 2}}',
        Click(P(1, 2)),
    ),
    (
        "arguments as a JSON string",
        '{"name": "write_desktop", "arguments": "{\\"content\\": \\"hi\\"}"}',
        TypeText("hi"),
    ),
    (
        "openai function",
        '{"type": "function", "function": {"name": "hotkey_desktop", "arguments": "{\\"keys\\": \\"enter\\"}"}}',
        KeyCombo(("enter",)),
    ),
    (
        "tool_call tag",
        '<tool_call>\n{"name": "click_desktop", "arguments": {"x": 3, "y": 4}}\n</tool_call>',
        Click(P(3, 4)),
    ),
    (
        "tool_call tag with plan",
        '<tool_call>{"name": "update_plan", "arguments": {"plan": ["open", "save"]}}</tool_call>\n'
        '<tool_call>{"name": "double_click_desktop", "arguments": {"x": 3, "y": 4}}</tool_call>',
        Click(P(3, 4), count=2),
    ),
    (
        "action object with arguments",
        step({"name": "move_to_desktop", "arguments": {"x": 9, "y": 9}}),
        Move(P(9, 9)),
    ),
    ("action object tagged by type", step({"type": "wait", "seconds": 1}), Wait(1.0)),
    ("action object tagged by action", step({"action": "go_back"}), KeyCombo(("alt", "left"))),
    (
        "holo3 tool_call",
        '{"note": null, "thought": "t", "tool_call": {"tool_name": "click", "element": "Go", "x": 932, "y": 880}}',
        Click(P(932, 880)),
    ),
    ("holo3 write", '{"tool_call": {"tool_name": "write", "content": "abc"}}', TypeText("abc")),
    # packaging around the answer
    ("fenced", '```json\n{"action": {"name": "go_back"}}\n```', KeyCombo(("alt", "left"))),
    ("prose around", 'Here is my step:\n{"action": {"name": "go_back"}}\nDone.', KeyCombo(("alt", "left"))),
    ("key order", '{"action": {"y": 2, "x": 1, "name": "click_desktop"}, "thought": "", "note": ""}', Click(P(1, 2))),
    ("trailing comma", '{"note": "", "action": {"name": "click_desktop", "x": 1, "y": 2,},}', Click(P(1, 2))),
    (
        "think first",
        '<think>The OK button.</think>\n{"action": {"name": "click_desktop", "x": 1, "y": 2}}',
        Click(P(1, 2)),
    ),
    ("whitespace name", step({"name": " go_back "}), KeyCombo(("alt", "left"))),
]


@pytest.mark.parametrize(("text", "expected"), [(text, action) for _, text, action in VALID], ids=[v[0] for v in VALID])
def test_valid_navigation_answers(profile: HolotronProfile, text: str, expected: Action) -> None:
    assert profile.parse_navigation(text).action == expected


def test_note_and_thought_are_kept(profile: HolotronProfile) -> None:
    parsed = profile.parse_navigation(step({"name": "go_back"}, note=" total 12 ", thought="Back to the list."))
    assert (parsed.note, parsed.thought) == ("total 12", "Back to the list.")


def test_reasoning_becomes_the_thought_only_when_there_is_none(profile: HolotronProfile) -> None:
    bare = profile.parse_navigation('<think>I need the menu.</think>{"action": {"name": "go_back"}}')
    assert bare.thought == "I need the menu."
    both = profile.parse_navigation("<think>long reasoning</think>" + step({"name": "go_back"}, thought="short"))
    assert both.thought == "short"


def test_update_plan_goes_into_the_note(profile: HolotronProfile) -> None:
    text = (
        '{"note": "seen 3 mails"}\n'
        '<tool_call>{"name": "update_plan", "arguments": {"plan": "1. open\\n2. archive"}}</tool_call>'
        '<tool_call>{"name": "wait", "arguments": {}}</tool_call>'
    )
    parsed = profile.parse_navigation(text)
    assert parsed.action == Wait()
    assert parsed.note == "seen 3 mails\n1. open [todo]\n2. archive [todo]"


# -- hostile and malformed navigation answers -----------------------------------------------------

HOSTILE: list[tuple[str, str, str]] = [
    ("empty", "", "empty"),
    ("whitespace", "   \n ", "empty"),
    ("prose only", "I would click the OK button.", "no JSON"),
    ("reasoning only", "<think>hmm</think>", "only reasoning"),
    ("unclosed reasoning", '<think>{"action": {"name": "go_back"}}', "inside <think>"),
    ("no action", '{"note": "n", "thought": "t"}', "no action"),
    ("empty object", "{}", "no action"),
    ("unknown action", step({"name": "format_disk"}), "unknown action"),
    ("unknown call string", step("rm_rf(path='/')"), "unknown action"),
    ("missing x", step({"name": "click_desktop", "y": 2}), "needs 'x'"),
    ("missing y", step({"name": "click_element", "x": 2}), "needs 'y'"),
    ("null x", step({"name": "click_desktop", "x": None, "y": 2}), "needs 'x'"),
    ("x above 1000", step({"name": "click_desktop", "x": 1001, "y": 2}), "outside [0, 1000]"),
    ("negative y", step({"name": "click_desktop", "x": 1, "y": -1}), "outside [0, 1000]"),
    ("huge", step({"name": "click_desktop", "x": 10**8, "y": 2}), "outside"),
    ("huge literal", '{"action": {"name": "click_desktop", "x": 1e308, "y": 2}}', "outside"),
    ("overflow literal", '{"action": {"name": "click_desktop", "x": 1e999, "y": 2}}', "out of range"),
    ("too many digits", '{"action": {"name": "click_desktop", "x": 99999999999999999999, "y": 2}}', "too large"),
    ("NaN", '{"action": {"name": "click_desktop", "x": NaN, "y": 2}}', "NaN"),
    ("Infinity", '{"action": {"name": "click_desktop", "x": Infinity, "y": 2}}', "Infinity"),
    ("fraction", step({"name": "click_desktop", "x": 0.45, "y": 0.3}), "whole number"),
    ("half", step({"name": "click_desktop", "x": 12.5, "y": 3}), "whole number"),
    ("boolean", step({"name": "click_desktop", "x": True, "y": 3}), "must be a number"),
    ("text number", step({"name": "click_desktop", "x": "12px", "y": 3}), "must be a number"),
    ("list coordinate", step({"name": "click_desktop", "x": [1], "y": 3}), "must be a number"),
    ("x without y", step({"name": "write_desktop", "content": "a", "x": 1}), "without y"),
    ("write_element without point", step({"name": "write_element", "content": "a"}), "needs x and y"),
    ("empty text", step({"name": "write_desktop", "content": "  "}), "empty"),
    ("text not a string", step({"name": "write_desktop", "content": 5}), "must be text"),
    ("NUL in text", step({"name": "write_desktop", "content": "a\u0000b"}), "NUL"),
    ("unknown key", step({"name": "hotkey_desktop", "keys": "ctrl+banana"}), "unknown key"),
    ("modifiers only", step({"name": "hotkey_desktop", "keys": "ctrl+shift"}), "only modifiers"),
    ("bad direction", step({"name": "scroll_desktop", "direction": "sideways"}), "scroll direction"),
    ("scroll amount 0", step({"name": "scroll_desktop", "direction": "up", "amount": 0}), "outside [1, 100]"),
    ("scroll amount huge", step({"name": "scroll_desktop", "direction": "up", "amount": 10**6}), "outside [1, 100]"),
    ("wait too long", step({"name": "wait", "seconds": 3600}), "wait must be"),
    ("wait negative", step({"name": "wait", "seconds": -1}), "wait must be"),
    ("bad button", step({"name": "click_desktop", "x": 1, "y": 2, "button": "fourth"}), "mouse button"),
    ("clicks 4", step({"name": "click_desktop", "x": 1, "y": 2, "clicks": 4}), "outside [1, 3]"),
    ("unknown argument", step({"name": "click_desktop", "x": 1, "y": 2, "then": "enter"}), "no argument 'then'"),
    ("argument twice", step({"name": "write_desktop", "content": "a", "text": "b"}), "twice"),
    ("too many positionals", step("go_back(1)"), "at most 0"),
    ("goto", step({"name": "goto", "url": "https://example.com"}), "not supported"),
    ("restart", step({"name": "restart"}), "not supported"),
    ("key_down", step({"name": "key_down_desktop", "key": "shift"}), "not supported"),
    ("key_up", step({"name": "key_up_desktop", "key": "shift"}), "not supported"),
    ("plan without goals", step({"name": "update_plan"}), 'needs "goals"'),
    (
        "hold and tap twice, two keys",
        step({"name": "hold_and_tap_key_desktop", "hold_keys": "alt", "tap_key": ["tab", "a"], "count": 2}),
        "repeats one tap key",
    ),
    # two actions where one is expected
    (
        "second object after",
        step({"name": "go_back"}) + '\n{"action": {"name": "click_desktop", "x": 1, "y": 2}}',
        "2 JSON objects",
    ),
    ("second object before", '{"action": "refresh"} then ' + step({"name": "go_back"}), "2 JSON objects"),
    (
        "broken object before a valid one",
        '{"action": {"name": "click_desktop", "x": 1 "y": 2}}\n' + step({"name": "go_back"}),
        "is not valid JSON, next to a complete one",
    ),
    (
        "a full step then a cut-off one",
        step({"name": "go_back"}) + '\n{"action": {"name": "write_desktop", "content": "rm -rf ',
        "is cut off (it never closes), next to a complete one",
    ),
    (
        "call smuggled after",
        step({"name": "go_back"}) + '\nclick_element(element="Delete", x=1, y=2)',
        "calls click_element",
    ),
    ("call smuggled before", 'answer(content="x")\n' + step({"name": "go_back"}), "calls answer"),
    ("list of actions", '{"action": [{"name": "go_back"}, {"name": "refresh"}]}', "list of 2"),
    ("list of one", '{"action": [{"name": "go_back"}]}', "list of 1"),
    ("action and tool_call", '{"action": {"name": "go_back"}, "tool_call": {"tool_name": "refresh"}}', "both"),
    ("duplicate action key", '{"action": {"name": "go_back"}, "action": {"name": "refresh"}}', "repeats the key"),
    (
        "two tool_calls",
        '<tool_call>{"name": "go_back"}</tool_call><tool_call>{"name": "refresh"}</tool_call>',
        "2 actions",
    ),
    (
        "tool_call plus step action",
        step({"name": "refresh"}) + '<tool_call>{"name": "go_back"}</tool_call>',
        "another action",
    ),
    ("tool_call with two objects", '<tool_call>{"name": "go_back"}{"name": "refresh"}</tool_call>', "2 JSON objects"),
    ("unclosed tool_call", '<tool_call>{"name": "go_back"}', "unmatched"),
    ("stray closing tool_call", '{"action": {"name": "go_back"}}</tool_call>', "unmatched"),
    ("call smuggled beside tool_call", '<tool_call>{"name": "go_back"}</tool_call> refresh()', "calls refresh"),
    ("sibling beside action object", '{"action": {"name": "go_back"}, "x": 5}', "unexpected fields"),
    ("sibling beside call string", '{"action": "go_back()", "x": 5}', "unexpected fields"),
    ("named twice", step({"name": "go_back", "tool_name": "refresh"}), "named twice"),
    ("flat and nested args", step({"name": "click_desktop", "arguments": {"x": 1, "y": 2}, "x": 3}), "mixes"),
    ("two argument holders", step({"name": "go_back", "args": {}, "arguments": {}}), "arguments twice"),
    ("arguments not an object", step({"name": "go_back", "arguments": [1, 2]}), "must be an object"),
    ("arguments string with two objects", step({"name": "go_back", "arguments": '{"a": 1}{"b": 2}'}), "exactly one"),
    ("name not text", step({"name": 42}), "must be text"),
    ("name is a call", '{"name": "click_desktop(x=1, y=2)"}', "not a call"),
    ("action is a number", '{"action": 42}', "must be an action"),
    ("note not text", '{"note": 5, "action": {"name": "go_back"}}', '"note" must be text'),
    ("call string with a second call", step("go_back(); refresh()"), "cannot read"),
    ("nested call argument", step("answer(content=open('/etc/passwd').read())"), "plain value"),
]


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_navigation_answers_are_parse_errors(profile: HolotronProfile, text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        profile.parse_navigation(text)
    assert caught.value.raw_text == text
    assert str(caught.value).startswith("holotron: ")


@pytest.mark.parametrize(
    "text",
    [
        "}{" * 500,
        '{"action": ' * 200,
        "<tool_call>" * 50,
        '{"action": "' + "(" * 400 + '"}',
        '{"action": {"name": "write_desktop", "content": "' + "x" * 20_000 + '"}}',
        "\x00\x01\x02{",
        '{"action": {"name": "click_desktop", "x": {"$gt": 1}, "y": 2}}',
    ],
)
def test_garbage_only_ever_raises_parse_error(profile: HolotronProfile, text: str) -> None:
    with pytest.raises(ParseError):
        profile.parse_navigation(text)


# -- localization ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"x": 512, "y": 300}', P(512, 300)),
        ('```json\n{"y": 0, "x": 1000}\n```', P(1000, 0)),
        ('The button is here: {"x": "12", "y": 34.0}.', P(12, 34)),
        ('<think>top right</think>{"x": 900, "y": 40}', P(900, 40)),
        ('{"x": 5, "y": 6, "element": "Save button"}', P(5, 6)),
    ],
)
def test_valid_localization_answers(profile: HolotronProfile, text: str, expected: Point) -> None:
    assert profile.parse_localization(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("top left corner", "no JSON"),
        ('{"x": 5}', "no y"),
        ('{"x": 5, "y": null}', "no y"),
        ('{"x": 1001, "y": 5}', "outside"),
        ('{"x": -1, "y": 5}', "outside"),
        ('{"x": 0.5, "y": 0.5}', "whole number"),
        ('{"x": NaN, "y": 5}', "NaN"),
        ('{"x": 1, "y": 2} {"x": 3, "y": 4}', "2 JSON objects"),
        ('{"x": 1, "y": 2, "action": "click"}', "unexpected fields"),
        ('{"x": 1, "y": 2, "element": 5}', "must be text"),
        ('{"point": [1, 2]}', "unexpected fields"),
    ],
)
def test_hostile_localization_answers(profile: HolotronProfile, text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        profile.parse_localization(text)
    assert caught.value.raw_text == text


# -- images ----------------------------------------------------------------------------------------


def test_prepare_image_keeps_full_size_by_default(profile: HolotronProfile) -> None:
    prepared = profile.prepare_image(frame(1920, 1080, left=-1920, top=0))
    assert prepared.image.size == (1920, 1080)
    assert prepared.image.mode == "RGB"
    assert prepared.mapping == FrameMapping(Rect(-1920, 0, 1920, 1080), 1920, 1080)


@pytest.mark.parametrize(
    ("size", "cap", "expected"),
    [((3840, 2160), 1920, (1920, 1080)), ((1080, 1920), 1000, (562, 1000)), ((800, 600), 1920, (800, 600))],
)
def test_prepare_image_caps_the_long_side(size: tuple[int, int], cap: int, expected: tuple[int, int]) -> None:
    prepared = HolotronProfile(ImageBudget(max_long_side=cap)).prepare_image(frame(*size))
    assert prepared.image.size == expected
    assert (prepared.mapping.image_width, prepared.mapping.image_height) == expected


@pytest.mark.parametrize(
    ("model", "screen"),
    [
        # each image pixel covers 2x2 screen pixels; a point lands on the centre of its image pixel
        (P(0, 0), P(-3839, -199)),
        (P(1000, 1000), P(-1, 1959)),
        (P(500, 500), P(-1919, 881)),
        (P(250, 750), P(-2879, 1421)),
    ],
)
def test_normalized_point_maps_to_the_screen_through_a_downscaled_frame(model: Point, screen: Point) -> None:
    # A 4K monitor left of and above the primary, sent at half size.
    prepared = HolotronProfile(ImageBudget(max_long_side=1920)).prepare_image(frame(3840, 2160, -3840, -200))
    assert prepared.mapping.model_to_screen(model, NormalizedSpace()) == screen


def test_out_of_range_point_never_reaches_the_screen() -> None:
    prepared = HolotronProfile().prepare_image(frame(640, 480))
    with pytest.raises(OffScreenError):
        prepared.mapping.model_to_screen(P(1001, 5), NormalizedSpace())


# -- requests --------------------------------------------------------------------------------------


def prepared_images(count: int) -> list[PreparedImage]:
    # Distinct sizes so the test can tell which images were sent.
    return [HolotronProfile().prepare_image(frame(100 + index, 50)) for index in range(count)]


def image_placeholders(request_messages: list[dict[str, object]]) -> int:
    return sum(
        1
        for message in request_messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image"
    )


@pytest.mark.parametrize(("given", "keep", "sent"), [(1, 3, 1), (3, 3, 3), (5, 3, 3), (4, 1, 1), (4, 4, 4)])
def test_only_the_last_screenshots_are_sent(given: int, keep: int, sent: int) -> None:
    images = prepared_images(given)
    profile = HolotronProfile(ImageBudget(keep_screenshots=keep))
    # Each screenshot is an observation: the first one, then one after each earlier step.
    request = profile.navigation_request("archive mail", [PastStep(Wait())] * (given - 1), images)
    assert image_placeholders(request.messages) == len(request.images) == sent
    assert [image.size for image in request.images] == [prepared.image.size for prepared in images[-sent:]]


def texts(message: dict[str, object]) -> list[str]:
    """A message's parts, a text part as its text and an image as "image"."""
    content = message["content"]
    assert isinstance(content, list)
    return [part["text"] if part["type"] == "text" else part["type"] for part in content]


def test_navigation_request_is_the_harness_conversation(profile: HolotronProfile) -> None:
    plan = UpdatePlan((PlanGoal("Open the inbox", "done"), PlanGoal("Find the invoice", "running")))
    history = [
        PastStep(Click(P(500, 300)), note="Inbox has 3 unread", thought="Open the inbox.", element="Inbox folder"),
        PastStep(plan, thought="Plan it."),
        PastStep(
            TypeText("invoice", P(10, 20), press_enter=True), element="search field", outcome="skipped by the user"
        ),
        PastStep(KeyCombo(("ctrl", "+")), outcome="failed: the key cannot be pressed"),
    ]
    request = profile.navigation_request("Find the invoice", history, prepared_images(3))
    roles = [message["role"] for message in request.messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    system = request.messages[0]["content"]
    assert isinstance(system, str) and system.startswith("/no_think\n") and "<output_format>" in system
    assert json.dumps(navigation_schema(), ensure_ascii=False) in system
    # the task and the first observation (an old one: a placeholder)
    assert texts(request.messages[1]) == [
        '<message from="user">\nFind the invoice\n</message>\n',
        f"<observation>\n{IMAGE_PLACEHOLDER}\n</observation>",
    ]
    # each earlier step: its JSON as the assistant's turn, then the tool's output and the next observation
    assert json.loads(request.messages[2]["content"]) == {
        "note": "Inbox has 3 unread",
        "thought": "Open the inbox.",
        "tool_call": {"tool_name": "click_desktop", "element": "Inbox folder", "x": 500, "y": 300},
    }
    assert texts(request.messages[3])[0] == '<tool_output tool="click_desktop">\n\n</tool_output>\n'
    assert json.loads(request.messages[4]["content"])["tool_call"] == {
        "tool_name": "update_plan",
        "goals": [{"title": "Open the inbox", "status": "done"}, {"title": "Find the invoice", "status": "running"}],
    }
    assert texts(request.messages[5])[0] == (
        '<tool_output tool="update_plan">\n1. Open the inbox [done]\n2. Find the invoice [running]\n</tool_output>\n'
    )
    assert json.loads(request.messages[6]["content"])["tool_call"] == {
        "tool_name": "write_at_desktop",
        "content": "invoice",
        "element": "search field",
        "x": 10,
        "y": 20,
        "press_enter": True,
        "overwrite": False,
    }
    assert "skipped by the user" in texts(request.messages[7])[0]
    assert texts(request.messages[9])[0].startswith('<error tool="hotkey_desktop">\nfailed: ')
    # the last three observations carry the screenshots, oldest first; the older ones a placeholder
    observations = [part for message in request.messages[1::2][1:] for part in texts(message)[1:]]
    assert observations == [
        f"<observation>\n{IMAGE_PLACEHOLDER}\n</observation>",
        *["<observation>\n", "image", "\n</observation>"] * 3,
    ]
    assert request.response_schema == navigation_schema()
    assert request.max_new_tokens == NAVIGATION_TOKENS


def test_first_step_is_the_task_and_the_screen(profile: HolotronProfile) -> None:
    request = profile.navigation_request("t", [], prepared_images(1))
    assert [message["role"] for message in request.messages] == ["system", "user"]
    assert texts(request.messages[1]) == [
        '<message from="user">\nt\n</message>\n',
        "<observation>\n",
        "image",
        "\n</observation>",
    ]


def test_retry_request_sends_the_refused_answer_and_the_error(profile: HolotronProfile) -> None:
    request = profile.navigation_request("t", [], prepared_images(1))
    retry = profile.retry_request(request, "I would click OK", "holotron: the answer contains no JSON object")
    assert retry.messages[:-2] == request.messages and retry.images == request.images
    assert retry.messages[-2] == {"role": "assistant", "content": "I would click OK"}
    (feedback,) = texts(retry.messages[-1])
    assert feedback.startswith(
        '<error tool="tool_call">\nYour answer could not be used: holotron: the answer contains no JSON'
    )
    assert retry.response_schema == request.response_schema


def test_think_turns_reasoning_on() -> None:
    request = HolotronProfile(think=True).navigation_request("t", [], prepared_images(1))
    assert request.messages[0]["content"].startswith("/think\n")
    assert "/no_think" not in request.messages[0]["content"]
    assert request.max_new_tokens == NAVIGATION_TOKENS_THINKING


def test_requests_refuse_empty_inputs(profile: HolotronProfile) -> None:
    with pytest.raises(ValueError, match="at least the current screenshot"):
        profile.navigation_request("t", [], [])
    with pytest.raises(ValueError, match="task is empty"):
        profile.navigation_request("  ", [], prepared_images(1))
    with pytest.raises(ValueError, match="description is empty"):
        profile.localization_request(" ", prepared_images(1)[0])


def test_localization_request(profile: HolotronProfile) -> None:
    image = prepared_images(1)[0]
    request = profile.localization_request("the blue Save button", image)
    (message,) = request.messages
    assert message["content"][0] == {"type": "image"}
    assert message["content"][1]["text"].rstrip().endswith("the blue Save button")
    assert "0 to 1000" in message["content"][1]["text"]
    assert request.images == [image.image]
    assert request.response_schema == localization_schema()


# -- vocabulary, prompt and schema agree -----------------------------------------------------------


def test_prompt_documents_exactly_the_taught_tools(profile: HolotronProfile) -> None:
    system = profile.navigation_request("t", [], prepared_images(1)).messages[0]["content"]
    for tool in HOLOTRON_TOOLS.documented:
        assert f"- {tool.name}(" in system
    for tool in HOLOTRON_TOOLS.tools:
        if not tool.documented:
            assert f"{tool.name}(" not in system, tool.name


def test_schema_lists_the_taught_tools() -> None:
    schema = navigation_schema()
    assert schema["required"] == ["note", "thought", "tool_call"]
    variants = schema["properties"]["tool_call"]["anyOf"]
    names = [v["properties"]["tool_name"]["enum"] for v in variants]
    assert names == [[t.name] for t in HOLOTRON_TOOLS.documented]
    by_name = {name: variant for [name], variant in zip(names, variants, strict=True)}
    # H Company's desktop tools, with their arguments, in their order (the target's description first)
    expected = {
        "update_plan": ["goals"],
        "click_desktop": ["element", "x", "y", "button"],
        "double_click_desktop": ["element", "x", "y"],
        "move_to_desktop": ["element", "x", "y"],
        "drag_to_desktop": ["element", "x", "y"],
        "scroll_desktop": ["element", "x", "y", "direction", "scroll_size"],
        "write_desktop": ["content", "press_enter", "overwrite"],
        "write_at_desktop": ["content", "element", "x", "y", "press_enter", "overwrite"],
        "hotkey_desktop": ["keys", "repeat_count"],
        "hold_and_tap_key_desktop": ["hold_keys", "tap_keys"],
        "wait_desktop": ["seconds"],
        "answer": ["content"],
        "ask_user": ["question"],
    }
    assert {name: list(v["properties"])[1:] for name, v in by_name.items()} == expected
    assert by_name["click_desktop"]["required"] == ["tool_name", "element", "x", "y"]
    assert by_name["click_desktop"]["properties"]["x"] == {"type": "integer", "minimum": 0, "maximum": 1000}
    assert by_name["write_desktop"]["properties"]["press_enter"] == {"type": "boolean"}
    assert by_name["hotkey_desktop"]["properties"]["keys"] == {
        "type": "array",
        "items": {"type": "string", "maxLength": 24},
        "minItems": 1,
        "maxItems": 5,
    }
    assert by_name["wait_desktop"]["properties"]["seconds"] == {
        "type": "number",
        "minimum": 0.1,
        "maximum": 60,
        "multipleOf": 0.1,
    }
    goal = by_name["update_plan"]["properties"]["goals"]["items"]
    assert goal["properties"]["status"]["enum"] == ["todo", "running", "done", "failed"]


def test_prompt_examples_parse(profile: HolotronProfile) -> None:
    text = (default_prompts_dir() / "holotron_navigation.txt").read_text(encoding="utf-8")
    examples = [line for line in text.splitlines() if line.startswith('{"note": ')]
    assert len(examples) == 3
    assert [profile.parse_navigation(line).action for line in examples] == [
        Click(P(912, 884)),
        TypeText("quarterly report", press_enter=True),
        UpdatePlan(
            (
                PlanGoal("Find the mail from Anna", "running"),
                PlanGoal("Save its attachment"),
                PlanGoal("Reply to thank her"),
            )
        ),
    ]


# -- prompt files ----------------------------------------------------------------------------------


def test_missing_prompt_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match=r"holotron_navigation\.txt is missing"):
        HolotronProfile(prompts_dir=tmp_path)


def test_prompt_with_an_unknown_placeholder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "holotron_navigation.txt").write_text("Hello ${user_name}", encoding="utf-8")
    (tmp_path / "holotron_localization.txt").write_text("Find ${target}", encoding="utf-8")
    with pytest.raises(PromptError, match="user_name"):
        HolotronProfile(prompts_dir=tmp_path)


def test_custom_prompts_dir_is_used(tmp_path: Path) -> None:
    (tmp_path / "holotron_navigation.txt").write_text("Custom system prompt, costs $$5.", encoding="utf-8")
    (tmp_path / "holotron_localization.txt").write_text("Where is: ${target}", encoding="utf-8")
    profile = HolotronProfile(prompts_dir=tmp_path)
    system = profile.navigation_request("t", [], prepared_images(1)).messages[0]["content"]
    assert system.startswith("/no_think\nCustom system prompt, costs $5.\n\n<output_format>")
    request = profile.localization_request("the $HOME icon", prepared_images(1)[0])
    assert request.messages[0]["content"][1]["text"] == "Where is: the $HOME icon"


# -- H Company's desktop step: every tool and argument ---------------------------------------------


def harness(tool_call: dict[str, object], note: str | None = None, thought: str = "t") -> str:
    return json.dumps({"note": note, "thought": thought, "tool_call": tool_call})


HARNESS: list[tuple[str, dict[str, object], Action]] = [
    ("click", {"tool_name": "click_desktop", "element": "OK", "x": 500, "y": 300}, Click(P(500, 300))),
    (
        "right click",
        {"tool_name": "click_desktop", "element": "file", "x": 1, "y": 2, "button": "right"},
        Click(P(1, 2), MouseButton.RIGHT),
    ),
    (
        "double click",
        {"tool_name": "double_click_desktop", "element": "icon", "x": 10, "y": 20},
        Click(P(10, 20), count=2),
    ),
    ("move", {"tool_name": "move_to_desktop", "element": "menu", "x": 999, "y": 1}, Move(P(999, 1))),
    (
        "scroll",
        {"tool_name": "scroll_desktop", "element": "list", "x": 400, "y": 600, "direction": "down", "scroll_size": 25},
        Scroll(ScrollDirection.DOWN, 25, P(400, 600)),
    ),
    (
        "scroll default size",
        {"tool_name": "scroll_desktop", "element": "list", "x": 400, "y": 600, "direction": "up"},
        Scroll(ScrollDirection.UP, 10, P(400, 600)),
    ),
    ("write", {"tool_name": "write_desktop", "content": "hi"}, TypeText("hi")),
    (
        "write, enter, overwrite",
        {"tool_name": "write_desktop", "content": "hi", "press_enter": True, "overwrite": True},
        TypeText("hi", press_enter=True, overwrite=True),
    ),
    (
        "write at",
        {"tool_name": "write_at_desktop", "content": "x", "element": "name field", "x": 5, "y": 6, "overwrite": True},
        TypeText("x", P(5, 6), overwrite=True),
    ),
    ("hotkey", {"tool_name": "hotkey_desktop", "keys": ["ctrl", "c"]}, KeyCombo(("ctrl", "c"))),
    (
        "hotkey repeated",
        {"tool_name": "hotkey_desktop", "keys": ["tab"], "repeat_count": 4},
        KeyCombo(("tab",), repeat=4),
    ),
    (
        "hold and tap",
        {"tool_name": "hold_and_tap_key_desktop", "hold_keys": ["ctrl"], "tap_keys": ["a", "c"]},
        HoldAndTap(("ctrl",), ("a", "c")),
    ),
    (
        "plan",
        {
            "tool_name": "update_plan",
            "goals": [{"title": "Open it", "status": "running"}, {"title": "Check it", "status": "todo"}],
        },
        UpdatePlan((PlanGoal("Open it", "running"), PlanGoal("Check it"))),
    ),
    ("wait", {"tool_name": "wait_desktop", "seconds": 2}, Wait(2.0)),
    ("answer", {"tool_name": "answer", "content": "Paris"}, Done("Paris")),
    (
        "drag and drop (sagent)",
        {"tool_name": "drag_and_drop", "description": "move the file", "x1": 1, "y1": 2, "x2": 3, "y2": 4},
        Drag(P(1, 2), P(3, 4)),
    ),
]


@pytest.mark.parametrize(("tool_call", "expected"), [(c, a) for _, c, a in HARNESS], ids=[n for n, _, _ in HARNESS])
def test_harness_steps(profile: HolotronProfile, tool_call: dict[str, object], expected: Action) -> None:
    step = profile.parse_navigation(harness(tool_call, note="3 unread", thought="why"))
    assert step.action == expected
    assert (step.note, step.thought) == ("3 unread", "why")
    assert step.element == str(tool_call.get("element") or tool_call.get("description") or "")
    # the history writes it back in the same vocabulary, and it reads back as the same action
    written = json.loads(step_json(PastStep(step.action, step.note, step.thought, step.element)))
    assert profile.parse_navigation(json.dumps(written)).action == expected


def test_drag_to_desktop_drags_from_the_pointer(profile: HolotronProfile) -> None:
    answer = harness({"tool_name": "drag_to_desktop", "element": "the bin", "x": 900, "y": 100})
    assert profile.parse_navigation(answer, pointer=P(120, 340)).action == Drag(P(120, 340), P(900, 100))
    with pytest.raises(ParseError, match="call move_to_desktop first"):
        profile.parse_navigation(answer)


@pytest.mark.parametrize(
    ("tool_call", "message"),
    [
        ({"tool_name": "key_down_desktop", "key": "shift"}, "holds a key or button across steps"),
        ({"tool_name": "mouse_down_desktop"}, "holds a key or button across steps"),
        ({"tool_name": "hotkey_desktop", "keys": ["a", "b", "c", "d", "e", "f"]}, "at most 5"),
        ({"tool_name": "hotkey_desktop", "keys": ["tab"], "repeat_count": 21}, "outside [1, 20]"),
        ({"tool_name": "hold_and_tap_key_desktop", "hold_keys": ["a", "b", "c", "d"], "tap_keys": ["x"]}, "at most 3"),
        (
            {"tool_name": "hold_and_tap_key_desktop", "hold_keys": ["shift"], "tap_keys": ["shift"]},
            "both held and tapped",
        ),
        ({"tool_name": "write_desktop", "content": "x", "press_enter": "yes"}, "true or false"),
        ({"tool_name": "write_at_desktop", "content": "x", "element": "f"}, "needs 'x'"),
        (
            {"tool_name": "scroll_desktop", "element": "l", "x": 1, "y": 2, "direction": "up", "scroll_size": 101},
            "[1, 100]",
        ),
        ({"tool_name": "update_plan", "goals": [{"title": "x", "status": "maybe"}]}, "status one of"),
        (
            {"tool_name": "drag_and_drop", "x1": 1, "y1": 2, "x2": 3, "y2": 4, "hold_keys": ["shift"]},
            "cannot hold keys",
        ),
        ({"tool_name": "click_desktop", "element": "e" * 2001, "x": 1, "y": 2}, "at most 2000"),
        ({"tool_name": "click_desktop\u0000", "element": "e", "x": 1, "y": 2}, "not a plain name"),
        ({"tool_name": " click_desktop\t", "element": "e", "x": 1, "y": 2}, "not a plain name"),
    ],
)
def test_harness_steps_that_are_refused(profile: HolotronProfile, tool_call: dict[str, object], message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        profile.parse_navigation(harness(tool_call))
