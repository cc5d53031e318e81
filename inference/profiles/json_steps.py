"""Reading one navigation step from a JSON-speaking model, whatever shape the step arrives in.

Accepted shapes (all may sit in a code fence, after `<think>` reasoning, amid prose):
- a step object `{"note", "thought", "action"}` whose action is an object tagged by name/tool_name/
  type/action (arguments flat or under "arguments"), a call string `click_element(x=1, y=2)`, or a
  bare name with the arguments as sibling fields (`{"action": "click_absolute", "x": 1, "y": 2}`);
  `"tool_call"` may stand for `"action"`;
- a bare tool call `{"name": ..., "arguments": {...}}` (OpenAI's `{"type": "function", ...}` too);
- `<tool_call>...</tool_call>` blocks, each one tool call; plan tools (update_plan) may accompany
  the single action; a step object beside them may carry note and thought but no action.
Exactly one action must result: a second object, a second action call, or an action named in the
prose outside the answer is refused.
"""

from __future__ import annotations

import re
from typing import Any

from holodesk.inference.profiles.base import ParsedStep
from holodesk.inference.profiles.extract import (
    Call,
    MalformedAnswer,
    decode_json_object,
    find_json_objects,
    looks_like_call,
    mentioned_call,
    one_json_object,
    parse_call,
    step_answer,
    text_outside,
)
from holodesk.inference.profiles.tools import ToolSet

NAME_KEYS = ("name", "tool_name", "action", "type")
ARGUMENT_KEYS = ("arguments", "args", "parameters", "params", "input")
STEP_ACTION_KEYS = ("action", "tool_call")
STEP_TEXT_KEYS = ("note", "thought")

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL | re.IGNORECASE)
_TOOL_CALL_TAG = re.compile(r"</?tool_call>", re.IGNORECASE)


def read_json_step(text: str, tools: ToolSet) -> ParsedStep:
    """The single action in `text`, or MalformedAnswer (ActionError passes through)."""
    reasoned = step_answer(text)
    answer = reasoned.answer
    if _TOOL_CALL_TAG.search(answer):
        calls, note, thought = _read_tool_call_blocks(answer, tools)
    else:
        found = find_json_objects(answer)
        if not found:
            raise MalformedAnswer("the answer contains no JSON object")
        if len(found) > 1:
            raise MalformedAnswer(f"the answer contains {len(found)} JSON objects; exactly one step is expected")
        _refuse_action_in_prose(text_outside(answer, [(found[0].start, found[0].end)]), tools)
        call, note, thought = read_step_object(found[0].value)
        if call is None:
            raise MalformedAnswer('the JSON object has no action (expected an "action" field)')
        calls = [call]
    meanings = [tools.interpret(call) for call in calls]
    actions = [meaning.action for meaning in meanings if meaning.action is not None]
    if not actions:
        raise MalformedAnswer("the answer only updates the plan; a step needs one action as well")
    if len(actions) > 1:
        raise MalformedAnswer(f"the answer holds {len(actions)} actions; exactly one is expected")
    # A plan (update_plan) is something to remember, which is what the note is for.
    note = "\n".join(part for part in (note, *(meaning.plan for meaning in meanings)) if part)
    return ParsedStep(action=actions[0], note=note, thought=thought or reasoned.reasoning)


def _read_tool_call_blocks(answer: str, tools: ToolSet) -> tuple[list[Call], str, str]:
    blocks = list(_TOOL_CALL_BLOCK.finditer(answer))
    outside = text_outside(answer, [(block.start(), block.end()) for block in blocks])
    if not blocks or _TOOL_CALL_TAG.search(outside):
        raise MalformedAnswer("a <tool_call> or </tool_call> tag is unmatched")
    calls = []
    for block in blocks:
        found = one_json_object(block.group(1), "a <tool_call> block")
        call, note, thought = read_step_object(found.value)
        if call is None or note or thought:
            raise MalformedAnswer("a <tool_call> block must hold one tool call")
        calls.append(call)
    note = thought = ""
    objects = find_json_objects(outside)
    if len(objects) > 1:
        raise MalformedAnswer("the text around the tool calls holds more than one JSON object")
    if objects:
        step = objects[0].value
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
