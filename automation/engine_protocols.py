"""What the step loop (automation/engine.py) exchanges with the parts plugged into it.

The requests it puts to an approver and a question answerer and the answers it takes back, the
protocols of those front ends, the action performer and the frame source, the events it tells its
listener, how a run ends (`Outcome`, `RunResult`) and the run's settings. Front ends, the routines
and the tests import these from here; the loop itself is `StepEngine` in automation/engine.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from holodesk.automation.actions import Action
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import Rect
from holodesk.automation.input.performer import ExecutionResult
from holodesk.automation.proposal import Proposal
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import SCREENSHOT_WAIT_S


class Decision(StrEnum):
    APPROVE = "approve"
    # Approve this step and, for the rest of the run, every step the approval rule lets "approve all"
    # cover (found exactly on its recorded picture, typing nothing). Any other step is still shown.
    APPROVE_ALL_EXACT = "approve_all_exact"
    EDIT = "edit"
    SKIP = "skip"
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approver is asked about: the proposal and the action as it would land on screen."""

    step: int
    task: str
    proposal: Proposal
    action: Action  # screen space
    frame: ScreenFrame
    cancel: CancelToken
    loop_warning: str = ""  # set when the same action keeps coming back on an unchanged screen
    adjustment: str = ""  # set when the engine moved the target (off a fail-safe corner) before asking
    previous_result: str = ""  # what became of the step before ("no visible change", ...)
    # From the approval rule (automation/auto_approval.py): whether "approve all" may cover this step, why
    # it is shown, and whether it is irreversible (the approver says so).
    may_approve_all: bool = False
    why_asked: str = ""
    irreversible: bool = False
    # For a step that pastes (a middle click): the primary selection's text, read when it was asked.
    paste_text: str | None = None
    # Who asks for the step, in words, where it is not Holodesk's own model (an agent through MCP).
    asked_by: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """The approver's answer. `action` is the edited action (screen space) for EDIT."""

    decision: Decision
    action: Action | None = None

    def __post_init__(self) -> None:
        if (self.decision is Decision.EDIT) != (self.action is not None):
            raise ValueError("an edit carries the edited action, and only an edit does")

    @classmethod
    def approve(cls) -> ApprovalDecision:
        return cls(Decision.APPROVE)

    @classmethod
    def skip(cls) -> ApprovalDecision:
        return cls(Decision.SKIP)

    @classmethod
    def stop(cls) -> ApprovalDecision:
        return cls(Decision.STOP)

    @classmethod
    def edit(cls, action: Action) -> ApprovalDecision:
        return cls(Decision.EDIT, action)


@dataclass(frozen=True, slots=True)
class QuestionRequest:
    """The model asks the user something (`ask_user`); the reply goes back to it as the tool output."""

    step: int
    task: str
    question: str
    proposal: Proposal
    frame: ScreenFrame
    cancel: CancelToken


class Approver(Protocol):
    """Decides each step. Must return promptly once `request.cancel` is cancelled."""

    def decide(self, request: ApprovalRequest) -> ApprovalDecision: ...


class QuestionAnswerer(Protocol):
    """Puts the model's question to the user (the engine's `questions`; without one, a question ends the run).

    Returns the user's reply, or None when the user stops the run instead of answering. Must return
    promptly once `request.cancel` is cancelled.
    """

    def answer_question(self, request: QuestionRequest) -> str | None: ...


class ApproverAndAnswerer(Approver, QuestionAnswerer, Protocol):
    """A front end that both decides steps and answers questions (the tray's panel, the terminal)."""


class ActionPerformer(Protocol):
    """Checks and performs screen-space actions (automation.input.performer.InputPerformer is the real one).

    `validate` raises ActionError, OffScreenError or ClipboardError, in words, for an action that
    cannot be performed as asked, and sends nothing: the engine calls it before the user is asked.
    """

    def validate(self, action: Action) -> None: ...

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult: ...

    def close(self) -> None:
        """Give back what the run set up on the desktop (keycodes bound for its text); the engine calls
        it when a run ends, and the performer sets up afresh if it is used again."""
        ...


class FrameSource(Protocol):
    """Captures frames (automation.screen.ScreenCapture is the real one)."""

    def grab(self, monitor: int | None) -> ScreenFrame: ...


@runtime_checkable
class ShowsOwnRegions(Protocol):
    """A frame source that knows where Holodesk's own things stay in its pictures (the tray icon lives
    in the desktop's tray and cannot be hidden from a grab): screen rectangles, physical pixels.

    The engine records them with each step, so that nothing there counts as a step's effect (a
    routine's expected change, checked at replay, must never be Holodesk's own icon changing).
    """

    def own_regions(self) -> Sequence[Rect]: ...


class EngineState(StrEnum):
    CAPTURING = "capturing"
    THINKING = "thinking"
    WAITING_APPROVAL = "waiting_approval"
    WAITING_ANSWER = "waiting_answer"  # the model asked the user a question
    SAVING = "saving"  # approved; the step's screenshot is still being written (the action waits for it)
    ACTING = "acting"
    SETTLING = "settling"
    PAUSED = "paused"
    STEP_FAILED = "step_failed"  # the action could not run, or the desktop refused it part-way
    NO_VISIBLE_CHANGE = "no_visible_change"  # the action ran and the settled screen is the same
    FINISHED = "finished"


class Outcome(StrEnum):
    DONE = "done"  # the model says the task is finished
    ASK_USER = "ask_user"  # the model needs the user
    STEP_LIMIT = "step_limit"
    STOPPED = "stopped"  # the user stopped the run
    ERROR = "error"  # an unusable answer, a backend failure, an engine bug
    FAILED = "failed"  # an action could not run or was refused (part-way) by the desktop


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended. `steps` counts the steps taken (acted on, skipped, or a question answered),
    not the final answer or a step that failed before anything ran."""

    outcome: Outcome
    detail: str
    steps: int
    folder: Path | None


@dataclass(frozen=True, slots=True)
class EngineEvent:
    """Told to the listener as the run moves on (the tray app turns these into Qt signals)."""

    state: EngineState
    step: int
    detail: str = ""
    result: RunResult | None = None


DEFAULT_MAX_STEPS = 30  # the user's setting (holodesk.app.common.settings) defaults to this too


@dataclass(frozen=True, slots=True)
class EngineSettings:
    max_steps: int = DEFAULT_MAX_STEPS
    monitor: int | None = 1  # mss index; None for the whole desktop
    settle_timeout_s: float = 3.0
    settle_poll_s: float = 0.1
    history_steps: int = 10  # previous actions shown to the model
    keep_screenshots: int = 3  # frames passed to the policy (the profile may use fewer)
    loop_repeats: int = 3
    trajectory_root: Path | None = None  # None: do not record
    screenshot_wait_s: float = SCREENSHOT_WAIT_S  # an action waits this long for its screenshot on disk
    session_meta: dict[str, Any] = field(default_factory=dict)
    # Who asks for the steps, in words, shown on the approval panel ("" for Holodesk's own model).
    asked_by: str = ""
    # Wait for the screen to settle before the first step (a routine is often started as a window
    # opens; its first target is looked for on the settled screen, which the session records).
    settle_first: bool = False
    # None: run() returns once its record is closed. Otherwise run() hands the closing (waiting for the
    # last screenshots, which no input depends on, and writing the end line) to this, which must do it
    # before the next run starts and before the process exits; the closing raises TrajectoryWriteError,
    # in words, when the record could not be completed. The MCP server's `act` uses it.
    close_record_later: Callable[[Callable[[], None]], None] | None = None

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.keep_screenshots < 1:
            raise ValueError(f"keep_screenshots must be at least 1, got {self.keep_screenshots}")
        if self.screenshot_wait_s <= 0:
            raise ValueError(f"screenshot_wait_s must be positive, got {self.screenshot_wait_s}")
