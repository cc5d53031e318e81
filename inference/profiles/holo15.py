"""The `holo1.5` profile: flat JSON actions in pixels of the image after Qwen2.5-VL's smart_resize.

Localization answers `{"action": "click_absolute", "x": .., "y": ..}` as Holo1.5 was trained to.
Navigation uses the same flat style, one object per step:
`{"note": .., "thought": .., "action": "click_absolute", "x": .., "y": ..}`, with the small
vocabulary below (documented in assets/prompts/holo1_5_navigation.txt). Pixel coordinates are
checked against MAX_PIXEL_SIDE here and against the actual image by `FrameMapping.model_to_image`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from automation.actions import (
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
from automation.coords import ImagePixelSpace
from automation.screen import ScreenFrame
from inference.policy import PastStep
from inference.profiles.base import ChatRequest, ImageBudget, ParsedStep, PreparedImage, Profile
from inference.profiles.chat import (
    format_json_action,
    localization_messages,
    navigation_messages,
    recent_images,
    render_history,
)
from inference.profiles.extract import Call
from inference.profiles.guard import run_parser
from inference.profiles.images import MAX_PIXEL_SIDE, QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, prepare_qwen_image
from inference.profiles.json_points import read_json_point
from inference.profiles.json_steps import read_json_step
from inference.profiles.prompts import load_prompt
from inference.profiles.tools import (
    BUTTON,
    CLICKS,
    DIRECTION,
    OPTIONAL_X,
    OPTIONAL_Y,
    SCROLL_AMOUNT,
    SECONDS,
    Args,
    CoordinateRange,
    Kind,
    Param,
    Tool,
    ToolSet,
    X,
    Y,
    optional_point,
    point,
)

NAVIGATION_PROMPT = "holo1_5_navigation"
LOCALIZATION_PROMPT = "holo1_5_localization"
NAVIGATION_TOKENS = 512
LOCALIZATION_TOKENS = 64
CLICK_ABSOLUTE = "click_absolute"
IMAGE_PLACEHOLDERS = ("image_width", "image_height")


def _click(count: int) -> Any:
    def build(args: Args) -> Action:
        return Click(point(args), button=args.get("button", MouseButton.LEFT), count=args.get("clicks", count))

    return build


def _scroll(args: Args) -> Action:
    extra = {"amount": args["amount"]} if "amount" in args else {}
    return Scroll(args["direction"], at=optional_point(args, "scroll"), **extra)


HOLO15_TOOLS = ToolSet(
    [
        Tool(CLICK_ABSOLUTE, (X, Y, BUTTON, CLICKS), _click(1)),
        Tool("double_click_absolute", (X, Y, BUTTON), _click(2)),
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
            lambda args: Drag(
                Point(args["start_x"], args["start_y"]),
                Point(args["end_x"], args["end_y"]),
                button=args.get("button", MouseButton.LEFT),
            ),
        ),
        Tool(
            "write",
            (Param("content", Kind.TEXT, aliases=("text",)), OPTIONAL_X, OPTIONAL_Y),
            lambda args: TypeText(args["content"], at=optional_point(args, "write")),
            aliases=("type",),
        ),
        Tool("scroll", (DIRECTION, SCROLL_AMOUNT, OPTIONAL_X, OPTIONAL_Y), _scroll),
        Tool(
            "key",
            (Param("keys", Kind.KEYS, aliases=("key", "combination")),),
            lambda args: KeyCombo(args["keys"]),
            aliases=("press", "hotkey"),
        ),
        Tool("wait", (SECONDS,), lambda args: Wait(args["seconds"]) if "seconds" in args else Wait()),
        Tool(
            "answer",
            (Param("content", Kind.TEXT, required=False, aliases=("text", "answer")),),
            lambda args: Done(args.get("content", "")),
        ),
        Tool(
            "ask_user",
            (Param("question", Kind.TEXT, aliases=("content", "text")),),
            lambda args: AskUser(args["question"]),
        ),
    ],
    CoordinateRange(MAX_PIXEL_SIDE - 1),
)


def holo15_call(action: Action) -> Call:
    """An action in the Holo1.5 navigation vocabulary (for the history of earlier steps)."""
    match action:
        case Click(at=at, button=button, count=count):
            args: dict[str, Any] = {"x": at.x, "y": at.y}
            if button is not MouseButton.LEFT:
                args["button"] = button.value
            if count == 3:
                args["clicks"] = 3
            return Call("double_click_absolute" if count == 2 else CLICK_ABSOLUTE, (), args)
        case Move(to=to):
            return Call("move_absolute", (), {"x": to.x, "y": to.y})
        case Drag(start=start, end=end, button=button):
            args = {"start_x": start.x, "start_y": start.y, "end_x": end.x, "end_y": end.y}
            if button is not MouseButton.LEFT:
                args["button"] = button.value
            return Call("drag_absolute", (), args)
        case Scroll(direction=direction, amount=amount, at=at):
            args = {"direction": direction.value, "amount": amount}
            if at is not None:
                args.update(x=at.x, y=at.y)
            return Call("scroll", (), args)
        case TypeText(text=text, at=at):
            args = {"content": text}
            if at is not None:
                args.update(x=at.x, y=at.y)
            return Call("write", (), args)
        case KeyCombo(keys=keys):
            return Call("key", (), {"keys": "+".join(keys)})
        case Wait(seconds=seconds):
            return Call("wait", (), {"seconds": seconds})
        case Done(answer=answer):
            return Call("answer", (), {"content": answer})
        case AskUser(question=question):
            return Call("ask_user", (), {"question": question})
    raise ValueError(f"no Holo1.5 action for {action!r}")


def describe_step(step: PastStep) -> str:
    try:
        return format_json_action(holo15_call(step.action), "action")
    except ValueError:
        return step.action.describe()


_TEXT = {"type": "string"}


def navigation_schema(image_width: int, image_height: int) -> dict[str, Any]:
    """One flat step object per action, x and y bounded by the current image."""
    variants = HOLO15_TOOLS.variant_schemas(
        "action", extra={"note": _TEXT, "thought": _TEXT}, image_size=(image_width, image_height)
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


class Holo15Profile(Profile):
    """Holo1.5 (Qwen2.5-VL based): ImagePixelSpace of the smart-resized image."""

    name = "holo1.5"
    space = ImagePixelSpace()

    def __init__(
        self,
        budget: ImageBudget | None = None,
        *,
        min_pixels: int = QWEN_MIN_PIXELS,
        max_pixels: int = QWEN_MAX_PIXELS,
        prompts_dir: Path | None = None,
    ) -> None:
        self.budget = budget or ImageBudget()
        # Keep max_pixels at or below the processor's own, so its resize leaves our image as it is.
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self._navigation_prompt = load_prompt(NAVIGATION_PROMPT, IMAGE_PLACEHOLDERS, prompts_dir)
        self._localization_prompt = load_prompt(LOCALIZATION_PROMPT, ("target", *IMAGE_PLACEHOLDERS), prompts_dir)

    def prepare_image(self, frame: ScreenFrame) -> PreparedImage:
        return prepare_qwen_image(frame, self.budget.max_long_side, self.min_pixels, self.max_pixels)

    def navigation_request(
        self, task: str, history: Sequence[PastStep], images: Sequence[PreparedImage]
    ) -> ChatRequest:
        if not task.strip():
            raise ValueError("the task is empty")
        shown = recent_images(images, self.budget)
        width, height = shown[-1].mapping.image_width, shown[-1].mapping.image_height
        messages = navigation_messages(
            system=self._navigation_prompt.render(image_width=width, image_height=height),
            task=task,
            history_text=render_history(history, describe_step),
            image_count=len(shown),
            closing=(
                f"The current screenshot is {width}x{height} pixels. Answer with the JSON object for the next step."
            ),
        )
        return ChatRequest(
            messages=messages,
            images=[prepared.image for prepared in shown],
            max_new_tokens=NAVIGATION_TOKENS,
            response_schema=navigation_schema(width, height),
        )

    def localization_request(self, instruction: str, image: PreparedImage) -> ChatRequest:
        if not instruction.strip():
            raise ValueError("the element description is empty")
        width, height = image.mapping.image_width, image.mapping.image_height
        prompt = self._localization_prompt.render(target=instruction.strip(), image_width=width, image_height=height)
        return ChatRequest(
            messages=localization_messages(prompt),
            images=[image.image],
            max_new_tokens=LOCALIZATION_TOKENS,
            response_schema=localization_schema(width, height),
        )

    def parse_navigation(self, text: str) -> ParsedStep:
        return run_parser(lambda raw: read_json_step(raw, HOLO15_TOOLS), text, self.name)

    def parse_localization(self, text: str) -> Point:
        return run_parser(
            lambda raw: read_json_point(raw, HOLO15_TOOLS.coordinates, action_names=(CLICK_ABSOLUTE,)),
            text,
            self.name,
        )
