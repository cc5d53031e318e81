"""Errors of the inference layer, each specific enough to show a user as it is."""

from __future__ import annotations

from typing import Any

from holodesk.automation.proposal import UnusableProposal


class InferenceError(Exception):
    """Base of every error raised by the inference layer."""


class ParseError(InferenceError, UnusableProposal):
    """The model's answer could not be turned into exactly one valid action.

    `raw_text` is the model's full answer, kept so it can be logged and shown; nothing is executed.
    `timings` holds the backend's StepTimings once known, so a failed step is recorded with its cost.
    """

    def __init__(self, message: str, raw_text: str, timings: Any = None) -> None:
        UnusableProposal.__init__(self, message, raw_text, timings)


class BackendError(InferenceError):
    """The backend could not produce an answer (server error, timeout, out of memory...)."""


class ModelLoadError(InferenceError):
    """The checkpoint could not be found or loaded; the message says what to do."""
