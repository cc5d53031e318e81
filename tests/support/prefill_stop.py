"""The engines' shared promise, checked the same way for each family: a stop lands between prefill chunks.

A first step on a CPU prefills for tens of seconds, so the cancel check must be asked before each chunk,
not only between decoded tokens; and nothing of the stopped prompt may be kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import pytest
from torch import nn

from holodesk.inference.engine.kept_state import GenerationCancelled
from holodesk.inference.engine.runner import EngineResult
from holodesk.inference.profiles.base import ChatRequest


class ChunkedEngine(Protocol):
    """What the check needs of an engine (runner.Engine and Qwen35Engine both are one)."""

    prefill_chunk: int

    def forget(self) -> None: ...

    def generate(self, request: ChatRequest, *, cancelled: Callable[[], bool] | None = None) -> EngineResult: ...


def assert_a_stop_lands_at_the_next_prefill_chunk(
    engine: ChunkedEngine, language_model: nn.Module, request: ChatRequest
) -> None:
    """Cancelled after two of the prompt's chunks (counted on `language_model`, the module each chunk runs
    through): GenerationCancelled "during the prefill" with exactly two chunks run, and the next request
    prefills from scratch and answers with the tokens of an undisturbed one."""
    answered = engine.generate(request)
    assert len(answered.prompt_ids) > 4 * engine.prefill_chunk  # stopping after two leaves most undone
    engine.forget()
    chunks: list[int] = []
    hook = language_model.register_forward_pre_hook(lambda module, args: chunks.append(1))
    try:
        with pytest.raises(GenerationCancelled, match="during the prefill"):
            engine.generate(request, cancelled=lambda: len(chunks) >= 2)
    finally:
        hook.remove()
    assert len(chunks) == 2
    again = engine.generate(request)
    assert again.reused_tokens == 0 and again.new_ids == answered.new_ids
