"""Text that reaches a model never becomes a control token: both backends neutralise it the same way.

A task, a tool's output or an element's description may hold a string that a model's tokenizer
reads as one of its control tokens: `<SPECIAL_12>` ends a turn for Holotron's tokenizer, `<image>`
opens an image slot, `<|im_end|>` ends a turn for Qwen's. vLLM's chat endpoint tokenizes such a
string inside user text as the control token itself (a task could end its own turn and write an
assistant turn), and it has no per-request setting to read it as text. So before a request goes to
either backend, every such string in the messages' text gets a zero-width space after its `<`: it
then reads as the same characters to a person, matches no control token, and tokenizes the same on
vLLM and in the engine (the same prompt ids on both, so the tiers can compare them).

The strings covered are the control-token shapes of the model families Holodesk runs: numbered
`<SPECIAL_n>`, ChatML-style `<|...|>`, and the named tags of Nemotron-VL's and Qwen-VL's
tokenizers. Other tag-shaped text (`<div>`, the prompts' own `<arguments>`) is left alone.
"""

from __future__ import annotations

import copy
import re

from holodesk.inference.profiles.base import Message

NEUTRALISER = "\u200b"  # ZERO WIDTH SPACE: invisible, and no tokenizer joins it into a control token
_NAMED = (
    "s",
    "unk",
    "pad",
    "image",
    "img",
    "video",
    "audio",
    "think",
    "tool_call",
    "tool_response",
    "box",
    "ref",
    "quad",
    "so_embedding",
    "so_start",
    "so_end",
)
CONTROL_SHAPE = re.compile(
    r"<(?=(?:SPECIAL_\d{1,6}|\|[^<>|\s]{1,64}\||/?(?:" + "|".join(_NAMED) + r"))>)",
)


def neutralise(text: str) -> str:
    """`text` with every control-token shape broken by a zero-width space after its `<` (idempotent)."""
    return CONTROL_SHAPE.sub("<" + NEUTRALISER, text)


def neutral_messages(messages: list[Message]) -> list[Message]:
    """A copy of `messages` whose every text (string content or text part, any role) is `neutralise`d."""
    result: list[Message] = []
    for message in messages:
        message = copy.deepcopy(message)
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = neutralise(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                    part["text"] = neutralise(part["text"])
        result.append(message)
    return result
