"""Qwen3.5's own tool calls in the engine's answer, rewritten as the remote backend writes a server's parsed ones.

Asked with `tools`, a Qwen3.5 model (Holo3.1, Holo4) writes each call in its trained XML form:
`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...</function>\\n</tool_call>`.
Behind vLLM, the `qwen3_coder` tool parser turns that into OpenAI `tool_calls` and the remote backend
writes them into the answer's text as `<tool_call>{"type": "function", "function": {...}}</tool_call>`
(`holodesk.inference.tool_call_text`), which the holo profiles' parser reads. The engine has no server,
so this module does the parser's part, as vLLM 0.32's does it:

- one newline after `<parameter=KEY>` and one before `</parameter>` belong to the format, not the value;
- each value is typed by the declared tool's JSON schema for that parameter (vLLM's `_coerce`):
  integer, number (an integer where the text has no fraction), boolean, null, object or array as JSON;
  a string, an unknown type or a failed cast keeps the text;
- the arguments become one JSON object string (`ensure_ascii=False`, as vLLM writes them).

A block that does not have this shape is left as the model wrote it: the profile's parser then says
the call is still in the model's XML form, in words, as it does behind a server whose parser missed it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from holodesk.inference.tool_call_text import ToolCallPiece, tool_call_text

_BLOCK = re.compile(r"<tool_call>\s*<function=([^>\n]+)>\n?(.*?)</function>\s*</tool_call>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)


def _types(schema: object) -> tuple[str, ...]:
    if not isinstance(schema, dict):
        return ()
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else []
    if isinstance(declared, list):
        types.extend(t for t in declared if isinstance(t, str))
    for union in ("anyOf", "oneOf"):
        for choice in schema.get(union) or []:
            types.extend(_types(choice))
    return tuple(types)


def _typed(raw: str, types: tuple[str, ...]) -> object:
    for kind in types:
        try:
            if kind == "integer":
                return int(raw)
            if kind == "number":
                number = float(raw)
                if number != number or number in (float("inf"), float("-inf")):
                    continue
                return int(number) if number.is_integer() and "." not in raw else number
            if kind == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            if kind == "null" and raw.strip() in ("null", "None"):
                return None
            if kind in ("object", "array"):
                decoded = json.loads(raw)
                if isinstance(decoded, dict if kind == "object" else list):
                    return decoded
        except ValueError:
            continue
    return raw


def _properties(tools: Sequence[dict[str, Any]], name: str) -> dict[str, Any]:
    for tool in tools:
        function = tool.get("function")
        if isinstance(function, dict) and function.get("name") == name:
            parameters = function.get("parameters")
            if isinstance(parameters, dict) and isinstance(parameters.get("properties"), dict):
                return dict(parameters["properties"])
    return {}


def _value(text: str) -> str:
    text = text.removeprefix("\n")
    return text.removesuffix("\n")


def parsed_tool_calls(text: str, tools: Sequence[dict[str, Any]]) -> str:
    """`text` with every well-formed XML tool call replaced by the remote backend's JSON form of it."""

    def rewrite(block: re.Match[str]) -> str:
        name = block.group(1).strip()
        properties = _properties(tools, name)
        arguments = {
            key.strip(): _typed(_value(raw), _types(properties.get(key.strip())))
            for key, raw in _PARAMETER.findall(block.group(2))
        }
        return tool_call_text([ToolCallPiece(name, json.dumps(arguments, ensure_ascii=False))])

    return _BLOCK.sub(rewrite, text)
