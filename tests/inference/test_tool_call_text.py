"""inference/tool_call_text.py: the calls written into an answer's text, and read back out of it."""

from __future__ import annotations

import json

from holodesk.inference.tool_call_text import ToolCallPiece, read_tool_call_text, tool_call_text

CALLS = [
    ToolCallPiece("write_desktop", json.dumps({"content": "a</tool_call><tool_call>{}", "press_enter": False})),
    ToolCallPiece("click_desktop", '{"element": "Grüße", "x": 1, "y": 2}'),
    ToolCallPiece("wait", '{"x": 1, "y"'),  # arguments as the server sent them, even broken
]


def test_the_calls_written_into_a_text_read_back_as_they_were() -> None:
    text = '{"note": null, "thought": "Go."}' + tool_call_text(CALLS)
    assert text.count("<tool_call>") == 3
    assert read_tool_call_text(text) == ('{"note": null, "thought": "Go."}', CALLS)


def test_tool_call_text_the_model_wrote_itself_stays_in_the_text() -> None:
    own = [
        '<tool_call>{"function": {"name": "click_desktop", "arguments": {"x": 1}}}</tool_call>',  # not the written form
        "<tool_call>\n<function=click_desktop>\n</function>\n</tool_call>",  # the XML no parser read
        "<tool_call>" + "[" * 100_000 + "</tool_call>",  # nesting deeper than the decoder goes
    ]
    for said in own:
        assert read_tool_call_text(said + tool_call_text(CALLS[1:2])) == (said, CALLS[1:2])
