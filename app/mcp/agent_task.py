"""The `run_task` tool: Holodesk's own agent loop (its own model) on a task, every step approved by the person.

The run is the tray's: the configured model proposes, the overlay and the panel show each step, the
person approves, edits, skips or stops, and the model's questions are asked on the panel. The session's
task names the client ("<client> via MCP: <task>"); the model is given the task alone. The model is
loaded on the first `run_task` (or `locate`) and kept; it answers one of them at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.mcp.desk_turn import DeskTurn
from holodesk.app.mcp.one_step import DeskParts, RunHandle, StepReport, StepRunner
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import EngineEvent, EngineSettings, Outcome, QuestionAnswerer
from holodesk.automation.proposal import PastStep, Proposal
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.model_policy import ModelPolicy

MODEL_QUESTION = "an MCP client's question to the model (locate)"  # who holds the desk's turn, in words


class PolicyUnavailable(HolodeskAppError):
    """The model could not be loaded or its server cannot serve; the message says why and what to do."""


class ModelBusy(HolodeskAppError):
    """The model is working on a task; a `locate` would wait for the whole task, so it is refused."""


class TaskAsAsked:
    """The model's policy, given the agent's task whatever the session calls the run."""

    def __init__(self, policy: ModelPolicy, task: str) -> None:
        self.policy = policy
        self.task = task

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        return self.policy.propose(self.task, history, frames, cancel)

    def interrupt(self) -> None:
        self.policy.interrupt()

    def prepare_ahead(self, frame: ScreenFrame) -> None:
        self.policy.prepare_ahead(frame)


@dataclass(frozen=True, slots=True)
class TaskSettings:
    max_steps: int
    backend: str  # for the session's record
    profile: str


class AgentTasks:
    """Runs tasks with the configured model on one desk; the model loads once, on the first task."""

    def __init__(
        self,
        parts: DeskParts,
        questions: QuestionAnswerer,
        load_policy: Callable[[], ModelPolicy],
        settings: TaskSettings,
        turn: DeskTurn | None = None,
        keep_policy: bool = True,
    ) -> None:
        self.parts = parts
        self.questions = questions
        self.load_policy = load_policy
        self.settings = settings
        self.turn = turn  # the tray app's runs use the same model: a question waits for none of them
        # False: `load_policy` is asked each time (it hands out the tray app's model, which the tray may replace).
        self.keep_policy = keep_policy
        self._policy: ModelPolicy | None = None
        self._loading = threading.Lock()
        self._in_use = threading.Lock()  # a task's run or a locate: the model answers one at a time

    def policy(self) -> ModelPolicy:
        """The model's policy, loaded now if it is not yet; PolicyUnavailable in words when it cannot be."""
        if not self.keep_policy:
            return self.load_policy()
        with self._loading:
            if self._policy is None:
                self._policy = self.load_policy()
            return self._policy

    @contextmanager
    def model_for_a_question(self) -> Iterator[ModelPolicy]:
        """The model's policy for one question (`locate`); ModelBusy while a task runs on it."""
        if not self._in_use.acquire(blocking=False):
            raise ModelBusy("the model is working on a task (run_task); ask again once it has ended")
        try:
            holder = self.turn.take(MODEL_QUESTION) if self.turn is not None else None
            if holder is not None:
                raise ModelBusy(f"the model is busy: {holder} is running; ask again once it has ended")
            try:
                yield self.policy()
            finally:
                if self.turn is not None:
                    self.turn.give_back()
        finally:
            self._in_use.release()

    def run(
        self,
        steps: StepRunner,
        task: str,
        client: str,
        handle: RunHandle,
        listener: Callable[[EngineEvent], None],
    ) -> StepReport:
        policy = self.policy()
        parts, settings = self.parts, self.settings

        def build() -> StepEngine:
            return StepEngine(
                TaskAsAsked(policy, task),
                parts.approver,
                parts.performer,
                parts.frames,
                EngineSettings(
                    max_steps=settings.max_steps,
                    monitor=parts.monitor,
                    trajectory_root=parts.sessions,
                    keep_screenshots=policy.profile.budget.keep_screenshots,
                    session_meta={
                        "backend": settings.backend,
                        "profile": settings.profile,
                        "mcp_client": client,
                    },
                    asked_by=f"Holodesk (a task from {client}, through MCP)",
                ),
                listener=listener,
                questions=self.questions,
            )

        with self._in_use:
            result = steps.run_engine(build, f"{client} via MCP: {task}", handle)
        session = f" (session {result.folder.name})" if result.folder is not None else ""
        words = f"{result.outcome.value}: {result.detail}; {result.steps} steps taken{session}"
        return StepReport(result.outcome is Outcome.DONE, words, result)
