"""Reading one step from a model that answers with a call, Holo1 style: `Click(352, 348)`.

The answer may carry `Note:` / `Thought:` / `Action:` lines, `<think>` reasoning, code fences and
prose. Exactly one call of a known action must appear (case-sensitive, the parenthesis right after
the name); a second one anywhere, an unknown call on the Action line, or a JSON object beside the
call is refused.
"""

from __future__ import annotations

import re

from holodesk.inference.profiles.base import ParsedStep
from holodesk.inference.profiles.extract import (
    FoundCall,
    MalformedAnswer,
    find_calls,
    find_json_objects,
    iter_call_starts,
    step_answer,
    text_outside,
)
from holodesk.inference.profiles.tools import ToolSet

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
