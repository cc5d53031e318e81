"""Tool calls written into an answer's text: the one form both backends hand the profiles' parsers.

The remote backend writes the calls a server parsed (OpenAI `tool_calls`); the in-process engine writes
the calls it parsed from the model's own XML. Neither backend's code is needed to read the other's: this
module imports nothing of either, so the engine loads without the HTTP client or the OS keyring.
"""

from __future__ import annotations

import json
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
