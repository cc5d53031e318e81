"""Whether a server's context holds the longest request a task sends, measured by the server itself.

A step's prompt grows with the task: the system prompt, one turn per earlier step, and up to
`keep_screenshots` screenshots (three by default; a 1920x1080 screen is 13 tiles of 256 tokens for
Nemotron's processor). vLLM refuses a request whose prompt plus `max_tokens` exceeds its
`--max-model-len` with HTTP 400, mid-task. So before a task, build the request of its last step (the
given screen size, `max_steps - 1` earlier steps of a typical size, every screenshot the profile keeps),
let the server count its tokens (POST /tokenize), add what the answer may take, and compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest, Profile
from holodesk.inference.remote import RemoteBackend, max_tokens_for

# One earlier step as the prompt shows it: a click with a sentence of reasoning and a result line.
TYPICAL_STEP = PastStep(
    Click(Point(512, 384)),
    note="The search field is at the top of the window.",
    thought="The inbox lists the unread mails first; the first one is from Anna, so I open it.",
    element="the first unread mail in the inbox list",
    result="clicked; the screen changed",
)
CONTEXT_ROUNDING = 4096  # a --max-model-len to suggest: the need rounded up to this


@dataclass(frozen=True, slots=True)
class ContextNeed:
    """The last step's prompt as the server counted it, and what its answer may take."""

    prompt_tokens: int
    answer_tokens: int
    images: int
    screen: tuple[int, int]
    steps: int

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.answer_tokens

    def suggested_max_model_len(self) -> int:
        """A --max-model-len with room for this need: rounded up to a multiple of 4096."""
        return -(-self.total // CONTEXT_ROUNDING) * CONTEXT_ROUNDING


def last_step_request(profile: Profile, screen: tuple[int, int], max_steps: int) -> ChatRequest:
    """The request of a task's last step: `max_steps - 1` typical earlier steps and every screenshot kept."""
    width, height = screen
    frame = ScreenFrame(
        pixels=np.zeros((height, width, 4), np.uint8),
        region=Rect(0, 0, width, height),
        monitor=None,
        monitors=(),
        captured_at=0.0,
    )
    history = [TYPICAL_STEP] * max(0, max_steps - 1)
    images = [profile.prepare_image(frame)] * min(max_steps, profile.budget.keep_screenshots)
    return profile.navigation_request("Archive every unread newsletter in the mail app.", history, images)


def measure_context_need(
    backend: RemoteBackend, profile: Profile, screen: tuple[int, int], max_steps: int
) -> ContextNeed | None:
    """Ask the server how long the last step's prompt is; None when it cannot count (no /tokenize)."""
    request = last_step_request(profile, screen, max_steps)
    tokens = backend.count_prompt_tokens(request)
    if tokens is None:
        return None
    return ContextNeed(
        prompt_tokens=tokens,
        answer_tokens=max_tokens_for(request, backend.structured_output and request.response_schema is not None),
        images=len(request.images),
        screen=screen,
        steps=max_steps,
    )
