"""Reading model answers: the text around an answer, then one step or one point out of it.

Shape first, meaning second. The first part is tolerant extraction with no vocabulary: `<think>`
reasoning, JSON objects, call expressions and integers, tolerant about packaging (code fences,
prose, key order, a trailing comma) and strict about content (NaN, duplicate keys, runaway numbers,
unclosed calls). Then the step readers: a JSON step in any of the shapes H Company's harnesses use
(`read_json_step`), a Holo1 call step (`read_call_step`) and a grounding point (`read_json_point`);
a `ToolSet` (`vocabulary`) gives the calls their meaning. Inside, a bad answer is a
`MalformedAnswer`; `run_parser` turns it (and an action constructor's ActionError) into the
ParseError callers see, with the model's raw text.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from holodesk.automation.actions import Point, UpdatePlan
from holodesk.automation.errors import ActionError
from holodesk.inference.errors import ParseError
from holodesk.inference.profiles.base import ParsedStep

if TYPE_CHECKING:
    from holodesk.inference.profiles.vocabulary import CoordinateRange, ToolSet


# == extraction: reasoning, JSON objects, calls, numbers ============================================

# Model answers are a few thousand characters at most; anything far larger is not an answer, and
# bounding it keeps the object scan below cheap on hostile input.
MAX_ANSWER_CHARS = 64_000
# An integer longer than this is no coordinate, amount or count (and Python refuses >4300 digits).
MAX_INTEGER_DIGITS = 9
_TRAILING_COMMA_RETRIES = 8
# A step nests four or five levels deep; far deeper is no answer (and would exhaust the decoder's stack).
MAX_JSON_DEPTH = 64


class MalformedAnswer(ValueError):
    """The text has no single well-formed answer; the message says what is wrong."""


# -- reasoning -------------------------------------------------------------------------------------

_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)


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
    # One pass over the tags (linear in the text, whatever the tags): a block runs from an opening
    # tag to the next closing one; an opening tag inside a block is part of its reasoning.
    reasoning: list[str] = []
    answer: list[str] = []
    cursor = 0
    opened: int | None = None
    for number, tag in enumerate(_THINK_TAG.finditer(text)):
        closing = bool(tag.group(1))
        if opened is None and not closing:
            answer.append(text[cursor : tag.start()])
            opened = tag.end()
        elif opened is not None and closing:
            reasoning.append(text[opened : tag.start()])
            answer.append("\n")
            opened, cursor = None, tag.end()
        elif opened is None and closing:
            if number > 0:
                raise MalformedAnswer("the answer has a </think> tag with no matching <think>")
            # A first closing tag with no opening one: the chat template opened the block.
            reasoning.append(text[: tag.start()])
            cursor = tag.end()
    if opened is not None:
        raise MalformedAnswer("the answer stops inside <think> reasoning: it contains no action")
    answer.append(text[cursor:])
    return Reasoned(
        answer="".join(answer).strip(), reasoning="\n".join(part.strip() for part in reasoning if part.strip())
    )


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


def _object_extent(text: str, start: int) -> int:
    """End (exclusive) of the brace-balanced span opening at `text[start]` ('{'), reading JSON
    strings as JSON does; -1 when it never closes. Linear in the span."""
    depth = 0
    in_string = False
    index = start
    length = len(text)
    while index < length:
        char = text[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise MalformedAnswer("the answer nests JSON too deeply")
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return -1


def _decode_object_at(text: str, start: int, end: int | None = None) -> tuple[dict[str, Any], int] | None:
    """Decode a JSON object starting at `text[start]` ('{') and ending by `end`, forgiving trailing commas."""
    chunk = text[start:end]
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
    """Every top-level JSON object in `text`, in order, skipping prose and code fences between them.

    A span in braces that is not valid JSON is skipped whole: the objects inside a broken step are
    never taken for an answer (an unclosed one hides the rest of the text). Linear in the text.
    """
    check_size(text)
    found: list[FoundObject] = []
    position = text.find("{")
    while position != -1:
        extent = _object_extent(text, position)
        if extent == -1:
            break  # never closes: whatever follows is inside a broken object
        decoded = _decode_object_at(text, position, extent)
        if decoded is None:
            position = text.find("{", extent)
            continue
        value, end = decoded
        found.append(FoundObject(value, position, end))
        position = text.find("{", end)
    return found


_JSON_LIKE = re.compile(r"\{\s*[\"']")  # an object with a quoted key: meant as JSON, not prose in braces


def broken_json_objects(text: str) -> list[str]:
    """What is wrong with each span of `text` that was meant as a JSON object but is not one.

    A span counts when it opens like an object with a key (`{"`); prose in braces (`{curly}`) does
    not. A step next to a broken or cut-off one must not be taken for the answer: the model's
    answer was not what it meant, whichever part the parser could read.
    """
    check_size(text)
    problems: list[str] = []
    position = text.find("{")
    while position != -1:
        extent = _object_extent(text, position)
        json_like = _JSON_LIKE.match(text, position) is not None
        if extent == -1:
            if json_like:
                problems.append(f"a JSON object at character {position} is cut off (it never closes)")
            break
        if json_like and _decode_object_at(text, position, extent) is None:
            problems.append(f"the JSON object at character {position} is not valid JSON")
        position = text.find("{", extent)
    return problems


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
    if not stripped.startswith("{") or len(stripped) > MAX_ANSWER_CHARS:
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
_INTEGER_BOUND = 10**MAX_INTEGER_DIGITS


def strict_int(value: object, what: str) -> int:
    """An integer the model wrote: int, an integral float (12.0) or a string of digits ("12").

    Fractions are refused rather than rounded: 0.45 where a 0-1000 integer belongs is the classic
    sign of a model speaking another coordinate convention, and rounding it would click (0, 0).
    """
    if isinstance(value, bool):
        raise MalformedAnswer(f"{what} must be a number, got {value!r}")
    if isinstance(value, int):
        # A runaway number is refused here, before any arithmetic (float() of it would overflow).
        if abs(value) >= _INTEGER_BOUND:
            raise MalformedAnswer(f"{what} is far too large ({_shorten(str(value), 20)})")
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


# == the boundary: every refusal becomes a ParseError ===============================================

T = TypeVar("T")


def run_parser(parse: Callable[[str], T], raw_text: str, profile: str) -> T:
    """`parse(raw_text)`, with MalformedAnswer and ActionError turned into ParseError(raw_text)."""
    try:
        return parse(raw_text)
    except (MalformedAnswer, ActionError) as exc:
        raise ParseError(f"{profile}: {exc}", raw_text if isinstance(raw_text, str) else repr(raw_text)) from exc


# == one point from a JSON grounding answer =========================================================

# Descriptions a model may add beside the point; they must be text and are not used.
LABEL_KEYS = frozenset({"element", "thought"})


def read_json_point(
    text: str, coordinates: CoordinateRange, action_names: Collection[str] = (), action_key: str = "action"
) -> Point:
    """The point in `text`. With `action_names`, an `action_key` field, if present, must be one of them."""
    if not isinstance(text, str) or not text.strip():
        raise MalformedAnswer("the answer is empty")
    answer = split_reasoning(text).answer
    value = one_json_object(answer).value
    if action_names and action_key in value and value[action_key] not in action_names:
        expected = " or ".join(repr(name) for name in action_names)
        raise MalformedAnswer(f"the answer's {action_key} is {value[action_key]!r}, expected {expected}")
    allowed = {"x", "y"} | LABEL_KEYS | ({action_key} if action_names else set())
    unexpected = set(value) - allowed
    if unexpected:
        raise MalformedAnswer(f"unexpected fields in the point: {', '.join(sorted(unexpected))[:80]}")
    for key in LABEL_KEYS & set(value):
        if not isinstance(value[key], str):
            raise MalformedAnswer(f'"{key}" must be text')
    for axis in ("x", "y"):
        if value.get(axis) is None:
            raise MalformedAnswer(f"the point has no {axis}")
    return Point(coordinates.check(value["x"], "x"), coordinates.check(value["y"], "y"))


# == one step from a JSON-speaking model, whatever its shape ========================================

NAME_KEYS = ("name", "tool_name", "action", "type")
# A tool's name: letters, digits and underscores. A control character or anything else is refused.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ARGUMENT_KEYS = ("arguments", "args", "parameters", "params", "input")
STEP_ACTION_KEYS = ("action", "tool_call")
STEP_TEXT_KEYS = ("note", "thought")

_TOOL_CALL_TAG = re.compile(r"<(/?)tool_call>", re.IGNORECASE)


def _tool_call_blocks(answer: str) -> list[tuple[int, int, str]]:
    """(start, end, inner text) of each `<tool_call>...</tool_call>` block; an unmatched tag is refused."""
    blocks: list[tuple[int, int, str]] = []
    opened: re.Match[str] | None = None
    for tag in _TOOL_CALL_TAG.finditer(answer):
        closing = bool(tag.group(1))
        if closing == (opened is None):  # a second opening tag, or a closing one with none open
            raise MalformedAnswer("a <tool_call> or </tool_call> tag is unmatched")
        if closing:
            assert opened is not None
            blocks.append((opened.start(), tag.end(), answer[opened.end() : tag.start()]))
            opened = None
        else:
            opened = tag
    if opened is not None or not blocks:
        raise MalformedAnswer("a <tool_call> or </tool_call> tag is unmatched")
    return blocks


def read_json_step(text: str, tools: ToolSet, context: Mapping[str, Any] | None = None) -> ParsedStep:
    """The single action in `text`, or MalformedAnswer (ActionError passes through).

    `context` is what earlier steps established, for the tools that need it (`ToolSet.interpret`).
    """
    reasoned = step_answer(text)
    answer = reasoned.answer
    if _TOOL_CALL_TAG.search(answer):
        calls, note, thought = _read_tool_call_blocks(answer, tools)
    else:
        found = find_json_objects(answer)
        broken = broken_json_objects(answer)
        if found and broken:
            raise MalformedAnswer(f"{broken[0]}, next to a complete one: exactly one complete step is expected")
        if not found:
            raise MalformedAnswer("the answer contains no JSON object")
        if len(found) > 1:
            raise MalformedAnswer(f"the answer contains {len(found)} JSON objects; exactly one step is expected")
        _refuse_action_in_prose(text_outside(answer, [(found[0].start, found[0].end)]), tools)
        call, note, thought = read_step_object(found[0].value)
        if call is None:
            raise MalformedAnswer('the JSON object has no action (expected an "action" field)')
        calls = [call]
    meanings = [tools.interpret(call, context) for call in calls]
    plans = [meaning.plan for meaning in meanings if meaning.action is None]
    acting = [meaning for meaning in meanings if meaning.action is not None]
    if len(acting) > 1:
        # A plan may accompany the one action (<tool_call> blocks): it is remembered in the note.
        plans.extend(m.action.listing() for m in acting if isinstance(m.action, UpdatePlan))
        acting = [m for m in acting if not isinstance(m.action, UpdatePlan)]
    if not acting:
        raise MalformedAnswer("the answer only updates the plan; a step needs one action as well")
    if len(acting) > 1:
        raise MalformedAnswer(f"the answer holds {len(acting)} actions; exactly one is expected")
    meaning = acting[0]
    assert meaning.action is not None
    note = "\n".join(part for part in (note, *plans) if part)
    return ParsedStep(action=meaning.action, note=note, thought=thought or reasoned.reasoning, element=meaning.element)


def _read_tool_call_blocks(answer: str, tools: ToolSet) -> tuple[list[Call], str, str]:
    blocks = _tool_call_blocks(answer)
    outside = text_outside(answer, [(start, end) for start, end, _ in blocks])
    calls = []
    for _, _, inner in blocks:
        found = one_json_object(inner, "a <tool_call> block")
        call, note, thought = read_step_object(found.value)
        if call is None or note or thought:
            raise MalformedAnswer("a <tool_call> block must hold one tool call")
        calls.append(call)
    note = thought = ""
    objects = find_json_objects(outside)
    if len(objects) > 1:
        raise MalformedAnswer("the text around the tool calls holds more than one JSON object")
    if objects:
        # {"note": ..., "thought": ..., "tool_call": null}: the step object's own shape with its action
        # left empty (the holo prompts' examples show that shape), so it holds no action of its own.
        step = {
            key: value for key, value in objects[0].value.items() if not (key in STEP_ACTION_KEYS and value is None)
        }
        if set(step) - set(STEP_TEXT_KEYS):
            raise MalformedAnswer("the text around the tool calls holds another action")
        _, note, thought = read_step_object(step)
        outside = text_outside(outside, [(objects[0].start, objects[0].end)])
    _refuse_action_in_prose(outside, tools)
    return calls, note, thought


def _refuse_action_in_prose(prose: str, tools: ToolSet) -> None:
    name = mentioned_call(prose, tools.names)
    if name is not None:
        raise MalformedAnswer(f"the text outside the answer calls {name}(...) as well: one action is expected")


def _text_field(step: dict[str, Any], key: str) -> str:
    value = step.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedAnswer(f'"{key}" must be text, got {type(value).__name__}')
    return value.strip()


def read_step_object(obj: dict[str, Any]) -> tuple[Call | None, str, str]:
    """(call, note, thought) from a step object or a bare tool call object; call None if only text."""
    note, thought = _text_field(obj, "note"), _text_field(obj, "thought")
    rest = {key: value for key, value in obj.items() if key not in STEP_TEXT_KEYS}
    if not rest:
        return None, note, thought
    present = [key for key in STEP_ACTION_KEYS if key in rest]
    if len(present) > 1:
        raise MalformedAnswer('the step has both "action" and "tool_call": one action is expected')
    if present and not (present == ["action"] and _is_flat_call_object(rest)):
        key = present[0]
        value = rest.pop(key)
        return _call_from_value(value, rest, key), note, thought
    return call_from_object(rest), note, thought


def _is_flat_call_object(obj: dict[str, Any]) -> bool:
    # {"action": "click", "arguments": {...}}: "action" names the tool of a tool call object.
    return isinstance(obj.get("action"), str) and any(key in obj for key in ARGUMENT_KEYS)


def _call_from_value(value: Any, siblings: dict[str, Any], key: str) -> Call:
    if isinstance(value, dict):
        if siblings:
            raise MalformedAnswer(f"unexpected fields beside {key!r}: {', '.join(sorted(siblings))[:80]}")
        return call_from_object(value)
    if isinstance(value, str):
        if looks_like_call(value):
            if siblings:
                raise MalformedAnswer(f"unexpected fields beside the call in {key!r}")
            return parse_call(value)
        return Call(value.strip(), (), siblings)
    if isinstance(value, list):
        raise MalformedAnswer(f'"{key}" holds a list of {len(value)}; exactly one action is expected')
    raise MalformedAnswer(f'"{key}" must be an action object or name, got {type(value).__name__}')


def call_from_object(obj: dict[str, Any]) -> Call:
    """A tool call object: a name under one naming key, arguments flat or under one arguments key."""
    function = obj.get("function")
    if isinstance(function, dict):
        if set(obj) - {"function", "type", "id"} or obj.get("type", "function") != "function":
            raise MalformedAnswer("unexpected fields beside a function call")
        obj = function
    names = [key for key in NAME_KEYS if key in obj]
    if not names:
        raise MalformedAnswer("the action has no name (expected a name, tool_name or action field)")
    if len(names) > 1:
        raise MalformedAnswer(f"the action is named twice ({', '.join(names)}); one name is expected")
    name = obj[names[0]]
    if not isinstance(name, str) or not name.strip():
        raise MalformedAnswer(f"the action name must be text, got {name!r}")
    if "(" in name:
        raise MalformedAnswer("the action name must be a name, not a call")
    if not _PLAIN_NAME.fullmatch(name.strip(" ")):
        raise MalformedAnswer(f"the action name {name[:60]!r} is not a plain name")
    rest = {key: value for key, value in obj.items() if key not in (names[0], "id")}
    containers = [key for key in ARGUMENT_KEYS if key in rest]
    if len(containers) > 1:
        raise MalformedAnswer(f"the action has arguments twice ({', '.join(containers)})")
    if not containers:
        return Call(name.strip(), (), rest)
    container = containers[0]
    if len(rest) > 1:
        raise MalformedAnswer(f"the action mixes {container!r} with other fields")
    arguments = rest[container]
    if arguments is None:
        arguments = {}
    elif isinstance(arguments, str):
        # OpenAI-style tool calls carry their arguments as a JSON string.
        arguments = decode_json_object(arguments, f"the {container} of {name.strip()}") if arguments.strip() else {}
    if not isinstance(arguments, dict):
        raise MalformedAnswer(f"the {container} of {name.strip()} must be an object")
    return Call(name.strip(), (), arguments)


# == one step from a model that answers with a call, Holo1 style: Click(352, 348) ===================

_SECTION = re.compile(r"^[ \t>*#-]*(note|thought|action)[ \t*]*:[ \t*]*", re.IGNORECASE | re.MULTILINE)


def _sections(text: str) -> dict[str, tuple[int, int]]:
    """Where each `Note:`/`Thought:`/`Action:` section's text lies (the last one of a name wins)."""
    headers = list(_SECTION.finditer(text))
    spans: dict[str, tuple[int, int]] = {}
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        spans[header.group(1).lower()] = (header.end(), end)
    return spans


def _clean(text: str) -> str:
    return text.strip().strip("`").strip()


def find_single_call(answer: str, tools: ToolSet) -> FoundCall:
    """The one known call in `answer` (reasoning already removed), or MalformedAnswer."""
    calls = find_calls(answer, tools.names)
    sections = _sections(answer)
    action_span = sections.get("action")
    if not calls:
        region = answer[action_span[0] : action_span[1]] if action_span else answer
        unknown = next(iter_call_starts(region), None)
        if unknown is not None:
            known = ", ".join(tool.name for tool in tools.documented)
            raise MalformedAnswer(f"unknown action {unknown.group(1)!r} (known: {known})")
        raise MalformedAnswer("the answer contains no action call")
    if len(calls) > 1:
        names = ", ".join(found.call.name for found in calls)
        raise MalformedAnswer(f"the answer holds {len(calls)} action calls ({names}); exactly one is expected")
    found = calls[0]
    if action_span is not None:
        start, end = action_span
        for match in iter_call_starts(answer[start:end]):
            if not found.start <= start + match.start() < found.end:
                raise MalformedAnswer(f"the Action line calls {match.group(1)!r}, which is not a known action")
    if find_json_objects(text_outside(answer, [(found.start, found.end)])):
        raise MalformedAnswer("the answer mixes a JSON object with the action call; one call is expected")
    return found


def read_call_step(text: str, tools: ToolSet) -> ParsedStep:
    """The single action in `text` with its note and thought (reasoning when there is no thought)."""
    reasoned = step_answer(text)
    answer = reasoned.answer
    found = find_single_call(answer, tools)
    meaning = tools.interpret(found.call)
    if meaning.action is None:
        raise MalformedAnswer(f"{found.call.name} is not an action")
    sections = _sections(answer)
    note_span, thought_span = sections.get("note"), sections.get("thought")
    note = _clean(answer[note_span[0] : note_span[1]]) if note_span else ""
    thought = _clean(answer[thought_span[0] : thought_span[1]]) if thought_span else ""
    return ParsedStep(action=meaning.action, note=note, thought=thought or reasoned.reasoning)
