"""Every structured-output schema is bounded, and its longest answer fits the request's token budget.

A grammar-constrained server (vLLM) can end a string only at its closing quote: an unbounded one lets
a rambling model write until max_tokens, and the cut answer never parses. The vLLM tier shows the
same against a real server; here, the arithmetic for every profile and request kind.
"""

from __future__ import annotations

import pytest

from holodesk.inference.profiles import PROFILE_NAMES, get_profile
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.profiles.schema_bounds import UnboundedSchemaError, longest_answer_bytes, unbounded_parts
from tests.inference.profiles.test_registry import frame


def requests(name: str) -> list[ChatRequest]:
    profile = get_profile(name)
    image = profile.prepare_image(frame(1920, 1080))
    return [profile.navigation_request("Open the mail", [], [image]), profile.localization_request("the inbox", image)]


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_schema_is_bounded_and_its_longest_answer_fits_a_context(name: str) -> None:
    from holodesk.inference.remote import max_tokens_for

    for request in requests(name):
        if request.response_schema is None:
            continue  # this profile's answers are free text: nothing constrains them
        assert unbounded_parts(request.response_schema) == []
        # What the remote backend asks for: at least the profile's budget, and the longest answer.
        sent = max_tokens_for(request, with_schema=True)
        assert sent == max(request.max_new_tokens, longest_answer_bytes(request.response_schema))
        # It counts against the server's context with the screenshots (doctor checks the sum): a few thousand,
        # and with reasoning on (the holo3/holo4 profiles) the 4,096 H Company's API allows an answer.
        assert sent <= (4096 if request.chat_template_kwargs.get("enable_thinking") else 3072)


def test_the_holotron_schema_is_measured_not_guessed() -> None:
    """The measure follows the schema: write_at_desktop's longest answer, written out in 4-byte characters,
    has exactly that many bytes."""
    import json

    from holodesk.inference.profiles.holotron import navigation_schema

    variant = next(
        v for v in navigation_schema()["properties"]["tool_call"]["anyOf"]
        if v["properties"]["tool_name"]["enum"] == ["write_at_desktop"]
    )  # fmt: skip
    props = variant["properties"]
    longest = {
        "tool_name": "write_at_desktop",
        "content": "\N{GRINNING FACE}" * props["content"]["maxLength"],
        "element": "\N{GRINNING FACE}" * props["element"]["maxLength"],
        "x": 1000,
        "y": 1000,
        "press_enter": False,
        "overwrite": False,
    }
    assert list(longest) == list(props)
    written = json.dumps(longest, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert longest_answer_bytes(variant) == len(written)


def test_a_number_counts_its_sign_whole_digits_and_fraction() -> None:
    assert longest_answer_bytes({"type": "number", "minimum": 0.1, "maximum": 60, "multipleOf": 0.1}) == len("59.9")
    assert longest_answer_bytes({"type": "number", "minimum": -5, "maximum": 3, "multipleOf": 0.25}) == len("-4.75")
    assert longest_answer_bytes({"type": "integer", "minimum": -100, "maximum": 7}) == len("-100")
    assert longest_answer_bytes({"type": "string", "maxLength": 3}) == len('"') * 2 + 3 * 4


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "string"}, "$: a string without maxLength"),
        ({"type": "number", "minimum": 0, "maximum": 60}, "$: a number without multipleOf"),
        ({"type": "integer", "minimum": 0}, "$: a number without minimum and maximum"),
        ({"type": "array", "items": {"type": "boolean"}}, "$: an array without maxItems"),
        ({"type": "object", "properties": {}}, "$: an object that allows other properties"),
        (
            {"type": "object", "properties": {"a": {"anyOf": [{"type": "null"}, {"type": "string"}]}},
             "additionalProperties": False},
            "$.a.anyOf[1]: a string without maxLength",
        ),
    ],
)  # fmt: skip
def test_each_unbounded_part_is_named(schema: dict, where: str) -> None:
    with pytest.raises(UnboundedSchemaError, match=where.replace("[", r"\[").replace("]", r"\]").replace("$", r"\$")):
        longest_answer_bytes(schema)
