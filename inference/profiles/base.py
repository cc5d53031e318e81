"""What a model profile is: prompt builder, output parser, coordinate convention and image budget.

A profile knows how one family of models wants to be asked and how it answers; backends know
only how to run a chat request. Messages use OpenAI-style content parts; an image part is the
placeholder `{"type": "image"}` and the images themselves travel in `ChatRequest.images`, in order,
so the in-process backend can hand them to the processor and the HTTP backend can encode them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from PIL import Image

from holodesk.automation.actions import Action, Point
from holodesk.automation.coords import FrameMapping, ModelSpace
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.policy import PastStep

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ImageBudget:
    """How many pixels and screenshots a request may carry.

    `max_tiles` is the processor's tile limit (512x512 tiles plus a thumbnail for Nemotron-VL);
    `images_per_request` bounds the images in one request; `keep_screenshots` is how many of the
    most recent screenshots the navigation prompt shows; `max_long_side` bounds the image sent
    (None: send the frame at full size). `drop_block` is how many of the oldest screenshots leave the
    prompt at once: 1 slides the window every step (each prompt differs from the last one early on,
    where the oldest screenshot turns into a placeholder); with more, the prompt shows between
    keep_screenshots - drop_block + 1 and keep_screenshots screenshots and only grows at its end for
    drop_block - 1 steps in a row, so an engine that keeps its state prefills only the new turn.
    """

    max_tiles: int = 12
    images_per_request: int = 4
    keep_screenshots: int = 3
    max_long_side: int | None = None
    drop_block: int = 1

    def __post_init__(self) -> None:
        if self.max_tiles < 1:
            raise ValueError(f"max_tiles must be at least 1, got {self.max_tiles}")
        if not 1 <= self.keep_screenshots <= self.images_per_request:
            raise ValueError(
                f"keep_screenshots must be between 1 and images_per_request ({self.images_per_request}),"
                f" got {self.keep_screenshots}"
            )
        if not 1 <= self.drop_block <= self.keep_screenshots:
            raise ValueError(
                f"drop_block must be between 1 and keep_screenshots ({self.keep_screenshots}), got {self.drop_block}"
            )
        if self.max_long_side is not None and self.max_long_side < 28:
            raise ValueError(f"max_long_side must be at least 28 pixels, got {self.max_long_side}")


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """A frame as the model will see it, and how that image maps back to the screen."""

    image: Image.Image
    mapping: FrameMapping


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A backend-neutral chat request built by a profile."""

    messages: list[Message]
    images: list[Image.Image] = field(default_factory=list)
    max_new_tokens: int = 512
    # JSON schema for structured output, where the profile has one and the backend supports it.
    response_schema: dict[str, Any] | None = None
    # Passed to the chat template (for example {"enable_thinking": False}).
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # Native tool calling (OpenAI `tools`, each {"type": "function", "function": {...}}), for a profile
    # whose model answers with `tool_calls`; empty for the profiles that ask for JSON in the text.
    tools: tuple[dict[str, Any], ...] = ()
    # OpenAI `tool_choice` with `tools`: "auto" lets the server's tool parser read the model's own
    # format; None leaves the field out.
    tool_choice: str | None = None

    def __post_init__(self) -> None:
        placeholders = sum(
            1
            for message in self.messages
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if part.get("type") == "image"
        )
        if placeholders != len(self.images):
            raise ValueError(f"request has {placeholders} image placeholders but {len(self.images)} images")


@dataclass(frozen=True, slots=True)
class ParsedStep:
    """A navigation answer turned into one action (model space), with the model's note and thought.

    `element` is the model's description of the target, when its vocabulary carries one.
    """

    action: Action
    note: str = ""
    thought: str = ""
    element: str = ""


class Profile(ABC):
    """A model family's prompt, parser, coordinate convention and image budget."""

    name: str
    space: ModelSpace
    budget: ImageBudget
    # Whether the in-process backend can run this family: its engine runs Holotron-12B's architecture
    # (Nemotron-H) only; every other family needs an OpenAI-compatible server.
    runs_in_process: ClassVar[bool] = False

    @abstractmethod
    def prepare_image(self, frame: ScreenFrame) -> PreparedImage:
        """Turn a captured frame into the image the model is shown (resized as the profile needs)."""

    @abstractmethod
    def navigation_request(
        self, task: str, history: Sequence[PastStep], images: Sequence[PreparedImage]
    ) -> ChatRequest:
        """Task + previous steps + the most recent screenshots (oldest first) -> a chat request."""

    @abstractmethod
    def localization_request(self, instruction: str, image: PreparedImage) -> ChatRequest:
        """One described element on one screenshot -> a chat request for one point."""

    @abstractmethod
    def parse_navigation(self, text: str, pointer: Point | None = None) -> ParsedStep:
        """The model's answer -> exactly one action in model space, or ParseError.

        `pointer` is where earlier steps left the pointer (model space), for a vocabulary whose
        tools start from it (Holotron's drag_to_desktop); None when unknown.
        """

    def retry_request(self, request: ChatRequest, answer: str, error: str) -> ChatRequest:
        """`request` asked again after the refused `answer`: the answer, then why it was refused.

        A profile whose model expects errors in another form overrides this.
        """
        refused = answer if len(answer) <= 4_000 else answer[:4_000] + "..."
        feedback = (
            f"Your answer could not be used: {error}\nNothing was done. Answer again with exactly one"
            " action, in the format described above."
        )
        return self._with_turns(request, refused, feedback)

    @staticmethod
    def _with_turns(request: ChatRequest, answer: str, feedback: str) -> ChatRequest:
        messages = [
            *request.messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": [{"type": "text", "text": feedback}]},
        ]
        return replace(request, messages=messages)

    @abstractmethod
    def parse_localization(self, text: str) -> Point:
        """The model's answer -> exactly one point in model space, or ParseError."""
