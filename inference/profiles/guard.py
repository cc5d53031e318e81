"""The boundary between parsing and the rest of the app: every refusal becomes a ParseError.

Inside the parsers a bad answer is a `MalformedAnswer` (shape) or an `ActionError` (an action
constructor refused a value); callers only ever see `ParseError` with the model's raw text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from holodesk.automation.errors import ActionError
from holodesk.inference.errors import ParseError
from holodesk.inference.profiles.extract import MalformedAnswer

T = TypeVar("T")


def run_parser(parse: Callable[[str], T], raw_text: str, profile: str) -> T:
    """`parse(raw_text)`, with MalformedAnswer and ActionError turned into ParseError(raw_text)."""
    try:
        return parse(raw_text)
    except (MalformedAnswer, ActionError) as exc:
        raise ParseError(f"{profile}: {exc}", raw_text if isinstance(raw_text, str) else repr(raw_text)) from exc
