"""The holo1 profile: call-style actions, Click(x, y), in pixels of the smart-resized image."""

from __future__ import annotations

import re

import numpy as np
import pytest

from holodesk.automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    KeyCombo,
    MouseButton,
    Move,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    Wait,
)
from holodesk.automation.coords import ImagePixelSpace, Rect
from holodesk.automation.errors import OffScreenError
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import ParseError
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import PreparedImage
from holodesk.inference.profiles.holo1 import HOLO1_TOOLS, Holo1Profile
from holodesk.inference.profiles.prompting import default_prompts_dir

P = Point


@pytest.fixture(scope="module")
def profile() -> Holo1Profile:
    return Holo1Profile()


def frame(width: int, height: int, left: int = 0, top: int = 0) -> ScreenFrame:
    return ScreenFrame(
        pixels=np.zeros((height, width, 4), np.uint8),
        region=Rect(left, top, width, height),
        monitor=None,
        monitors=(),
        captured_at=0.0,
    )


VALID: list[tuple[str, str, Action]] = [
    ("bare click", "Click(352, 348)", Click(P(352, 348))),
    ("keywords", "Click(x=352, y=348)", Click(P(352, 348))),
    ("action line", "Action: Click(1, 2)", Click(P(1, 2))),
    ("three lines", "Note: total 12\nThought: open it\nAction: DoubleClick(5, 6)", Click(P(5, 6), count=2)),
    ("right click", "RightClick(5, 6)", Click(P(5, 6), MouseButton.RIGHT)),
    ("middle click", 'Click(5, 6, button="middle")', Click(P(5, 6), MouseButton.MIDDLE)),
    ("triple click", "Click(5, 6, clicks=3)", Click(P(5, 6), count=3)),
    ("move", "Move(7, 8)", Move(P(7, 8))),
    ("hover alias", "Hover(7, 8)", Move(P(7, 8))),
    ("drag", "Drag(1, 2, 300, 400)", Drag(P(1, 2), P(300, 400))),
    ("write", 'Write("hello world")', TypeText("hello world")),
    ("write at", 'Write("hello", 10, 20)', TypeText("hello", P(10, 20))),
    ("type alias single quotes", "Type('it\\'s')", TypeText("it's")),
    ("write with a call inside", 'Write("Click(1, 2)")', TypeText("Click(1, 2)")),
    ("write newline escape", 'Write("a\\nb")', TypeText("a\nb")),
    ("scroll", 'Scroll("down")', Scroll(ScrollDirection.DOWN)),
    ("scroll bare word", "Scroll(up, 5)", Scroll(ScrollDirection.UP, 5)),
    ("scroll at", 'Scroll("left", 2, 30, 40)', Scroll(ScrollDirection.LEFT, 2, P(30, 40))),
    ("press", 'Press("ctrl+c")', KeyCombo(("ctrl", "c"))),
    ("press list", 'Press(["alt", "tab"])', KeyCombo(("alt", "tab"))),
    ("hotkey alias", 'Hotkey("Return")', KeyCombo(("enter",))),
    ("wait", "Wait()", Wait()),
    ("wait seconds", "Wait(2)", Wait(2.0)),
    ("answer", 'Answer("42 unread")', Done("42 unread")),
    ("answer empty", "Answer()", Done("")),
    ("ask", 'AskUser("Which file?")', AskUser("Which file?")),
    ("integral float", "Click(352.0, 348)", Click(P(352, 348))),
    ("digit strings", 'Click("352", "348")', Click(P(352, 348))),
    ("fenced", "```\nAction: Click(1, 2)\n```", Click(P(1, 2))),
    ("markdown headers", "**Thought:** the icon\n**Action:** Click(1, 2)", Click(P(1, 2))),
    ("prose around", "I will press the OK button (the blue one).\nClick(1, 2)\nThat should do it.", Click(P(1, 2))),
    ("think", "<think>the OK button is at the bottom</think>\nAction: Click(1, 2)", Click(P(1, 2))),
]


@pytest.mark.parametrize(("text", "expected"), [(t, a) for _, t, a in VALID], ids=[v[0] for v in VALID])
def test_valid_navigation_answers(profile: Holo1Profile, text: str, expected: Action) -> None:
    assert profile.parse_navigation(text).action == expected


def test_note_and_thought_lines(profile: Holo1Profile) -> None:
    parsed = profile.parse_navigation("Note: total is 12\nThought: open the file\nAction: Click(1, 2)")
    assert (parsed.note, parsed.thought) == ("total is 12", "open the file")
    reasoned = profile.parse_navigation("<think>the menu</think>Action: Click(1, 2)")
    assert (reasoned.note, reasoned.thought) == ("", "the menu")


HOSTILE: list[tuple[str, str, str]] = [
    ("empty", "", "empty"),
    ("prose only", "I would click the OK button (bottom right).", "no action call"),
    ("unknown action", "Action: Tap(1, 2)", "unknown action 'Tap'"),
    ("lower-case name", "click(1, 2)", "unknown action 'click'"),
    ("unknown beside known", "Action: Tap(3, 4) Click(1, 2)", "not a known action"),
    ("two calls", "Click(1, 2)\nClick(3, 4)", "2 action calls"),
    ("smuggled in the thought", "Thought: then Answer('done')\nAction: Click(1, 2)", "2 action calls"),
    ("smuggled after", 'Action: Click(1, 2)\nWrite("rm -rf ~")', "2 action calls"),
    ("json beside", 'Action: Click(1, 2)\n{"action": "answer"}', "JSON object"),
    ("json only", '{"action": "click_absolute", "x": 1, "y": 2}', "no action call"),
    ("missing y", "Click(1)", "needs 'y'"),
    ("too many args", "Click(1, 2, 3, 4, 5)", "at most 4"),
    ("negative", "Click(-1, 2)", "outside [0, 16383]"),
    ("huge", "Click(1, 99999999)", "outside [0, 16383]"),
    ("enormous", "Click(1, " + "9" * 5000 + ")", "cannot read"),
    ("fraction", "Click(0.5, 0.5)", "whole number"),
    ("NaN text", 'Click("nan", 2)', "must be a number"),
    ("inf literal", "Click(1e999, 2)", "finite"),
    ("bool", "Click(True, 2)", "must be a number"),
    ("expression", "Click(1 + 2, 3)", "plain value"),
    ("nested call", "Click(int('3'), 4)", "plain value"),
    ("unpacking", "Click(*pos)", "unpacks"),
    ("duplicate keyword", "Click(x=1, x=2, y=3)", "repeats"),
    ("x given twice", "Click(1, 2, x=3)", "twice"),
    ("unknown keyword", "Click(1, 2, force=True)", "no argument 'force'"),
    ("unclosed", "Action: Click(1, 2", "never closed"),
    ("x without y", 'Write("a", 5)', "without y"),
    ("empty text", 'Write("")', "empty"),
    ("bad key", 'Press("ctrl+nothing")', "unknown key"),
    ("bad direction", 'Scroll("around")', "scroll direction"),
    ("wait forever", "Wait(1e6)", "wait must be"),
    ("reasoning only", "<think>Click(1, 2)</think>", "only reasoning"),
]


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_navigation_answers(profile: Holo1Profile, text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        profile.parse_navigation(text)
    assert caught.value.raw_text == text
    assert str(caught.value).startswith("holo1: ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Click(352, 348)", P(352, 348)),
        ("Click(x=10, y=0)", P(10, 0)),
        ("The element is here: Click(5, 6).", P(5, 6)),
        ("<think>bottom</think>Click(5, 6)", P(5, 6)),
    ],
)
def test_valid_localization_answers(profile: Holo1Profile, text: str, expected: Point) -> None:
    assert profile.parse_localization(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("(352, 348)", "no action call"),
        ("DoubleClick(1, 2)", "not DoubleClick"),
        ('Write("x")', "not Write"),
        ('Click(1, 2, button="right")', "nothing else"),
        ("Click(1, 2) Click(3, 4)", "2 action calls"),
        ("Click(-1, 2)", "outside"),
        ("Click(0.3, 0.7)", "whole number"),
    ],
)
def test_hostile_localization_answers(profile: Holo1Profile, text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        profile.parse_localization(text)
    assert caught.value.raw_text == text


# -- images and requests ---------------------------------------------------------------------------


def prepared(width: int = 1920, height: int = 1080, left: int = 0, top: int = 0) -> PreparedImage:
    return Holo1Profile().prepare_image(frame(width, height, left, top))


def test_prepare_image_and_mapping_to_a_monitor_above_the_primary() -> None:
    image = prepared(2560, 1440, left=0, top=-1440)
    assert image.image.size == (1316, 728)
    mapping = image.mapping
    assert mapping.model_to_screen(P(0, 0), ImagePixelSpace()) == P(0, -1440)
    assert mapping.model_to_screen(P(1315, 727), ImagePixelSpace()) == P(2559, -1)
    with pytest.raises(OffScreenError):
        mapping.model_to_screen(P(1316, 0), ImagePixelSpace())


def test_navigation_request(profile: Holo1Profile) -> None:
    history = [
        PastStep(Click(P(1, 2)), thought="open"),
        PastStep(TypeText('say "hi"', P(3, 4))),
        PastStep(Drag(P(1, 2), P(3, 4), MouseButton.RIGHT)),
        PastStep(Done("ok")),
    ]
    request = profile.navigation_request("greet", history, [prepared(800, 600), prepared()])
    system, user = request.messages
    assert "1316 pixels wide and 728 pixels high" in system["content"]
    text = user["content"][0]["text"]
    assert "1. Click(1, 2)\n   thought: open" in text
    assert '2. Write("say \\"hi\\"", 3, 4)' in text
    assert '3. Drag(1, 2, 3, 4, button="right")' in text
    assert '4. Answer("ok")' in text
    assert [part["type"] for part in user["content"]].count("image") == len(request.images) == 2
    assert request.response_schema is None
    assert user["content"][-1]["text"].endswith("Answer with the Note, Thought and Action lines.")


def test_localization_request(profile: Holo1Profile) -> None:
    request = profile.localization_request("the Trash icon", prepared())
    text = request.messages[0]["content"][1]["text"]
    assert "Click(x, y)" in text and "1316x728" in text and text.rstrip().endswith("the Trash icon")
    assert request.response_schema is None


def test_prompt_documents_the_vocabulary_and_its_example_parses(profile: Holo1Profile) -> None:
    system = profile.navigation_request("t", [], [prepared()]).messages[0]["content"]
    for tool in HOLO1_TOOLS.documented:
        assert f"- {tool.name}(" in system
    text = (default_prompts_dir() / "holo1_navigation.txt").read_text(encoding="utf-8")
    example = text.split("Example:\n", 1)[1].split("\n\n", 1)[0]
    parsed = profile.parse_navigation(example)
    assert parsed.action == Click(P(1012, 688))
    assert parsed.note == "The invoice total is 1,250.00 EUR."
