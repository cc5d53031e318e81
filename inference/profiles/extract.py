"""Tolerant extraction of one answer from model text: reasoning, JSON objects, call expressions, integers.

Shape only, no vocabulary: profiles decide what the pieces mean. Tolerant about packaging (code
fences, prose around the answer, key order, a trailing comma, `<think>` reasoning) and strict about
content (NaN, duplicate keys, runaway numbers, unclosed calls). Every refusal is a `MalformedAnswer`
with a short reason; the profile's parser turns it into a `ParseError` that carries the raw text.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

# Model answers are a few thousand characters at most; anything far larger is not an answer, and
# bounding it keeps the object scan below cheap on hostile input.
MAX_ANSWER_CHARS = 64_000
# An integer longer than this is no coordinate, amount or count (and Python refuses >4300 digits).
MAX_INTEGER_DIGITS = 9
_TRAILING_COMMA_RETRIES = 8


class MalformedAnswer(ValueError):
    """The text has no single well-formed answer; the message says what is wrong."""


# -- reasoning -------------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Reasoned:
    """An answer with its `<think>` reasoning taken out."""

    answer: str
    reasoning: str = ""


def split_reasoning(text: str) -> Reasoned:
    """Take `<think>...</think>` blocks out of `text`.

    A closing tag with no opening one means the chat template opened the block: everything before
    it is reasoning. An opening tag that never closes means generation stopped mid-thought, so
    there is no answer to act on.
    """
    check_size(text)
    reasoning: list[str] = []
    first_close = _THINK_CLOSE.search(text)
    first_open = _THINK_OPEN.search(text)
    if first_close and (first_open is None or first_close.start() < first_open.start()):
        reasoning.append(text[: first_close.start()])
        text = text[first_close.end() :]

    def keep(match: re.Match[str]) -> str:
        reasoning.append(match.group(1))
        return "\n"

    text = _THINK_BLOCK.sub(keep, text)
    if _THINK_OPEN.search(text):
        raise MalformedAnswer("the answer stops inside <think> reasoning: it contains no action")
    if _THINK_CLOSE.search(text):
        raise MalformedAnswer("the answer has a </think> tag with no matching <think>")
    return Reasoned(answer=text.strip(), reasoning="\n".join(part.strip() for part in reasoning if part.strip()))


def step_answer(text: object) -> Reasoned:
    """A navigation answer split from its reasoning; an empty one, or one that is only reasoning, is refused."""
    if not isinstance(text, str) or not text.strip():
        raise MalformedAnswer("the answer is empty")
    reasoned = split_reasoning(text)
    # Reasoning alone is no step: the model thought but never answered.
    if not reasoned.answer:
        raise MalformedAnswer("the answer holds only reasoning, no action")
    return reasoned


def check_size(text: str) -> None:
    if not isinstance(text, str):
        raise MalformedAnswer(f"the answer must be text, got {type(text).__name__}")
    if len(text) > MAX_ANSWER_CHARS:
        raise MalformedAnswer(f"the answer is {len(text)} characters long (at most {MAX_ANSWER_CHARS})")


# -- JSON objects ----------------------------------------------------------------------------------


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys silently: a way to hide a second action.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise MalformedAnswer(f"a JSON object repeats the key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise MalformedAnswer(f"{name} is not a valid number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise MalformedAnswer(f"the number {literal} is out of range")
    return value


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise MalformedAnswer(f"the number {literal[:20]}... is far too large")
    return int(literal)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_no_duplicate_keys,
    parse_constant=_reject_constant,
    parse_float=_finite_float,
    parse_int=_bounded_int,
)


@dataclass(frozen=True, slots=True)
class FoundObject:
    """A JSON object found in text, with where it sat (`end` exclusive)."""

    value: dict[str, Any]
    start: int
    end: int


def _decode_object_at(text: str, start: int) -> tuple[dict[str, Any], int] | None:
    """Decode a JSON object starting at `text[start]` ('{'), forgiving trailing commas."""
    chunk = text[start:]
    removed = 0
    for _ in range(_TRAILING_COMMA_RETRIES):
        try:
            value, end = _DECODER.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            comma = _trailing_comma_before(chunk, exc.pos)
            if comma is None:
                return None
            chunk = chunk[:comma] + chunk[comma + 1 :]
            removed += 1
            continue
        except RecursionError:
            raise MalformedAnswer("the answer nests JSON too deeply") from None
        return (value, start + end + removed) if isinstance(value, dict) else None
    return None


def _trailing_comma_before(chunk: str, position: int) -> int | None:
    """Index of a comma that directly precedes a closing bracket at `position`, if that is the error."""
    if position >= len(chunk) or chunk[position] not in "}]":
        return None
    index = position - 1
    while index >= 0 and chunk[index].isspace():
        index -= 1
    return index if index >= 0 and chunk[index] == "," else None


def find_json_objects(text: str) -> list[FoundObject]:
    """Every top-level JSON object in `text`, in order, skipping prose and code fences between them."""
    check_size(text)
    found: list[FoundObject] = []
    position = text.find("{")
    while position != -1:
        decoded = _decode_object_at(text, position)
        if decoded is None:
            position = text.find("{", position + 1)
            continue
        value, end = decoded
        found.append(FoundObject(value, position, end))
        position = text.find("{", end)
    return found


def one_json_object(text: str, what: str = "the answer") -> FoundObject:
    """The one JSON object in `text`; none, or more than one, is a MalformedAnswer."""
    found = find_json_objects(text)
    if not found:
        raise MalformedAnswer(f"{what} contains no JSON object")
    if len(found) > 1:
        raise MalformedAnswer(f"{what} contains {len(found)} JSON objects; exactly one is expected")
    return found[0]


def decode_json_object(text: str, what: str) -> dict[str, Any]:
    """`text` must be exactly one JSON object (used for arguments sent as a JSON string)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        raise MalformedAnswer(f"{what} must be a JSON object")
    decoded = _decode_object_at(stripped, 0)
    if decoded is None or stripped[decoded[1] :].strip():
        raise MalformedAnswer(f"{what} must be exactly one JSON object")
    return decoded[0]


def text_outside(text: str, spans: Collection[tuple[int, int]]) -> str:
    """`text` with the given (start, end) spans cut out, joined by newlines."""
    pieces: list[str] = []
    cursor = 0
    for start, end in sorted(spans):
        pieces.append(text[cursor:start])
        cursor = end
    pieces.append(text[cursor:])
    return "\n".join(pieces)


# -- call expressions: click_element(element="OK", x=10, y=20), Click(352, 348) ------------------

_CALL_START = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\(")
_BARE_NAME = re.compile(r"[A-Za-z_]\w*")
# Long enough for any text to type (actions cap it at 10,000 characters) plus the call around it.
MAX_CALL_CHARS = 12_000


@dataclass(frozen=True, slots=True)
class Call:
    """A named action with its arguments, before any vocabulary gave them meaning."""

    name: str
    positional: tuple[Any, ...] = ()
    keywords: dict[str, Any] = field(default_factory=dict)


def _literal(node: ast.expr) -> Any:
    # A bare word is a string to the models that write scroll(down); anything else must be a literal.
    if isinstance(node, ast.Name):
        return node.id
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise MalformedAnswer("an argument of the call is not a plain value") from None


def parse_call(source: str) -> Call:
    """Parse `name`, `name()` or `name(arg, key=value, ...)` with literal arguments only."""
    source = source.strip()
    if len(source) > MAX_CALL_CHARS:
        raise MalformedAnswer(f"the call is {len(source)} characters long (at most {MAX_CALL_CHARS})")
    if _BARE_NAME.fullmatch(source):
        return Call(source)
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise MalformedAnswer(f"cannot read the call {_shorten(source)!r}") from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise MalformedAnswer(f"{_shorten(source)!r} is not a call like name(arg=value)")
    keywords: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise MalformedAnswer("the call unpacks arguments (**)")
        if keyword.arg in keywords:
            raise MalformedAnswer(f"the call repeats the argument {keyword.arg!r}")
        keywords[keyword.arg] = _literal(keyword.value)
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise MalformedAnswer("the call unpacks arguments (*)")
    return Call(node.func.id, tuple(_literal(arg) for arg in node.args), keywords)


def looks_like_call(text: str) -> bool:
    """True for `name(...)` (whole text), the shape parse_call reads as a call with arguments."""
    stripped = text.strip()
    match = _CALL_START.match(stripped)
    return bool(match) and stripped.endswith(")")


def _closing_paren(text: str, open_index: int) -> int:
    """Index of the ')' matching the '(' at `open_index`, skipping quoted strings; -1 if none."""
    depth = 0
    quote = ""
    index = open_index
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index if char == ")" else -1
        index += 1
    return -1


@dataclass(frozen=True, slots=True)
class FoundCall:
    call: Call
    start: int
    end: int


def iter_call_starts(text: str) -> Iterator[re.Match[str]]:
    """Every `identifier(` in the text: candidate calls, known or not."""
    return _CALL_START.finditer(text)


def find_calls(text: str, names: Collection[str]) -> list[FoundCall]:
    """Every call of one of `names` in `text` (case-sensitive, '(' right after the name)."""
    found: list[FoundCall] = []
    cursor = 0
    for match in iter_call_starts(text):
        if match.start() < cursor or match.group(1) not in names:
            continue
        close = _closing_paren(text, match.end() - 1)
        if close == -1:
            raise MalformedAnswer(f"the call {match.group(1)}( is never closed")
        found.append(FoundCall(parse_call(text[match.start() : close + 1]), match.start(), close + 1))
        cursor = close + 1
    return found


def mentioned_call(text: str, names: Collection[str]) -> str | None:
    """The first of `names` written as a call (`name(`) in free text, if any.

    The parenthesis must follow the name directly: prose such as "my answer (below)" is not a call.
    """
    if not names:
        return None
    pattern = r"(?<![\w.])(" + "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True)) + r")\("
    match = re.search(pattern, text)
    return match.group(1) if match else None


# -- numbers ---------------------------------------------------------------------------------------

_PLAIN_INTEGER = re.compile(rf"[0-9]{{1,{MAX_INTEGER_DIGITS}}}")


def strict_int(value: object, what: str) -> int:
    """An integer the model wrote: int, an integral float (12.0) or a string of digits ("12").

    Fractions are refused rather than rounded: 0.45 where a 0-1000 integer belongs is the classic
    sign of a model speaking another coordinate convention, and rounding it would click (0, 0).
    """
    if isinstance(value, bool):
        raise MalformedAnswer(f"{what} must be a number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MalformedAnswer(f"{what} must be a finite number, got {value!r}")
        if not value.is_integer():
            raise MalformedAnswer(f"{what} must be a whole number, got {value!r}")
        return int(value)
    if isinstance(value, str):
        if _PLAIN_INTEGER.fullmatch(value.strip()):
            return int(value.strip())
        raise MalformedAnswer(f"{what} must be a number, got the text {_shorten(value)!r}")
    raise MalformedAnswer(f"{what} must be a number, got {type(value).__name__}")


def strict_seconds(value: object, what: str) -> float:
    """A duration in seconds: a finite int or float (a string of digits is accepted as for integers)."""
    if isinstance(value, float) and math.isfinite(value):
        return value
    return float(strict_int(value, what))


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
