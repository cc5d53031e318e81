"""The `holo1.5` profile: flat JSON actions in pixels of the image after Qwen2.5-VL's smart_resize.

Localization answers `{"action": "click_absolute", "x": .., "y": ..}` as Holo1.5 was trained to.
Navigation uses the same flat style, one object per step:
`{"note": .., "thought": .., "action": "click_absolute", "x": .., "y": ..}`, with the small
vocabulary below (documented in assets/prompts/holo1_5_navigation.txt). Pixel coordinates are
checked against MAX_PIXEL_SIDE here and against the actual image by `FrameMapping.model_to_image`.
"""

from __future__ import annotations

from typing import Any

from holodesk.automation.actions import Action, KeyCombo, Move, Point
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ParsedStep
from holodesk.inference.profiles.parsing import Call, read_json_point, read_json_step, run_parser
from holodesk.inference.profiles.prompting import MAX_PIXEL_SIDE, format_json_action
from holodesk.inference.profiles.qwen import QwenPixelProfile
from holodesk.inference.profiles.vocabulary import (
    ANSWER,
    ASK_USER,
    BUTTON,
    CLICKS,
    DIRECTION,
    OPTIONAL_X,
    OPTIONAL_Y,
    SCHEMA_NOTE_CHARS,
    SCHEMA_THOUGHT_CHARS,
    SCROLL_AMOUNT,
    WAIT,
    CoordinateRange,
    KeywordNames,
    Kind,
    Param,
    Tool,
    ToolSet,
    X,
    Y,
    click_builder,
    drag_builder,
    point,
    scroll_builder,
    write_builder,
)

NAVIGATION_PROMPT = "holo1_5_navigation"
LOCALIZATION_PROMPT = "holo1_5_localization"
NAVIGATION_TOKENS = 512
LOCALIZATION_TOKENS = 64
CLICK_ABSOLUTE = "click_absolute"


HOLO15_TOOLS = ToolSet(
    [
        Tool(CLICK_ABSOLUTE, (X, Y, BUTTON, CLICKS), click_builder(1)),
        Tool("double_click_absolute", (X, Y, BUTTON), click_builder(2)),
        Tool("move_absolute", (X, Y), lambda args: Move(point(args)), aliases=("hover_absolute",)),
        Tool(
            "drag_absolute",
            (
                Param("start_x", Kind.X, aliases=("from_x", "x1")),
                Param("start_y", Kind.Y, aliases=("from_y", "y1")),
                Param("end_x", Kind.X, aliases=("to_x", "x2")),
                Param("end_y", Kind.Y, aliases=("to_y", "y2")),
                BUTTON,
            ),
            drag_builder(("start_x", "start_y"), ("end_x", "end_y")),
        ),
        Tool(
            "write",
            (Param("content", Kind.TEXT, aliases=("text",)), OPTIONAL_X, OPTIONAL_Y),
            write_builder("write"),
            aliases=("type",),
        ),
        Tool("scroll", (DIRECTION, SCROLL_AMOUNT, OPTIONAL_X, OPTIONAL_Y), scroll_builder("scroll")),
        Tool(
            "key",
            (Param("keys", Kind.KEYS, aliases=("key", "combination")),),
            lambda args: KeyCombo(args["keys"]),
            aliases=("press", "hotkey"),
        ),
        WAIT,
        ANSWER,
        ASK_USER,
    ],
    CoordinateRange(MAX_PIXEL_SIDE - 1),
)


HOLO15_NAMES = KeywordNames(
    vocabulary="Holo1.5",
    click=CLICK_ABSOLUTE,
    double_click="double_click_absolute",
    move="move_absolute",
    drag="drag_absolute",
    drag_end=("end_x", "end_y"),
    scroll="scroll",
    write="write",
    keys="key",
)


def holo15_call(action: Action) -> Call:
    """An action in the Holo1.5 navigation vocabulary (for the history of earlier steps)."""
    return HOLO15_NAMES.call(action)


def describe_step(step: PastStep) -> str:
    try:
        return format_json_action(holo15_call(step.action), "action")
    except ValueError:
        return step.action.describe()


# Bounded, as every free value of the schema, so a constrained answer always ends (see schema_bounds).
_NOTE = {"type": "string", "maxLength": SCHEMA_NOTE_CHARS}
_THOUGHT = {"type": "string", "maxLength": SCHEMA_THOUGHT_CHARS}


def navigation_schema(image_width: int, image_height: int) -> dict[str, Any]:
    """One flat step object per action, x and y bounded by the current image."""
    variants = HOLO15_TOOLS.variant_schemas(
        "action", extra={"note": _NOTE, "thought": _THOUGHT}, image_size=(image_width, image_height)
    )
    return {"type": "object", "anyOf": variants}


def localization_schema(image_width: int, image_height: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": [CLICK_ABSOLUTE]},
            "x": {"type": "integer", "minimum": 0, "maximum": image_width - 1},
            "y": {"type": "integer", "minimum": 0, "maximum": image_height - 1},
        },
        "required": ["action", "x", "y"],
        "additionalProperties": False,
    }


class Holo15Profile(QwenPixelProfile):
    """Holo1.5 (Qwen2.5-VL based): ImagePixelSpace of the smart-resized image."""

    name = "holo1.5"
    navigation_prompt = NAVIGATION_PROMPT
    localization_prompt = LOCALIZATION_PROMPT
    navigation_tokens = NAVIGATION_TOKENS
    localization_tokens = LOCALIZATION_TOKENS
    answer_instruction = "Answer with the JSON object for the next step."

    def _describe_step(self, step: PastStep) -> str:
        return describe_step(step)

    def _navigation_schema(self, image_width: int, image_height: int) -> dict[str, Any]:
        return navigation_schema(image_width, image_height)

    def _localization_schema(self, image_width: int, image_height: int) -> dict[str, Any]:
        return localization_schema(image_width, image_height)

    def parse_navigation(self, text: str, pointer: Point | None = None) -> ParsedStep:
        return run_parser(lambda raw: read_json_step(raw, HOLO15_TOOLS), text, self.name)

    def parse_localization(self, text: str) -> Point:
        return run_parser(
            lambda raw: read_json_point(raw, HOLO15_TOOLS.coordinates, action_names=(CLICK_ABSOLUTE,)),
            text,
            self.name,
        )
