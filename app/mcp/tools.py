"""The tools `holodesk mcp` offers: names, descriptions an agent can act on, and JSON schemas."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from holodesk.app.mcp.act_arguments import ACT_KINDS, COORDINATE_KINDS, MAX_REASON_CHARS
from holodesk.automation.actions import MAX_SCROLL_AMOUNT, MAX_TEXT_LENGTH, MAX_WAIT_SECONDS

SCREENSHOT = "screenshot"
LOCATE = "locate"
ACT = "act"
LIST_ROUTINES = "list_routines"
RUN_ROUTINE = "run_routine"
RUN_TASK = "run_task"
MAX_DESCRIPTION_CHARS = 500  # locate's description

_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

_ACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACT_KINDS), "description": "what to do"},
        "x": {
            "type": "integer",
            "description": "target x (click, double_click, drag start; optional for type, scroll)",
        },
        "y": {"type": "integer", "description": "target y"},
        "to_x": {"type": "integer", "description": "drag: where to release, x"},
        "to_y": {"type": "integer", "description": "drag: where to release, y"},
        "coordinates": {
            "type": "string",
            "enum": list(COORDINATE_KINDS),
            "default": "pixels",
            "description": "pixels of the last screenshot (0,0 top-left), or normalized 0-1000 of its width/height",
        },
        "button": {"type": "string", "enum": ["left", "right", "middle"], "default": "left"},
        "text": {"type": "string", "maxLength": MAX_TEXT_LENGTH, "description": "type: the text to type"},
        "press_enter": {"type": "boolean", "default": False, "description": "type: press Enter after the text"},
        "overwrite": {"type": "boolean", "default": False, "description": "type: select all first, type over it"},
        "keys": {"type": "string", "description": "key: a combination such as ctrl+shift+t, enter, alt+tab"},
        "direction": {"type": "string", "enum": ["up", "down", "left", "right"], "description": "scroll"},
        "amount": {"type": "integer", "minimum": 1, "maximum": MAX_SCROLL_AMOUNT, "default": 3},
        "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_WAIT_SECONDS, "default": 1},
        "reason": {
            "type": "string",
            "maxLength": MAX_REASON_CHARS,
            "description": "why, in one sentence: shown to the person who approves the step",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

TOOLS: list[types.Tool] = [
    types.Tool(
        name=SCREENSHOT,
        description=(
            "Take a screenshot of the monitor Holodesk works on (Holodesk's own windows hidden). Returns a PNG"
            " and its size in physical pixels and the monitor's scale. act's pixel coordinates refer to it."
        ),
        input_schema=_NO_ARGUMENTS,
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name=ACT,
        description=(
            "Ask the person at this computer to approve one desktop action, and perform it only if they do."
            " The action is drawn on the screen and described on Holodesk's approval panel; the person"
            " approves, edits, skips or stops it, and this call waits for them. A skipped or stopped step"
            " returns an error saying nothing was done: do not repeat it without a reason the person can see."
            " Coordinates are pixels of the last screenshot (or normalized 0-1000). One step at a time."
        ),
        input_schema=_ACT_SCHEMA,
        annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=True),
    ),
    types.Tool(
        name=LOCATE,
        description=(
            "Find an element on the screen from a description, with Holodesk's own model (the one run_task"
            " uses). Returns its point in the pixels of a screenshot taken now (act's pixel coordinates)."
            " Read-only: nothing is shown to the person and nothing is done."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "maxLength": MAX_DESCRIPTION_CHARS,
                    "description": "the element, in words",
                }
            },
            "required": ["description"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name=LIST_ROUTINES,
        description="List the routines the person saved in Holodesk (name, steps, parameters). Read-only.",
        input_schema=_NO_ARGUMENTS,
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name=RUN_TASK,
        description=(
            "Hand a whole task to Holodesk's own agent (its own vision model): it works step by step, each"
            " step approved by the person on Holodesk's panel, and sends progress notifications (the step,"
            " the proposal, waiting for approval, done). Returns how the task ended and its session."
            " One task or step at a time."
        ),
        input_schema={
            "type": "object",
            "properties": {"task": {"type": "string", "maxLength": 2000, "description": "what to do, in words"}},
            "required": ["task"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=True),
    ),
    types.Tool(
        name=RUN_ROUTINE,
        description=(
            "Replay a routine the person saved (list_routines names them), with values for its parameters."
            " Each step is shown on Holodesk's approval panel and runs only when the person approves it;"
            " the call returns when the routine has ended, saying how (done, or stopped, skipped, failed)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "the routine's name"},
                "values": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "parameter name -> value (a parameter left out uses its default)",
                },
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=True),
    ),
]
