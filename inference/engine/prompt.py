"""A chat request -> the token ids the model reads, with each image's tokens in place.

The checkpoint's chat template renders the messages; each image part becomes one `<image>` in the
text, which is then replaced, in token space, by `<img>`, one `<image>` per image token
(tiles x 256), `</img>`. Text that came from the user, the task or a tool is first neutralised as the
remote backend neutralises it (`control_text`: "<SPECIAL_12>" gets a zero-width space after its
`<`), so both give the model the same ids. Any control string of this tokenizer that is left in a
text part (one the shared shapes miss) is still tokenized as plain text, never as an image slot or
an end of turn. The template's own markup is tokenized with its special tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

from holodesk.inference.control_text import neutral_messages
from holodesk.inference.errors import BackendError
from holodesk.inference.profiles.base import ChatRequest

IMAGE = "<image>"
IMAGE_START = "<img>"
IMAGE_END = "</img>"


class Tokenizer(Protocol):
    """The slice of a Hugging Face fast tokenizer this module uses."""

    all_special_tokens: list[str]

    def apply_chat_template(self, conversation: list[dict[str, object]], **kwargs: object) -> str: ...

    def convert_tokens_to_ids(self, tokens: str) -> int: ...

    def get_added_vocab(self) -> dict[str, int]: ...

    def __call__(self, text: str, **kwargs: object) -> dict[str, list[int]]: ...


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """The prompt's ids, and for each image where its image tokens begin (in order)."""

    ids: list[int]
    image_starts: list[int]
    image_token_counts: list[int]


def _control_strings(tokenizer: Tokenizer) -> list[str]:
    return sorted(set(tokenizer.all_special_tokens) | set(tokenizer.get_added_vocab()), key=len, reverse=True)


def _user_texts(request: ChatRequest) -> list[str]:
    texts: list[str] = []
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(part.get("text", "")) for part in content if part.get("type") == "text")
    return texts


def _encode(tokenizer: Tokenizer, text: str, *, trusted: bool) -> list[int]:
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=not trusted)["input_ids"])


def tokenize_request(tokenizer: Tokenizer, request: ChatRequest, image_token_counts: list[int]) -> PromptTokens:
    """Render and tokenize `request`; `image_token_counts[i]` is the number of image tokens of image i."""
    # The same neutralised text as the remote backend sends (control_text): the same ids as vLLM.
    request = dataclasses.replace(request, messages=neutral_messages(request.messages))
    rendered = tokenizer.apply_chat_template(
        request.messages, tokenize=False, add_generation_prompt=True, **request.chat_template_kwargs
    )
    controls = _control_strings(tokenizer)
    # Cut the rendered prompt around every text part that contains a control string, so that exactly
    # those characters are tokenized as plain text. Texts without one tokenize the same either way.
    pieces: list[tuple[str, bool]] = []
    cursor = 0
    for text in _user_texts(request):
        if not any(control in text for control in controls):
            continue
        core = text.strip()
        at = rendered.find(core, cursor)
        if at < 0:
            raise BackendError(
                "a text part holds a control token of the model and could not be located in the rendered prompt"
                " to escape it; nothing was sent to the model"
            )
        pieces += [(rendered[cursor:at], True), (core, False)]
        cursor = at + len(core)
    pieces.append((rendered[cursor:], True))

    image_id = tokenizer.convert_tokens_to_ids(IMAGE)
    start_id = tokenizer.convert_tokens_to_ids(IMAGE_START)
    end_id = tokenizer.convert_tokens_to_ids(IMAGE_END)
    ids: list[int] = []
    starts: list[int] = []
    for text, trusted in pieces:
        for token in _encode(tokenizer, text, trusted=trusted):
            if trusted and token == image_id:
                if len(starts) == len(image_token_counts):
                    raise BackendError(f"the prompt has more image slots than the {len(image_token_counts)} images")
                ids.append(start_id)
                starts.append(len(ids))
                ids.extend([image_id] * image_token_counts[len(starts) - 1])
                ids.append(end_id)
            else:
                ids.append(token)
    if len(starts) != len(image_token_counts):
        raise BackendError(f"the prompt has {len(starts)} image slots for {len(image_token_counts)} images")
    return PromptTokens(ids=ids, image_starts=starts, image_token_counts=list(image_token_counts))
