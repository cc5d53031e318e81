"""What the two Qwen2.5-VL based profiles (holo1, holo1.5) share: smart-resized images and requests sized to them.

Both models answer in pixels of the image after Qwen2.5-VL's smart_resize, so both prompts are
told that image's width and height and both requests are built the same way. A subclass names its
prompts, token budgets and closing instruction as class attributes, and says how it writes earlier
steps and which JSON schemas (if any) constrain its answers; it parses answers itself.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest, ImageBudget, PreparedImage, Profile
from holodesk.inference.profiles.prompting import (
    QWEN_MAX_PIXELS,
    QWEN_MIN_PIXELS,
    load_prompt,
    localization_messages,
    navigation_messages,
    prepare_qwen_image,
    recent_images,
    render_history,
)

IMAGE_PLACEHOLDERS = ("image_width", "image_height")


class QwenPixelProfile(Profile):
    """A Qwen2.5-VL based profile: ImagePixelSpace of the smart-resized image."""

    space = ImagePixelSpace()
    navigation_prompt: ClassVar[str]
    localization_prompt: ClassVar[str]
    navigation_tokens: ClassVar[int]
    localization_tokens: ClassVar[int]
    # What the navigation request's last line asks for, after it gives the screenshot's size.
    answer_instruction: ClassVar[str]

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
        self._navigation_prompt = load_prompt(self.navigation_prompt, IMAGE_PLACEHOLDERS, prompts_dir)
        self._localization_prompt = load_prompt(self.localization_prompt, ("target", *IMAGE_PLACEHOLDERS), prompts_dir)

    @abstractmethod
    def _describe_step(self, step: PastStep) -> str:
        """An earlier step's action as this profile's vocabulary writes it."""

    def _navigation_schema(self, image_width: int, image_height: int) -> dict[str, Any] | None:
        """The JSON schema of a navigation answer for this image size; None where answers are free text."""
        return None

    def _localization_schema(self, image_width: int, image_height: int) -> dict[str, Any] | None:
        """The JSON schema of a localization answer for this image size; None where answers are free text."""
        return None

    def prepare_image(self, frame: ScreenFrame) -> PreparedImage:
        return prepare_qwen_image(frame, self.budget.max_long_side, self.min_pixels, self.max_pixels)

    def navigation_request(
        self, task: str, history: Sequence[PastStep], images: Sequence[PreparedImage]
    ) -> ChatRequest:
        if not task.strip():
            raise ValueError("the task is empty")
        shown = recent_images(images, self.budget)
        # Coordinates are pixels of the current (last) screenshot, so its size is the one to give.
        width, height = shown[-1].mapping.image_width, shown[-1].mapping.image_height
        messages = navigation_messages(
            system=self._navigation_prompt.render(image_width=width, image_height=height),
            task=task,
            history_text=render_history(history, self._describe_step),
            image_count=len(shown),
            closing=f"The current screenshot is {width}x{height} pixels. {self.answer_instruction}",
        )
        return ChatRequest(
            messages=messages,
            images=[prepared.image for prepared in shown],
            max_new_tokens=self.navigation_tokens,
            response_schema=self._navigation_schema(width, height),
        )

    def localization_request(self, instruction: str, image: PreparedImage) -> ChatRequest:
        if not instruction.strip():
            raise ValueError("the element description is empty")
        width, height = image.mapping.image_width, image.mapping.image_height
        prompt = self._localization_prompt.render(target=instruction.strip(), image_width=width, image_height=height)
        return ChatRequest(
            messages=localization_messages(prompt),
            images=[image.image],
            max_new_tokens=self.localization_tokens,
            response_schema=self._localization_schema(width, height),
        )
