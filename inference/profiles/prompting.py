"""Building requests: prompt texts (data files), images sized for a model, and chat messages.

Prompt texts live in `assets/prompts/<name>.txt` (or `$HOLODESK_PROMPTS_DIR`) and use `${name}`
placeholders that the profile says it fills. Images are resized as the model's processor would
(Qwen2.5-VL's smart_resize, a long-side cap) and carry the `FrameMapping` back to the screen.
Messages use roles system/user/assistant and content parts text and `{"type": "image"}`, the
images travelling in `ChatRequest.images` in the same order.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any, NamedTuple

from PIL import Image

from holodesk.automation.coords import FrameMapping
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import InferenceError
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ImageBudget, Message, PreparedImage
from holodesk.inference.profiles.parsing import Call

# == prompt texts ===================================================================================

PROMPTS_DIR_ENV = "HOLODESK_PROMPTS_DIR"


class PromptError(InferenceError):
    """A prompt file is missing or unusable; the message names the file and what to do."""


def default_prompts_dir() -> Path:
    override = os.environ.get(PROMPTS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    # inference/profiles/prompting.py -> repository root -> assets/prompts
    return Path(__file__).resolve().parents[2] / "assets" / "prompts"


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """One prompt file's text, with the placeholders the profile will fill."""

    name: str
    path: Path
    text: str
    placeholders: frozenset[str]

    def render(self, **values: object) -> str:
        missing = self.placeholders - set(values)
        if missing:
            raise PromptError(f"prompt {self.path} needs values for: {', '.join(sorted(missing))}")
        return Template(self.text).substitute({key: str(value) for key, value in values.items()})


def load_prompt(name: str, provides: Collection[str] = (), directory: Path | None = None) -> PromptTemplate:
    """Read `<directory>/<name>.txt`; its placeholders must be among `provides`."""
    folder = directory if directory is not None else default_prompts_dir()
    path = folder / f"{name}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(
            f"prompt file {path} is missing: restore assets/prompts/{name}.txt from the Holodesk"
            f" sources, or point {PROMPTS_DIR_ENV} at a folder that has it"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"prompt file {path} cannot be read: {exc}") from None
    template = Template(text)
    if not template.is_valid():
        raise PromptError(f"prompt file {path} has a stray '$' (write $$ for a dollar sign)")
    placeholders = frozenset(template.get_identifiers())
    unknown = placeholders - set(provides)
    if unknown:
        offered = ", ".join(f"${{{key}}}" for key in sorted(provides)) or "none"
        raise PromptError(
            f"prompt file {path} uses {', '.join(sorted(unknown))}, which this profile does not fill"
            f" (it fills: {offered})"
        )
    if not text.strip():
        raise PromptError(f"prompt file {path} is empty")
    return PromptTemplate(name=name, path=path, text=text, placeholders=placeholders)


# == sizing frames for a model ======================================================================

# Qwen2.5-VL: 14-pixel patches merged 2x2, so sides are multiples of 28.
QWEN_FACTOR = 28
QWEN_MIN_PIXELS = 56 * 56
# The Qwen2-VL image processor's default upper bound (1280 merged patches, ~1 MP).
QWEN_MAX_PIXELS = 28 * 28 * 1280
QWEN_MAX_ASPECT_RATIO = 200


class ImageSize(NamedTuple):
    width: int
    height: int


def smart_resize(
    width: int,
    height: int,
    *,
    factor: int = QWEN_FACTOR,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> ImageSize:
    """The size Qwen2.5-VL's processor resizes an image to (same arithmetic as transformers').

    Both sides become multiples of `factor`, the area lands in [min_pixels, max_pixels] and the
    aspect ratio is kept as well as that allows. An image already at the returned size is left
    alone by the processor, which is why profiles resize to it themselves.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max(width, height) / min(width, height) > QWEN_MAX_ASPECT_RATIO:
        raise ValueError(f"aspect ratio of {width}x{height} exceeds {QWEN_MAX_ASPECT_RATIO}:1")
    if not factor * factor <= min_pixels <= max_pixels:
        raise ValueError(f"need {factor * factor} <= min_pixels ({min_pixels}) <= max_pixels ({max_pixels})")
    new_height = round(height / factor) * factor
    new_width = round(width / factor) * factor
    if new_height * new_width > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        new_height = max(factor, math.floor(height / beta / factor) * factor)
        new_width = max(factor, math.floor(width / beta / factor) * factor)
    elif new_height * new_width < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        new_height = math.ceil(height * beta / factor) * factor
        new_width = math.ceil(width * beta / factor) * factor
    return ImageSize(new_width, new_height)


def cap_long_side(width: int, height: int, max_long_side: int | None) -> ImageSize:
    """Scale (width, height) down so the longer side is at most `max_long_side`; never up."""
    if max_long_side is None or max(width, height) <= max_long_side:
        return ImageSize(width, height)
    scale = max_long_side / max(width, height)
    return ImageSize(max(1, round(width * scale)), max(1, round(height * scale)))


def prepare_at_size(frame: ScreenFrame, size: ImageSize) -> PreparedImage:
    """The frame as an RGB image of `size` (bicubic, as the Qwen processor resizes) and its mapping."""
    image = frame.to_image()
    if (image.width, image.height) != tuple(size):
        image = image.resize(tuple(size), Image.Resampling.BICUBIC)
    return PreparedImage(image=image, mapping=FrameMapping(frame.region, size.width, size.height))


# Pixel profiles refuse coordinates beyond this before any image is known; prepare_qwen_image
# guarantees no image it makes is larger, so the exact bound is left to FrameMapping.
MAX_PIXEL_SIDE = 16_384


def prepare_qwen_image(
    frame: ScreenFrame, max_long_side: int | None, min_pixels: int = QWEN_MIN_PIXELS, max_pixels: int = QWEN_MAX_PIXELS
) -> PreparedImage:
    """The frame resized as Qwen2.5-VL's processor would (after an optional long-side cap)."""
    capped = cap_long_side(frame.width, frame.height, max_long_side)
    size = smart_resize(capped.width, capped.height, min_pixels=min_pixels, max_pixels=max_pixels)
    if max(size) > MAX_PIXEL_SIDE:
        raise ValueError(f"resized image {size.width}x{size.height} is larger than {MAX_PIXEL_SIDE} pixels on a side")
    return prepare_at_size(frame, size)


# == chat messages and how actions are written ======================================================

IMAGE_PART: dict[str, str] = {"type": "image"}
# Bounds on what history adds to a prompt: the model needs the gist, not every word.
MAX_HISTORY_STEPS = 40
MAX_HISTORY_TEXT = 400


def text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def screenshots_shown(observations: int, budget: ImageBudget) -> int:
    """How many of the last `observations` screenshots a navigation prompt shows.

    The window's first screenshot is the earliest multiple of `drop_block` that leaves at most
    `keep_screenshots`: with drop_block 1 that is the last keep_screenshots, with more the window
    stays put while it fills up, then drops drop_block screenshots at once.
    """
    if observations < 1:
        raise ValueError("a navigation request needs at least the current screenshot")
    overflow = observations - budget.keep_screenshots
    first = max(0, -(-overflow // budget.drop_block) * budget.drop_block)
    return observations - first


def recent_images(images: Sequence[PreparedImage], budget: ImageBudget) -> list[PreparedImage]:
    """The last `keep_screenshots` images, oldest first; there must be at least the current one."""
    if not images:
        raise ValueError("a navigation request needs at least the current screenshot")
    return list(images)[-budget.keep_screenshots :]


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_HISTORY_TEXT else text[: MAX_HISTORY_TEXT - 3] + "..."


def render_history(
    history: Sequence[PastStep], describe: Callable[[PastStep], str], max_steps: int = MAX_HISTORY_STEPS
) -> str:
    """Earlier steps, numbered from 1, one action line each with its note, thought and result below."""
    if not history:
        return "(none yet: this is the first step)"
    shown = list(history)[-max_steps:]
    first = len(history) - len(shown) + 1
    lines = [f"({first - 1} earlier steps not shown)"] if first > 1 else []
    for number, step in enumerate(shown, start=first):
        lines.append(f"{number}. {describe(step)}")
        if step.note.strip():
            lines.append(f"   note: {_clip(step.note)}")
        if step.thought.strip():
            lines.append(f"   thought: {_clip(step.thought)}")
        if step.outcome.strip():  # skipped, corrected by the user, or failed
            lines.append(f"   result: {_clip(step.outcome)}")
        if step.result.strip():  # what the step gave back: how text went, "no visible change", a reply
            lines.append(f"   result: {_clip(step.result)}")
    return "\n".join(lines)


def navigation_messages(
    system: str,
    task: str,
    history_text: str,
    image_count: int,
    closing: str,
    image_wrap: tuple[str, str] | None = None,
) -> list[Message]:
    """System prompt, then one user turn: task, history, the screenshots (oldest first), closing line."""
    content: list[dict[str, Any]] = [
        text_part(f"Task: {task.strip()}\n\nPrevious steps:\n{history_text}\n\n"),
        text_part(
            "Current screen:\n"
            if image_count == 1
            else f"The last {image_count} screenshots, oldest first; the last one is the current screen:\n"
        ),
    ]
    for _ in range(image_count):
        if image_wrap:
            content.extend([text_part(image_wrap[0]), IMAGE_PART, text_part(image_wrap[1] + "\n")])
        else:
            content.append(IMAGE_PART)
    content.append(text_part(closing))
    return [{"role": "system", "content": system}, {"role": "user", "content": content}]


def localization_messages(prompt: str) -> list[Message]:
    """One user turn: the screenshot, then the instruction (the layout H Company's grounding uses)."""
    return [{"role": "user", "content": [IMAGE_PART, text_part(prompt)]}]


# -- writing actions in a vocabulary ---------------------------------------------------------------


def _literal(value: Any) -> str:
    # JSON escapes are valid Python string escapes, so extract.parse_call reads these back exactly.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, ensure_ascii=False)


def format_call(call: Call) -> str:
    """`name(positional, key=value)` with JSON-escaped literals."""
    parts = [_literal(value) for value in call.positional]
    parts.extend(f"{key}={_literal(value)}" for key, value in call.keywords.items())
    return f"{call.name}({', '.join(parts)})"


def format_json_action(call: Call, name_key: str) -> str:
    """`{"<name_key>": name, ...arguments}` on one line (keyword arguments only)."""
    if call.positional:
        raise ValueError("a JSON action has named arguments only")
    payload: dict[str, Any] = {name_key: call.name}
    for key, value in call.keywords.items():
        payload[key] = int(value) if isinstance(value, float) and value.is_integer() else value
    return json.dumps(payload, ensure_ascii=False)
