"""The `holotron` profile (default): H Company's JSON step with x, y in [0, 1000] of the image shown.

Navigation answers one object per step, `{"note", "thought", "action": {"name": ..., ...}}`, in
the vocabulary of `holotron_tools`; the parser also reads the other shapes H Company's harnesses
use (see `json_steps`). Localization answers `{"x": .., "y": ..}`. Images go at full size (the
Nemotron processor tiles them itself) unless the budget caps the long side.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from holodesk.automation.actions import Point
from holodesk.automation.coords import NORMALIZED_MAX, NormalizedSpace
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest, ImageBudget, ParsedStep, PreparedImage, Profile
from holodesk.inference.profiles.chat import (
    format_json_action,
    localization_messages,
    navigation_messages,
    recent_images,
    render_history,
)
from holodesk.inference.profiles.guard import run_parser
from holodesk.inference.profiles.holotron_tools import HOLOTRON_TOOLS, holotron_call
from holodesk.inference.profiles.images import cap_long_side, prepare_at_size
from holodesk.inference.profiles.json_points import read_json_point
from holodesk.inference.profiles.json_steps import read_json_step
from holodesk.inference.profiles.prompts import load_prompt

NAVIGATION_PROMPT = "holotron_navigation"
LOCALIZATION_PROMPT = "holotron_localization"
# A step is a short JSON object; with reasoning on, the <think> block comes first and is long.
NAVIGATION_TOKENS = 512
NAVIGATION_TOKENS_THINKING = 4096
LOCALIZATION_TOKENS = 64
# Nemotron-Nano-VL's chat template turns reasoning on when the system message carries /think.
THINK_FLAG = "/think"

_TEXT = {"type": "string"}


def navigation_schema() -> dict[str, Any]:
    """JSON schema of one navigation step, for structured output (vLLM `guided_json`/`structured_outputs`)."""
    return {
        "type": "object",
        "properties": {
            "note": _TEXT,
            "thought": _TEXT,
            "action": {"anyOf": HOLOTRON_TOOLS.variant_schemas("name")},
        },
        "required": ["note", "thought", "action"],
        "additionalProperties": False,
    }


def localization_schema() -> dict[str, Any]:
    coordinate = {"type": "integer", "minimum": 0, "maximum": NORMALIZED_MAX}
    return {
        "type": "object",
        "properties": {"x": coordinate, "y": coordinate},
        "required": ["x", "y"],
        "additionalProperties": False,
    }


def describe_step(step: PastStep) -> str:
    """An earlier step's action as the JSON action object the prompt teaches."""
    try:
        return format_json_action(holotron_call(step.action), "name")
    except ValueError:
        return step.action.describe()


class HolotronProfile(Profile):
    """Holotron-12B (and H Company's JSON-step models): NormalizedSpace, [0, 1000]."""

    name = "holotron"
    space = NormalizedSpace(NORMALIZED_MAX)

    def __init__(self, budget: ImageBudget | None = None, *, think: bool = False, prompts_dir: Path | None = None):
        self.budget = budget or ImageBudget()
        self.think = think
        self._navigation_prompt = load_prompt(NAVIGATION_PROMPT, directory=prompts_dir)
        self._localization_prompt = load_prompt(LOCALIZATION_PROMPT, ("target",), directory=prompts_dir)

    def prepare_image(self, frame: ScreenFrame) -> PreparedImage:
        return prepare_at_size(frame, cap_long_side(frame.width, frame.height, self.budget.max_long_side))

    def navigation_request(
        self, task: str, history: Sequence[PastStep], images: Sequence[PreparedImage]
    ) -> ChatRequest:
        if not task.strip():
            raise ValueError("the task is empty")
        shown = recent_images(images, self.budget)
        system = self._navigation_prompt.render()
        if self.think:
            system = f"{THINK_FLAG}\n{system}"
        messages = navigation_messages(
            system=system,
            task=task,
            history_text=render_history(history, describe_step),
            image_count=len(shown),
            closing="Answer with the JSON object for the next step.",
            image_wrap=("<observation>", "</observation>"),
        )
        return ChatRequest(
            messages=messages,
            images=[prepared.image for prepared in shown],
            max_new_tokens=NAVIGATION_TOKENS_THINKING if self.think else NAVIGATION_TOKENS,
            response_schema=navigation_schema(),
        )

    def localization_request(self, instruction: str, image: PreparedImage) -> ChatRequest:
        if not instruction.strip():
            raise ValueError("the element description is empty")
        prompt = self._localization_prompt.render(target=instruction.strip())
        return ChatRequest(
            messages=localization_messages(prompt),
            images=[image.image],
            max_new_tokens=LOCALIZATION_TOKENS,
            response_schema=localization_schema(),
        )

    def parse_navigation(self, text: str) -> ParsedStep:
        return run_parser(lambda raw: read_json_step(raw, HOLOTRON_TOOLS), text, self.name)

    def parse_localization(self, text: str) -> Point:
        return run_parser(lambda raw: read_json_point(raw, HOLOTRON_TOOLS.coordinates), text, self.name)
