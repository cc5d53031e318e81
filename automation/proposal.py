"""The step as data between the engine and whatever proposes actions, and the Policy protocol.

These types live in `automation` because the engine needs them and must not import `inference`;
`inference.policy` re-exports them for the backends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from holodesk.automation.actions import Action
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ModelSpace, NormalizedSpace
from holodesk.automation.errors import AutomationError
from holodesk.automation.screen import ScreenFrame


@dataclass(frozen=True, slots=True)
class StepTimings:
    """Where a step's model time went. Seconds; token counts as the backend reports them."""

    preprocess_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    total_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    # Prompt tokens whose state an earlier step left (the in-process engine keeps it): in tokens_in, not computed.
    tokens_reused: int = 0

    def to_dict(self) -> dict[str, float | int]:
        return {
            "preprocess_s": self.preprocess_s,
            "prefill_s": self.prefill_s,
            "decode_s": self.decode_s,
            "total_s": self.total_s,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_reused": self.tokens_reused,
        }


@dataclass(frozen=True, slots=True)
class PastStep:
    """One earlier step as the prompt shows it: what was done and why (model space).

    `element` is the model's description of the target. `outcome` is what became of the step (empty
    when it ran as proposed; otherwise skipped, corrected by the user, or failed). `result` is what
    the step gave back: the input backend's detail (e.g. how text was typed), ending in "no visible
    change" when the settled screen was identical to the one before, or the user's reply to a
    question. A multi-turn prompt sends both back as the tool's output.
    """

    action: Action
    note: str = ""
    thought: str = ""
    element: str = ""
    outcome: str = ""
    performed: bool = True  # False when the user skipped it: nothing happened on screen
    result: str = ""


@dataclass(frozen=True, slots=True)
class RejectedAnswer:
    """An answer the parser refused before the model answered again: its text and why it was refused."""

    raw_text: str
    error: str


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the model proposes: an action in model space, with the text it came from.

    `image_width`/`image_height` are the size of the image the action's coordinates refer to
    (the last frame as the profile prepared it) and `space` the profile's convention, so the
    engine can map the action to the screen without knowing the profile.
    """

    action: Action
    raw_text: str
    image_width: int
    image_height: int
    note: str = ""
    thought: str = ""
    timings: StepTimings = field(default_factory=StepTimings)
    space: ModelSpace = field(default_factory=NormalizedSpace)
    # The model's description of the target ("blue Save button, bottom right"), when it gave one.
    element: str = ""
    # Answers refused before this one in the same step (the model is asked again once).
    rejected: tuple[RejectedAnswer, ...] = ()
    # How a recorded target was found again (a routine's step); None for the model's own proposals.
    grounding: Grounding | None = None
    # The task the model was given, where it is not the run's own (the agent after a routine hands over).
    task_asked: str = ""


@dataclass(frozen=True, slots=True)
class Grounding:
    """Where a proposer that replays recorded steps (a routine) found the step's target, in its terms.

    The engine's approval rules read it (`automation.auto_approval`): only a step whose
    target was found `exact`ly on its recorded picture may go ahead under "approve all".
    `irreversible` is what the recording says (send, save, delete...); the engine adds its own
    reasons. `source` names the step for people ("routine 'x', step 2 of 5"); `how` says how its
    target was found (or that it has none). `record` goes into the session's step line as it is.
    """

    exact: bool
    how: str
    source: str
    irreversible: bool = False
    record: dict[str, Any] = field(default_factory=dict)


class EndRun(AutomationError):
    """Raised by a proposer to end the run in words: the user stopped it from a question the proposer
    asked (`stopped`), or the proposer cannot go on (a routine whose file broke: not `stopped`)."""

    def __init__(self, detail: str, *, stopped: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.stopped = stopped


class UnusableProposal(AutomationError, ValueError):
    """The model answered, but not with exactly one valid action. Nothing is executed.

    `raw_text` is the full answer (logged and shown); `timings` the backend's StepTimings if known.
    """

    def __init__(self, message: str, raw_text: str, timings: Any = None) -> None:
        super().__init__(message)
        self.raw_text = raw_text
        self.timings = timings


@runtime_checkable
class Policy(Protocol):
    """Anything that proposes the next action: the model backends, scripted policies in tests.

    `frames` are the most recent screenshots, oldest first; the last one is the current screen.
    `cancel` is the engine's token for the run: anything the policy waits on while proposing (a
    question put to the user, a settle) must end once it is cancelled.
    A malformed answer raises `UnusableProposal` (the inference layer's ParseError is one).
    """

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal: ...

    def interrupt(self) -> None:
        """Abandon a `propose` in flight (any thread); a policy that cannot stop early does nothing."""
        ...


@dataclass(frozen=True, slots=True)
class RunEndWords:
    """A proposer's own account of how its run ended: `detail` replaces the engine's words (the run's
    result, its session's end record); `summary` is a few words for a list's outcome column."""

    detail: str
    summary: str


@runtime_checkable
class DescribesEnd(Protocol):
    """A proposer that says how its run ended in its own terms (a routine replay: at which step it
    stopped or was handed over, and why). `outcome` is the engine's Outcome value, `detail` its words."""

    def end_words(self, outcome: str, detail: str) -> RunEndWords: ...


@runtime_checkable
class PreparesAhead(Protocol):
    """A policy that can prepare a screenshot before it is asked about it (ModelPolicy), so that the
    engine can have it done while the screen settles. Any thread; the result is kept for propose."""

    def prepare_ahead(self, frame: ScreenFrame) -> None: ...
