"""Building chat messages: content parts, the history of earlier steps, and how actions are written.

Shared by every profile so the layout rules hold everywhere: images are `{"type": "image"}`
placeholders in the same order as `ChatRequest.images`, only the most recent screenshots are sent,
and earlier steps appear as text in the profile's own vocabulary.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ImageBudget, Message, PreparedImage
from holodesk.inference.profiles.extract import Call

IMAGE_PART: dict[str, str] = {"type": "image"}
# Bounds on what history adds to a prompt: the model needs the gist, not every word.
MAX_HISTORY_STEPS = 40
MAX_HISTORY_TEXT = 400


def text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


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
    """Earlier steps, numbered from 1, one action line each with its note and thought below."""
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
