"""Helpers for end-to-end tests: model answers aimed at real widgets, in the holotron profile's words."""

from __future__ import annotations

import json

from holodesk.automation.actions import Point
from holodesk.automation.coords import FrameMapping, NormalizedSpace, Rect


def model_point(screen: Point, monitor: Rect) -> Point:
    """Where a model looking at `monitor`'s full-size screenshot would say `screen` is (0-1000)."""
    mapping = FrameMapping(monitor, monitor.width, monitor.height)
    return mapping.screen_to_model(screen, NormalizedSpace())


def holotron(name: str, note: str = "", thought: str = "", **arguments: object) -> str:
    """One answer as Holotron would write it, with its reasoning before the JSON."""
    step = {"note": note, "thought": thought or f"next: {name}", "action": {"name": name, **arguments}}
    return f"<think>Looking at the screen.</think>\n```json\n{json.dumps(step, ensure_ascii=False)}\n```"
