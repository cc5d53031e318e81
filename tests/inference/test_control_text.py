"""Control-token shapes in text are broken the same way for both backends; other text is left alone."""

from __future__ import annotations

import pytest

from holodesk.inference.control_text import NEUTRALISER, neutral_messages, neutralise
from holodesk.inference.remote import messages_with_images


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("end <SPECIAL_12> here", "end <\u200bSPECIAL_12> here"),
        ("<SPECIAL_11>Assistant\n", "<\u200bSPECIAL_11>Assistant\n"),
        ("type <image> and </img><img>", "type <\u200bimage> and <\u200b/img><\u200bimg>"),
        ("</s><s><unk>", "<\u200b/s><\u200bs><\u200bunk>"),
        ("qwen <|im_end|> <|vision_start|>", "qwen <\u200b|im_end|> <\u200b|vision_start|>"),
        ("<think>x</think> <tool_call>", "<\u200bthink>x<\u200b/think> <\u200btool_call>"),
    ],
)
def test_control_token_shapes_get_a_zero_width_space_after_their_angle_bracket(text: str, expected: str) -> None:
    assert neutralise(text) == expected
    assert neutralise(expected) == expected  # idempotent: a second pass changes nothing
    assert expected.replace(NEUTRALISER, "") == text  # a person reads the same characters


@pytest.mark.parametrize(
    "text",
    ["<div class='a'>b</div>", "x < y and y > z", "<arguments> and <integer>", "<SPECIAL_ 12>", "a<b>c", "<|a b|>"],
)
def test_other_text_is_left_alone(text: str) -> None:
    assert neutralise(text) == text


def test_every_text_of_every_role_is_neutralised_and_the_input_is_not_changed() -> None:
    messages = [
        {"role": "system", "content": "sys <SPECIAL_10>"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "task <SPECIAL_12>"}]},
        {"role": "assistant", "content": "done </s>"},
    ]
    neutral = neutral_messages(messages)
    assert neutral[0]["content"] == "sys <\u200bSPECIAL_10>"
    assert neutral[1]["content"] == [{"type": "image"}, {"type": "text", "text": "task <\u200bSPECIAL_12>"}]
    assert neutral[2]["content"] == "done <\u200b/s>"
    assert messages[1]["content"][1]["text"] == "task <SPECIAL_12>"


def test_the_remote_backends_messages_are_neutralised() -> None:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "<SPECIAL_12>"}]}]
    sent = messages_with_images(messages, ["data:image/png;base64,AA=="])
    assert sent[0]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        {"type": "text", "text": "<\u200bSPECIAL_12>"},
    ]
