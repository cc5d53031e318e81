"""The contract between policies and backends: run one chat request, return text and timings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest


@dataclass(frozen=True, slots=True)
class Generation:
    """The model's answer to one request."""

    text: str
    timings: StepTimings


@runtime_checkable
class TextGenerator(Protocol):
    """A backend: the in-process transformers model or an OpenAI-compatible server."""

    def generate(self, request: ChatRequest) -> Generation: ...
