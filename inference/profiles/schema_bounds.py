"""How long the longest answer a structured-output schema allows can be, and what leaves it unbounded.

A server that constrains decoding to a JSON schema (vLLM's `response_format`) ends a string only at
its closing quote: a model that rambles, or random weights, writes until `max_tokens` and the cut
answer never parses. So every free value in a profile's schema carries a bound (a string's
`maxLength` or `enum`, a number's `maximum` and `multipleOf`, an array's `maxItems`, objects closed),
and the remote backend asks for as many tokens as the longest answer the schema allows, written
compactly, has UTF-8 bytes: a token of a byte-level BPE (Nemotron's, Qwen's) is at least one byte,
and a character at most four, so a constrained answer always ends before max_tokens. (A control character is
escaped as `\\u001f`, six bytes for one character: an answer made of them could still be cut.)
Against a real vLLM, random weights write exactly such worst cases (strings full of multi-byte
characters to their maxLength), which is how the four was found to matter.
"""

from __future__ import annotations

import json
from typing import Any

_LITERALS = {"boolean": len("false"), "null": len("null")}
UTF8_MAX_BYTES = 4  # the most bytes one character takes


class UnboundedSchemaError(ValueError):
    """A part of the schema has no length bound; the message names where."""


def unbounded_parts(schema: dict[str, Any], where: str = "$") -> list[str]:
    """Where `schema` leaves an answer's length open (JSON-path-like locations); empty when bounded."""
    found: list[str] = []
    if "anyOf" in schema:
        for index, variant in enumerate(schema["anyOf"]):
            found.extend(unbounded_parts(variant, f"{where}.anyOf[{index}]"))
        return found
    if "enum" in schema:
        return found
    kind = schema.get("type")
    if kind == "string":
        if "maxLength" not in schema:
            found.append(f"{where}: a string without maxLength")
    elif kind in ("integer", "number"):
        if "maximum" not in schema or ("minimum" not in schema and "exclusiveMinimum" not in schema):
            found.append(f"{where}: a number without minimum and maximum")
        elif kind == "number" and "multipleOf" not in schema:
            found.append(f"{where}: a number without multipleOf (its fraction's digits have no bound)")
    elif kind == "array":
        if "maxItems" not in schema:
            found.append(f"{where}: an array without maxItems")
        found.extend(unbounded_parts(schema.get("items", {}), f"{where}[]"))
    elif kind == "object":
        if schema.get("additionalProperties", True) is not False and "anyOf" not in schema:
            found.append(f"{where}: an object that allows other properties")
        for name, sub in schema.get("properties", {}).items():
            found.extend(unbounded_parts(sub, f"{where}.{name}"))
    elif kind not in _LITERALS:
        found.append(f"{where}: no type the bound can be read from ({kind!r})")
    return found


def longest_answer_bytes(schema: dict[str, Any]) -> int:
    """UTF-8 bytes of the longest compact JSON text `schema` allows (strings unescaped, 4 bytes a character).

    Raises UnboundedSchemaError, naming the places, when some part has no bound.
    """
    problems = unbounded_parts(schema)
    if problems:
        raise UnboundedSchemaError("; ".join(problems))
    return _longest(schema)


def _longest(schema: dict[str, Any]) -> int:
    if "anyOf" in schema:
        return max(_longest(variant) for variant in schema["anyOf"])
    if "enum" in schema:
        return max(len(json.dumps(value, ensure_ascii=False).encode("utf-8")) for value in schema["enum"])
    kind = schema["type"]
    if kind == "string":
        return UTF8_MAX_BYTES * int(schema["maxLength"]) + 2
    if kind in ("integer", "number"):
        low = schema["minimum"] if "minimum" in schema else schema["exclusiveMinimum"]  # one is there (checked)
        whole = max(len(str(int(low))), len(str(int(schema["maximum"]))))
        if kind == "integer":
            return whole
        _, _, fraction = repr(float(schema["multipleOf"])).partition(".")
        decimals = len(fraction.rstrip("0"))
        return whole + (1 + decimals if decimals else 0)
    if kind == "array":
        items = int(schema["maxItems"])
        return 2 + items * _longest(schema["items"]) + max(0, items - 1)
    if kind == "object":
        properties = schema.get("properties", {})
        members = [len(json.dumps(name)) + 1 + _longest(sub) for name, sub in properties.items()]
        return 2 + sum(members) + max(0, len(members) - 1)
    return _LITERALS[kind]
