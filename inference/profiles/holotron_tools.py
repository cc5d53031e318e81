"""Holotron's action vocabulary: H Company's desktop tool calls, its web (Surfer-H) actions, and ours.

The prompt teaches the desktop tools (plus wait, answer and our ask_user); the web names, Holo3's
click/write and the tool-call extras are accepted too, because a model trained by H Company may
speak any of them. Coordinates are integers in [0, 1000] of the image shown (NormalizedSpace).
Recognised but unsupported here: goto, restart (a browser's, not a desktop's) and key_down/key_up
(a key held across steps could be left down if the run stops).
"""

from __future__ import annotations

from holodesk.automation.actions import Action, KeyCombo, Move
from holodesk.automation.coords import NORMALIZED_MAX
from holodesk.inference.profiles.builders import click_builder, drag_builder, scroll_builder, write_builder
from holodesk.inference.profiles.extract import Call, MalformedAnswer
from holodesk.inference.profiles.keyword_vocabulary import ANSWER, ASK_USER, WAIT, KeywordNames
from holodesk.inference.profiles.tools import (
    BUTTON,
    CLICKS,
    DIRECTION,
    OPTIONAL_X,
    OPTIONAL_Y,
    SCROLL_AMOUNT,
    Args,
    CoordinateRange,
    Kind,
    Param,
    Tool,
    ToolSet,
    X,
    Y,
    point,
)

CONTENT = Param("content", Kind.TEXT, aliases=("text",))
ELEMENT = Param("element", Kind.LABEL, required=False, aliases=("element_description",))


def _hold_and_tap(args: Args) -> Action:
    if args.get("count", 1) != 1:
        raise MalformedAnswer("hold_and_tap_key_desktop can tap the key once per step here")
    tap = args["tap_key"]
    if len(tap) != 1:
        raise MalformedAnswer("hold_and_tap_key_desktop taps one key")
    return KeyCombo((*args["hold_keys"], *tap))


_UNSUPPORTED_WEB = (
    "{name} belongs to a web browser agent; Holodesk drives the whole desktop, where it is not"
    " supported (click the browser's address bar and type instead)"
)
_UNSUPPORTED_HOLD = (
    "{name} holds a key across steps, which is not supported (a stopped run could leave it held);"
    " use hotkey_desktop or hold_and_tap_key_desktop"
)

HOLOTRON_TOOLS = ToolSet(
    [
        # -- desktop tool calls (taught in the prompt) --
        Tool("click_desktop", (X, Y, BUTTON, CLICKS), click_builder(1)),
        Tool("double_click_desktop", (X, Y, BUTTON), click_builder(2)),
        Tool("move_to_desktop", (X, Y), lambda args: Move(point(args))),
        Tool(
            "drag_to_desktop",
            (
                Param("start_x", Kind.X, aliases=("from_x", "x1")),
                Param("start_y", Kind.Y, aliases=("from_y", "y1")),
                Param("x", Kind.X, aliases=("end_x", "to_x", "x2")),
                Param("y", Kind.Y, aliases=("end_y", "to_y", "y2")),
                BUTTON,
            ),
            drag_builder(("start_x", "start_y"), ("x", "y")),
        ),
        Tool("scroll_desktop", (DIRECTION, SCROLL_AMOUNT, OPTIONAL_X, OPTIONAL_Y), scroll_builder("scroll_desktop")),
        Tool("write_desktop", (CONTENT, OPTIONAL_X, OPTIONAL_Y), write_builder("write_desktop", needs_point=False)),
        Tool(
            "hotkey_desktop",
            (Param("keys", Kind.KEYS, aliases=("key", "hotkey", "combination")),),
            lambda args: KeyCombo(args["keys"]),
        ),
        Tool(
            "hold_and_tap_key_desktop",
            (
                Param("hold_keys", Kind.KEYS, aliases=("hold_key", "hold", "modifiers", "modifier")),
                Param("tap_key", Kind.KEYS, aliases=("tap", "key")),
                Param("count", Kind.COUNT, required=False, aliases=("times", "taps"), maximum=100),
            ),
            _hold_and_tap,
        ),
        WAIT,
        ANSWER,
        ASK_USER,
        # -- accepted, not taught --
        Tool(
            "update_plan",
            (Param("plan", Kind.PLAN, aliases=("content", "steps", "text")),),
            is_plan=True,
            documented=False,
        ),
        Tool("key_down_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="key_down_desktop")),
        Tool("key_up_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="key_up_desktop")),
        # Surfer-H web actions, and Holo3's click/write.
        Tool("click_element", (ELEMENT, X, Y), click_builder(1), aliases=("click",), documented=False),
        Tool(
            "write_element",
            (CONTENT, ELEMENT, OPTIONAL_X, OPTIONAL_Y),
            write_builder("write_element", needs_point=True),
            documented=False,
        ),
        Tool(
            "write",
            (CONTENT, ELEMENT, OPTIONAL_X, OPTIONAL_Y),
            write_builder("write", needs_point=False),
            documented=False,
        ),
        Tool(
            "scroll",
            (DIRECTION, ELEMENT, SCROLL_AMOUNT, OPTIONAL_X, OPTIONAL_Y),
            scroll_builder("scroll"),
            documented=False,
        ),
        Tool("go_back", build=lambda args: KeyCombo(("alt", "left")), documented=False),
        Tool("refresh", build=lambda args: KeyCombo(("f5",)), documented=False),
        Tool(
            "goto",
            (Param("url", Kind.TEXT),),
            documented=False,
            refusal=_UNSUPPORTED_WEB.format(name="goto"),
        ),
        Tool("restart", documented=False, refusal=_UNSUPPORTED_WEB.format(name="restart")),
    ],
    CoordinateRange(NORMALIZED_MAX),
)


# The names the prompt teaches, so the history of earlier steps speaks the same vocabulary.
HOLOTRON_NAMES = KeywordNames(
    vocabulary="Holotron",
    click="click_desktop",
    double_click="double_click_desktop",
    move="move_to_desktop",
    drag="drag_to_desktop",
    drag_end=("x", "y"),
    scroll="scroll_desktop",
    write="write_desktop",
    keys="hotkey_desktop",
)


def holotron_call(action: Action) -> Call:
    """An action written in the vocabulary the prompt teaches (for the history of earlier steps)."""
    return HOLOTRON_NAMES.call(action)
