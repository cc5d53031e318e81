"""Tool calls written into an answer's text: the one form both backends hand the profiles' parsers.

The remote backend writes the calls a server parsed (OpenAI `tool_calls`); the in-process engine writes
the calls it parsed from the model's own XML. Neither backend's code is needed to read the other's: this
module imports nothing of either, so the engine loads without the HTTP client or the OS keyring.
`read_tool_call_text` undoes it, for a profile that sends a refused answer's calls back to the model
as the model's own `tool_calls` rather than in this internal form.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


@dataclass(slots=True)
class ToolCallPiece:
    """One OpenAI tool call as it arrives: whole in a JSON answer, in fragments in a stream."""

    name: str = ""
    arguments: str = ""


def tool_call_text(calls: list[ToolCallPiece]) -> str:
    """Parsed tool calls, written into the answer's text for the profile's parser.

    Each becomes `<tool_call>{"type": "function", "function": {"name": ..., "arguments": ...}}</tool_call>`
    with the arguments exactly as the server (or the engine) wrote them (a JSON string, decoded by the parser, so a
    malformed one is refused there in words). Every "<" inside is escaped as JSON allows, so nothing the
    model wrote in an argument can close the block early.
    """
    blocks = []
    for call in calls:
        body = json.dumps({"type": "function", "function": {"name": call.name, "arguments": call.arguments}})
        blocks.append("<tool_call>" + body.replace("<", "\\u003c") + "</tool_call>")
    return "".join(blocks)


# A block as `tool_call_text` writes it: its "<" are escaped, so the block's own text holds none.
_WRITTEN_BLOCK = re.compile(r"<tool_call>([^<]*)</tool_call>")


def read_tool_call_text(text: str) -> tuple[str, list[ToolCallPiece]]:
    """(the text outside the calls, the calls) of an answer `tool_call_text` wrote the calls into.

    Only blocks of exactly the form `tool_call_text` writes are taken out; any other `<tool_call>` text
    (the model's own, which no parser read) stays in the text, as the model wrote it.
    """
    calls: list[ToolCallPiece] = []
    kept: list[str] = []
    position = 0
    for block in _WRITTEN_BLOCK.finditer(text):
        call = _written_call(block.group(1))
        if call is None:
            continue
        kept.append(text[position : block.start()])
        position = block.end()
        calls.append(call)
    kept.append(text[position:])
    return "".join(kept), calls


def _written_call(body: str) -> ToolCallPiece | None:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # text the model wrote itself may be anything
        return None
    if not isinstance(value, dict) or set(value) != {"type", "function"} or value["type"] != "function":
        return None
    function = value["function"]
    if not isinstance(function, dict) or set(function) != {"name", "arguments"}:
        return None
    name, arguments = function["name"], function["arguments"]
    if not isinstance(name, str) or not isinstance(arguments, str):
        return None
    return ToolCallPiece(name, arguments)
