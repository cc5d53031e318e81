"""The one interface the engine uses to ask a model for the next step, whatever runs the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from automation.actions import Action
from automation.screen import ScreenFrame


@dataclass(frozen=True, slots=True)
class StepTimings:
    """Where a step's model time went. Seconds; token counts as the backend reports them."""

    preprocess_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    total_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0

    def to_dict(self) -> dict[str, float | int]:
        return {
            "preprocess_s": self.preprocess_s,
            "prefill_s": self.prefill_s,
            "decode_s": self.decode_s,
            "total_s": self.total_s,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
        }


@dataclass(frozen=True, slots=True)
class PastStep:
    """One earlier step as the prompt shows it: what was done and why (model space)."""

    action: Action
    note: str = ""
    thought: str = ""


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the model proposes: an action in model space, with the text it came from.

    `image_width`/`image_height` are the size of the image the action's coordinates refer to
    (the last frame as the profile prepared it), so the engine can map it to the screen.
    """

    action: Action
    raw_text: str
    image_width: int
    image_height: int
    note: str = ""
    thought: str = ""
    timings: StepTimings = field(default_factory=StepTimings)


@runtime_checkable
class Policy(Protocol):
    """Anything that proposes the next action. Both backends and the scripted test policy implement it.

    `frames` are the most recent screenshots, oldest first; the last one is the current screen.
    A malformed answer raises `inference.errors.ParseError` carrying the raw text.
    """

    def propose(self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame]) -> Proposal: ...
