"""The `holo1` profile: call-style actions, `Click(x, y)`, in pixels of the smart-resized image.

Localization answers `Click(x, y)` as Holo1 was trained to. Navigation answers `Note:` /
`Thought:` / `Action:` lines with one call from the vocabulary below (documented in
assets/prompts/holo1_navigation.txt). Pixel coordinates are checked against MAX_PIXEL_SIDE here
and against the actual image by `FrameMapping.model_to_image`.
"""

from __future__ import annotations

from typing import Any

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
    TypeText,
    Wait,
)
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ParsedStep
from holodesk.inference.profiles.parsing import (
    Call,
    MalformedAnswer,
    find_single_call,
    read_call_step,
    run_parser,
    split_reasoning,
)
from holodesk.inference.profiles.prompting import MAX_PIXEL_SIDE, format_call
from holodesk.inference.profiles.qwen import QwenPixelProfile
from holodesk.inference.profiles.vocabulary import (
    BUTTON,
    CLICKS,
    DIRECTION,
    OPTIONAL_X,
    OPTIONAL_Y,
    SCROLL_AMOUNT,
    SECONDS,
    CoordinateRange,
    Kind,
    Param,
    Tool,
    ToolSet,
    X,
    Y,
    build_wait,
    click_builder,
    drag_builder,
    point,
    scroll_builder,
    write_builder,
)

NAVIGATION_PROMPT = "holo1_navigation"
LOCALIZATION_PROMPT = "holo1_localization"
NAVIGATION_TOKENS = 384
LOCALIZATION_TOKENS = 32


HOLO1_TOOLS = ToolSet(
    [
        Tool("Click", (X, Y, BUTTON, CLICKS), click_builder(1)),
        Tool("DoubleClick", (X, Y), lambda args: Click(point(args), count=2)),
        Tool("RightClick", (X, Y), lambda args: Click(point(args), button=MouseButton.RIGHT)),
        Tool("Move", (X, Y), lambda args: Move(point(args)), aliases=("Hover", "MoveTo")),
        Tool(
            "Drag",
            (Param("x1", Kind.X), Param("y1", Kind.Y), Param("x2", Kind.X), Param("y2", Kind.Y), BUTTON),
            drag_builder(("x1", "y1"), ("x2", "y2")),
        ),
        Tool(
            "Write",
            (Param("text", Kind.TEXT, aliases=("content",)), OPTIONAL_X, OPTIONAL_Y),
            write_builder("Write", text="text"),
            aliases=("Type",),
        ),
        Tool("Scroll", (DIRECTION, SCROLL_AMOUNT, OPTIONAL_X, OPTIONAL_Y), scroll_builder("Scroll")),
        Tool(
            "Press",
            (Param("keys", Kind.KEYS, aliases=("key",)),),
            lambda args: KeyCombo(args["keys"]),
            aliases=("Hotkey", "Key"),
        ),
        Tool("Wait", (SECONDS,), build_wait),
        Tool(
            "Answer",
            (Param("text", Kind.TEXT, required=False, aliases=("content", "answer")),),
            lambda args: Done(args.get("text", "")),
        ),
        Tool("AskUser", (Param("question", Kind.TEXT),), lambda args: AskUser(args["question"])),
    ],
    CoordinateRange(MAX_PIXEL_SIDE - 1),
)


def holo1_call(action: Action) -> Call:
    """An action in the Holo1 call vocabulary (for the history of earlier steps)."""
    match action:
        case Click(at=at, button=MouseButton.LEFT, count=1):
            return Call("Click", (at.x, at.y))
        case Click(at=at, button=MouseButton.LEFT, count=2):
            return Call("DoubleClick", (at.x, at.y))
        case Click(at=at, button=MouseButton.RIGHT, count=1):
            return Call("RightClick", (at.x, at.y))
        case Click(at=at, button=button, count=count):
            return Call("Click", (at.x, at.y), {"button": button.value, "clicks": count})
        case Move(to=to):
            return Call("Move", (to.x, to.y))
        case Drag(start=start, end=end, button=button):
            extra: dict[str, Any] = {} if button is MouseButton.LEFT else {"button": button.value}
            return Call("Drag", (start.x, start.y, end.x, end.y), extra)
        case Scroll(direction=direction, amount=amount, at=at):
            where = (at.x, at.y) if at is not None else ()
            return Call("Scroll", (direction.value, amount, *where))
        case TypeText(text=text, at=at):
            where = (at.x, at.y) if at is not None else ()
            return Call("Write", (text, *where))
        case KeyCombo(keys=keys):
            return Call("Press", ("+".join(keys),))
        case Wait(seconds=seconds):
            return Call("Wait", (seconds,))
        case Done(answer=answer):
            return Call("Answer", (answer,))
        case AskUser(question=question):
            return Call("AskUser", (question,))
    raise ValueError(f"no Holo1 action for {action!r}")


def describe_step(step: PastStep) -> str:
    try:
        return format_call(holo1_call(step.action))
    except ValueError:
        return step.action.describe()


def read_click_point(text: str) -> Point:
    """The point of the one `Click(x, y)` in a grounding answer."""
    if not isinstance(text, str) or not text.strip():
        raise MalformedAnswer("the answer is empty")
    found = find_single_call(split_reasoning(text).answer, HOLO1_TOOLS)
    if found.call.name != "Click":
        raise MalformedAnswer(f"a localization answer is Click(x, y), not {found.call.name}(...)")
    action = HOLO1_TOOLS.interpret(found.call).action
    if not isinstance(action, Click) or action.button is not MouseButton.LEFT or action.count != 1:
        raise MalformedAnswer("a localization answer is Click(x, y) with nothing else")
    return action.at


class Holo1Profile(QwenPixelProfile):
    """Holo1 (Qwen2.5-VL based): ImagePixelSpace of the smart-resized image."""

    name = "holo1"
    navigation_prompt = NAVIGATION_PROMPT
    localization_prompt = LOCALIZATION_PROMPT
    navigation_tokens = NAVIGATION_TOKENS
    localization_tokens = LOCALIZATION_TOKENS
    answer_instruction = "Answer with the Note, Thought and Action lines."

    def _describe_step(self, step: PastStep) -> str:
        return describe_step(step)

    def parse_navigation(self, text: str, pointer: Point | None = None) -> ParsedStep:
        return run_parser(lambda raw: read_call_step(raw, HOLO1_TOOLS), text, self.name)

    def parse_localization(self, text: str) -> Point:
        return run_parser(read_click_point, text, self.name)
