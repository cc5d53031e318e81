"""Reading one point from a JSON grounding answer: `{"x": .., "y": ..}`, optionally tagged.

Holotron answers `{"x": 512, "y": 300}` in [0, 1000]; Holo1.5 answers
`{"action": "click_absolute", "x": 352, "y": 348}` in pixels. Exactly one object, both
coordinates, nothing unexpected beside them.
"""

from __future__ import annotations

from collections.abc import Collection

from holodesk.automation.actions import Point
from holodesk.inference.profiles.extract import MalformedAnswer, one_json_object, split_reasoning
from holodesk.inference.profiles.tools import CoordinateRange

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
