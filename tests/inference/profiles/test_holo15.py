"""The holo1.5 profile: flat JSON actions in pixels of the smart-resized image."""

from __future__ import annotations

import json
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
from holodesk.automation.coords import FrameMapping, ImagePixelSpace, Rect
from holodesk.automation.errors import OffScreenError
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import ParseError
from holodesk.inference.profiles.base import ImageBudget, PreparedImage
from holodesk.inference.profiles.holo15 import HOLO15_TOOLS, Holo15Profile, localization_schema, navigation_schema
from holodesk.inference.profiles.prompting import MAX_PIXEL_SIDE, default_prompts_dir, smart_resize

P = Point


@pytest.fixture(scope="module")
def profile() -> Holo15Profile:
    return Holo15Profile()


def frame(width: int, height: int, left: int = 0, top: int = 0) -> ScreenFrame:
    return ScreenFrame(
        pixels=np.zeros((height, width, 4), np.uint8),
        region=Rect(left, top, width, height),
        monitor=None,
        monitors=(),
        captured_at=0.0,
    )


def act(name: str, **args: object) -> str:
    return json.dumps({"note": "", "thought": "", "action": name, **args})


VALID: list[tuple[str, str, Action]] = [
    ("click", act("click_absolute", x=352, y=348), Click(P(352, 348))),
    ("click origin", act("click_absolute", x=0, y=0), Click(P(0, 0))),
    ("right click", act("click_absolute", x=1, y=2, button="right"), Click(P(1, 2), MouseButton.RIGHT)),
    ("triple click", act("click_absolute", x=1, y=2, clicks=3), Click(P(1, 2), count=3)),
    ("double click", act("double_click_absolute", x=5, y=6), Click(P(5, 6), count=2)),
    ("move", act("move_absolute", x=5, y=6), Move(P(5, 6))),
    ("hover alias", act("hover_absolute", x=5, y=6), Move(P(5, 6))),
    ("drag", act("drag_absolute", start_x=1, start_y=2, end_x=300, end_y=400), Drag(P(1, 2), P(300, 400))),
    ("drag aliases", act("drag_absolute", x1=1, y1=2, x2=3, y2=4), Drag(P(1, 2), P(3, 4))),
    ("write", act("write", content="hello"), TypeText("hello")),
    ("write at", act("write", content="hello", x=10, y=20), TypeText("hello", P(10, 20))),
    ("type alias", act("type", text="Grüße"), TypeText("Grüße")),
    ("scroll", act("scroll", direction="down"), Scroll(ScrollDirection.DOWN)),
    ("scroll at", act("scroll", direction="right", amount=2, x=7, y=8), Scroll(ScrollDirection.RIGHT, 2, P(7, 8))),
    ("key", act("key", keys="ctrl+shift+t"), KeyCombo(("ctrl", "shift", "t"))),
    ("press alias list", act("press", keys=["alt", "F4"]), KeyCombo(("alt", "f4"))),
    ("hotkey alias key arg", act("hotkey", key="Escape"), KeyCombo(("esc",))),
    ("wait", act("wait"), Wait()),
    ("wait seconds", act("wait", seconds=5), Wait(5.0)),
    ("answer", act("answer", content="3 files"), Done("3 files")),
    ("ask", act("ask_user", question="Send it?"), AskUser("Send it?")),
    ("integral float", act("click_absolute", x=352.0, y="348"), Click(P(352, 348))),
    ("largest pixel", act("click_absolute", x=MAX_PIXEL_SIDE - 1, y=0), Click(P(MAX_PIXEL_SIDE - 1, 0))),
    ("no note or thought", '{"action": "click_absolute", "x": 1, "y": 2}', Click(P(1, 2))),
    ("fenced with prose", 'Next:\n```json\n{"action": "key", "keys": "enter"}\n```', KeyCombo(("enter",))),
    ("trailing comma", '{"action": "click_absolute", "x": 1, "y": 2,}', Click(P(1, 2))),
    ("think", '<think>the OK button</think>{"action": "click_absolute", "x": 1, "y": 2}', Click(P(1, 2))),
    ("nested object", '{"action": {"action": "click_absolute", "x": 1, "y": 2}}', Click(P(1, 2))),
    ("call string", '{"action": "click_absolute(x=1, y=2)"}', Click(P(1, 2))),
    ("tool call", '<tool_call>{"name": "write", "arguments": {"content": "a"}}</tool_call>', TypeText("a")),
]


@pytest.mark.parametrize(("text", "expected"), [(t, a) for _, t, a in VALID], ids=[v[0] for v in VALID])
def test_valid_navigation_answers(profile: Holo15Profile, text: str, expected: Action) -> None:
    assert profile.parse_navigation(text).action == expected


def test_note_and_thought(profile: Holo15Profile) -> None:
    parsed = profile.parse_navigation('{"note": "n", "thought": "t", "action": "wait"}')
    assert (parsed.note, parsed.thought) == ("n", "t")


HOSTILE: list[tuple[str, str, str]] = [
    ("empty", "", "empty"),
    ("prose", "Click the OK button at 352, 348.", "no JSON"),
    ("unknown action", act("tap", x=1, y=2), "unknown action"),
    ("holotron name", act("click_desktop", x=1, y=2), "unknown action"),
    ("web name", act("click_element", x=1, y=2), "unknown action"),
    ("no action", '{"note": "", "thought": "t"}', "no action"),
    ("missing y", act("click_absolute", x=1), "needs 'y'"),
    ("negative", act("click_absolute", x=-1, y=2), "outside [0, 16383]"),
    ("huge", act("click_absolute", x=1, y=10**7), "outside [0, 16383]"),
    ("huger", act("click_absolute", x=1, y=10**12), "too large"),
    ("just past the limit", act("click_absolute", x=MAX_PIXEL_SIDE, y=2), "outside"),
    ("NaN", '{"action": "click_absolute", "x": NaN, "y": 2}', "NaN"),
    ("fraction", act("click_absolute", x=0.5, y=0.5), "whole number"),
    ("bool", act("click_absolute", x=False, y=2), "must be a number"),
    ("unknown arg", act("click_absolute", x=1, y=2, element="OK"), "no argument 'element'"),
    ("drag missing end", act("drag_absolute", start_x=1, start_y=2, end_x=3), "needs 'end_y'"),
    ("empty write", act("write", content=""), "empty"),
    ("bad key", act("key", keys="hyper+q"), "unknown key"),
    ("keys not text", act("key", keys=5), "key combination"),
    ("two objects", act("click_absolute", x=1, y=2) + act("answer", content="x"), "2 JSON objects"),
    ("smuggled call", act("wait") + " answer(content='done')", "calls answer"),
    ("list", '{"action": ["click_absolute", "answer"]}', "list of 2"),
    ("duplicate key", '{"action": "wait", "action": "answer"}', "repeats the key"),
    ("only reasoning", "<think>the OK button</think>", "only reasoning"),
]


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_navigation_answers(profile: Holo15Profile, text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        profile.parse_navigation(text)
    assert caught.value.raw_text == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"action": "click_absolute", "x": 352, "y": 348}', P(352, 348)),
        ('{"x": 352, "y": 348}', P(352, 348)),
        ('```json\n{"y": 10, "x": 20, "action": "click_absolute"}\n```', P(20, 10)),
        ('<think>it is top left</think>{"action": "click_absolute", "x": "3", "y": 4.0}', P(3, 4)),
    ],
)
def test_valid_localization_answers(profile: Holo15Profile, text: str, expected: Point) -> None:
    assert profile.parse_localization(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("Click(352, 348)", "no JSON"),
        ('{"action": "click", "x": 1, "y": 2}', "expected 'click_absolute'"),
        ('{"action": "double_click_absolute", "x": 1, "y": 2}', "expected 'click_absolute'"),
        ('{"action": "click_absolute", "x": -3, "y": 2}', "outside"),
        ('{"action": "click_absolute", "x": 1e12, "y": 2}', "outside"),
        ('{"action": "click_absolute", "x": 1.5, "y": 2}', "whole number"),
        ('{"action": "click_absolute", "y": 2}', "no x"),
        ('{"action": "click_absolute", "x": 1, "y": 2, "button": "right"}', "unexpected fields"),
        ('{"x": 1, "y": 2}{"x": 3, "y": 4}', "2 JSON objects"),
    ],
)
def test_hostile_localization_answers(profile: Holo15Profile, text: str, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        profile.parse_localization(text)
    assert caught.value.raw_text == text


# -- images ----------------------------------------------------------------------------------------

SIZES = [
    ((1920, 1080), (1316, 728)),
    ((1366, 768), (1316, 728)),
    ((3840, 2160), (1316, 728)),
    ((1280, 800), (1260, 784)),
    ((800, 600), (812, 588)),
    ((1080, 1920), (728, 1316)),
    ((3286, 1080), (1736, 560)),
    ((100, 50), (112, 56)),
]


@pytest.mark.parametrize(("size", "expected"), SIZES)
def test_prepare_image_resizes_like_qwen(
    profile: Holo15Profile, size: tuple[int, int], expected: tuple[int, int]
) -> None:
    prepared = profile.prepare_image(frame(*size))
    assert prepared.image.size == expected
    assert prepared.mapping == FrameMapping(Rect(0, 0, *size), *expected)
    assert expected[0] % 28 == 0 and expected[1] % 28 == 0


def test_smart_resize_matches_transformers() -> None:
    # The PIL image processor's module: the default one imports torchvision, which the tests do not install.
    from transformers.models.qwen2_vl import image_processing_pil_qwen2_vl as qwen

    for width, height in [*(size for size, _ in SIZES), (5120, 1440), (28, 28), (10, 10), (4000, 30), (2, 300)]:
        for max_pixels in (28 * 28 * 1280, 12845056, 28 * 28 * 256):
            expected_height, expected_width = qwen.smart_resize(height, width, max_pixels=max_pixels)
            assert smart_resize(width, height, max_pixels=max_pixels) == (expected_width, expected_height)


def test_smart_resize_of_its_own_output_is_identity() -> None:
    # Why profiles resize themselves: the processor's own resize must then leave the image alone.
    for size, _ in SIZES:
        once = smart_resize(*size)
        assert smart_resize(*once) == once


def test_max_pixels_and_long_side_cap() -> None:
    assert Holo15Profile(max_pixels=28 * 28 * 256).prepare_image(frame(1920, 1080)).image.size == (588, 336)
    capped = Holo15Profile(ImageBudget(max_long_side=700)).prepare_image(frame(1920, 1080))
    assert capped.image.size == (700, 392)


def test_extreme_aspect_ratio_is_refused(profile: Holo15Profile) -> None:
    with pytest.raises(ValueError, match="aspect ratio"):
        profile.prepare_image(frame(4020, 20))


@pytest.mark.parametrize(
    ("model", "screen"),
    [
        (P(0, 0), P(-1920, 0)),  # 1920/1316 = 1.46 screen pixels per image pixel
        (P(1315, 727), P(-1, 1079)),
        (P(658, 364), P(-960, 540)),
    ],
)
def test_pixel_point_maps_to_the_screen(profile: Holo15Profile, model: Point, screen: Point) -> None:
    prepared = profile.prepare_image(frame(1920, 1080, left=-1920))
    assert prepared.mapping.model_to_screen(model, ImagePixelSpace()) == screen


@pytest.mark.parametrize("model", [P(1316, 0), P(0, 728), P(5000, 5000)])
def test_points_outside_the_resized_image_are_refused_by_the_mapping(profile: Holo15Profile, model: Point) -> None:
    prepared = profile.prepare_image(frame(1920, 1080))
    # Parsing accepts them (it does not know the image); the mapping refuses them before any input.
    assert profile.parse_navigation(act("click_absolute", x=model.x, y=model.y)).action == Click(model)
    with pytest.raises(OffScreenError):
        prepared.mapping.model_to_screen(model, ImagePixelSpace())


# -- requests --------------------------------------------------------------------------------------


def prepared(width: int = 1920, height: int = 1080) -> PreparedImage:
    return Holo15Profile().prepare_image(frame(width, height))


def test_navigation_request_states_the_image_size(profile: Holo15Profile) -> None:
    images = [prepared(800, 600), prepared()]
    request = profile.navigation_request("open settings", [], images)
    system, user = request.messages
    assert "1316 pixels wide and 728 pixels high" in system["content"]
    assert "${" not in system["content"]
    assert user["content"][-1]["text"].startswith("The current screenshot is 1316x728 pixels.")
    assert [part["type"] for part in user["content"]].count("image") == len(request.images) == 2
    assert request.images[-1].size == (1316, 728)


def test_history_is_written_in_the_flat_vocabulary(profile: Holo15Profile) -> None:
    from holodesk.inference.policy import PastStep

    history = [PastStep(Click(P(10, 20), MouseButton.RIGHT), note="menu"), PastStep(Scroll(ScrollDirection.UP))]
    text = profile.navigation_request("t", history, [prepared()]).messages[1]["content"][0]["text"]
    assert '1. {"action": "click_absolute", "x": 10, "y": 20, "button": "right"}' in text
    assert "   note: menu" in text
    assert '2. {"action": "scroll", "direction": "up", "amount": 3}' in text


def test_navigation_schema_is_bounded_by_the_current_image(profile: Holo15Profile) -> None:
    schema = profile.navigation_request("t", [], [prepared()]).response_schema
    assert schema == navigation_schema(1316, 728)
    click = next(v for v in schema["anyOf"] if v["properties"]["action"]["enum"] == ["click_absolute"])
    assert click["properties"]["x"] == {"type": "integer", "minimum": 0, "maximum": 1315}
    assert click["properties"]["y"] == {"type": "integer", "minimum": 0, "maximum": 727}
    assert set(click["required"]) == {"action", "note", "thought", "x", "y"}
    assert [v["properties"]["action"]["enum"][0] for v in schema["anyOf"]] == [t.name for t in HOLO15_TOOLS.documented]


def test_localization_request(profile: Holo15Profile) -> None:
    image = prepared()
    request = profile.localization_request("Search field", image)
    (message,) = request.messages
    assert message["content"][0] == {"type": "image"}
    text = message["content"][1]["text"]
    assert text.startswith("Localize an element on the GUI image")
    assert "1316 pixels wide and 728 pixels high" in text
    assert text.rstrip().endswith("Search field")
    assert request.response_schema == localization_schema(1316, 728)
    assert request.response_schema["properties"]["x"]["maximum"] == 1315


def test_prompt_documents_the_vocabulary_and_its_examples_parse(profile: Holo15Profile) -> None:
    system = profile.navigation_request("t", [], [prepared()]).messages[0]["content"]
    for tool in HOLO15_TOOLS.documented:
        assert f"- {tool.name}(" in system
    text = (default_prompts_dir() / "holo1_5_navigation.txt").read_text(encoding="utf-8")
    examples = [line for line in text.splitlines() if line.startswith('{"note": "') and "<action name>" not in line]
    assert [profile.parse_navigation(line).action for line in examples] == [
        Click(P(1012, 688)),
        TypeText("quarterly report", P(402, 96)),
        KeyCombo(("enter",)),
    ]
