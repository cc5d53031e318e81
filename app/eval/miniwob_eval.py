"""Runs MiniWoB++ episodes with Holodesk's own step engine and scores them with each task's reward.

Per episode: start it in the browser with a seed, give its instruction to a fresh StepEngine
(capture -> policy -> mapping -> eval-only auto-approval -> performer -> trajectory), and stop the
engine as soon as the page says the episode is over. Success is MiniWoB's own: a positive reward.
An episode the engine ended without the page finishing it (the model said done, asked a question,
gave an unusable answer, or ran out of steps) scores 0 and counts as a failure.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from holodesk.app.eval.auto_approval import EvalAutoApproval
from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import (
    ActionPerformer,
    EngineEvent,
    EngineSettings,
    EngineState,
    FrameSource,
    Outcome,
)
from holodesk.automation.proposal import Policy
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.screen_change import wait_for_settle

# A model-driven agent is far slower than MiniWoB's default 10 s per episode assumes.
SECONDS_PER_STEP_ALLOWED = 20.0


@dataclass(frozen=True, slots=True)
class MiniWoBOptions:
    """What to run: tasks, episodes per task, the first seed, the step limit and the page's zoom."""

    tasks: tuple[str, ...]
    episodes: int = 10
    seed: int = 0
    max_steps: int = 10
    zoom: float = 3.0
    monitor: int = 1
    settle_timeout_s: float = 1.0
    time_limit_s: float | None = None  # None: SECONDS_PER_STEP_ALLOWED per allowed step

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("no MiniWoB task was named")
        if self.episodes < 1:
            raise ValueError(f"episodes must be at least 1, got {self.episodes}")
        if self.max_steps < 1:
            raise ValueError(f"the step limit must be at least 1, got {self.max_steps}")
        if self.time_limit_s is not None and self.time_limit_s <= 0:
            raise ValueError("the episode time limit must be positive")

    @property
    def episode_time_limit_s(self) -> float:
        return self.time_limit_s if self.time_limit_s is not None else SECONDS_PER_STEP_ALLOWED * self.max_steps

    def planned(self) -> list[tuple[str, int]]:
        """Every (task, seed) to run, in the order they run: task by task, seeds counting up."""
        return [(task, self.seed + number) for task in self.tasks for number in range(self.episodes)]


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    """One episode: the task's reward, what the engine said, and how long its steps took."""

    task: str
    seed: int
    instruction: str
    success: bool
    reward: float
    raw_reward: float
    steps: int
    outcome: str
    detail: str
    seconds: float
    trajectory: str | None

    @property
    def seconds_per_step(self) -> float | None:
        return self.seconds / self.steps if self.steps else None


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """Per task: success rate, mean steps and median seconds per step over its episodes."""

    task: str
    episodes: int
    successes: int
    mean_steps: float
    median_seconds_per_step: float | None

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0


@dataclass(frozen=True, slots=True)
class NotFinished:
    """An episode the run was to have run and did not finish (the run stopped first)."""

    task: str
    seed: int


@dataclass(slots=True)
class MiniWoBReport:
    """Everything an evaluation found, in the order it ran.

    A run that ended early (Ctrl+C, an error) still reports what it finished: `stopped` says why it
    ended, and `not_finished` lists the episodes it did not finish.
    """

    episodes: list[EpisodeResult] = field(default_factory=list)
    retried: int = 0  # episodes run again after their worker died (parallel runs: app/eval/parallel.py)
    stopped: str | None = None
    not_finished: list[NotFinished] = field(default_factory=list)

    def ended_early(self, why: str, planned: Sequence[tuple[str, int]]) -> None:
        """Say that the run stopped (`why`) before finishing every (task, seed) of `planned`."""
        finished = {(e.task, e.seed) for e in self.episodes}
        self.stopped = why
        self.not_finished = [NotFinished(task, seed) for task, seed in planned if (task, seed) not in finished]

    def summaries(self) -> list[TaskSummary]:
        tasks: dict[str, list[EpisodeResult]] = {}
        for episode in self.episodes:
            tasks.setdefault(episode.task, []).append(episode)
        summaries = []
        for task, episodes in tasks.items():
            per_step = [e.seconds_per_step for e in episodes if e.seconds_per_step is not None]
            summaries.append(
                TaskSummary(
                    task=task,
                    episodes=len(episodes),
                    successes=sum(e.success for e in episodes),
                    mean_steps=statistics.fmean(e.steps for e in episodes),
                    median_seconds_per_step=statistics.median(per_step) if per_step else None,
                )
            )
        return summaries

    @property
    def success_rate(self) -> float:
        return sum(e.success for e in self.episodes) / len(self.episodes) if self.episodes else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "success_rate": self.success_rate,
            "episodes_run": len(self.episodes),
            "retried": self.retried,
            "complete": self.stopped is None and not self.not_finished,
            "stopped": self.stopped,
            "not_finished": [asdict(n) for n in self.not_finished],
            "tasks": [{**asdict(s), "success_rate": s.success_rate} for s in self.summaries()],
            "episodes": [{**asdict(e), "seconds_per_step": e.seconds_per_step} for e in self.episodes],
        }

    def table(self) -> str:
        """The per-task table for a terminal (task names are MiniWoB's, never model text)."""
        rows = [f"{'task':<28} {'episodes':>8} {'success':>8} {'steps':>6} {'s/step':>7}"]
        for s in self.summaries():
            per_step = f"{s.median_seconds_per_step:7.2f}" if s.median_seconds_per_step is not None else "      -"
            rows.append(f"{s.task:<28} {s.episodes:>8} {s.success_rate:>8.0%} {s.mean_steps:>6.1f} {per_step}")
        rows.append(f"{'all':<28} {len(self.episodes):>8} {self.success_rate:>8.0%}")
        if self.retried:
            rows.append(f"{self.retried} episode(s) were run again after their worker died (each counted once)")
        if self.stopped is not None:
            rows.append(f"the run ended early: {self.stopped}; {len(self.not_finished)} episode(s) were not finished")
        return "\n".join(rows)


DRAWN_TIMEOUT_S = 3.0  # for the screen to show a new episode; then up to SETTLE_S for it to settle
SETTLE_S = 2.0


def wait_until_drawn(frames: FrameSource, monitor: int, before: ScreenFrame) -> None:
    """Return once the screen shows something other than `before` and has settled, or the bounds ran out.

    The page says it has drawn the new episode (two animation frames) before Chromium's compositor has
    put it on the X screen; on a loaded machine an episode's first screenshot was still the old, blank
    page, and a routine recorded from it held a plain-colour picture that no replay could find.
    """
    deadline = time.monotonic() + DRAWN_TIMEOUT_S
    while np.array_equal(frames.grab(monitor).pixels, before.pixels) and time.monotonic() < deadline:
        time.sleep(0.05)
    wait_for_settle(lambda: frames.grab(monitor), SETTLE_S, 0.05)


class MiniWoBEvaluation:
    """Runs episodes in `browser` with a StepEngine built around `policy`, `performer` and `frames`."""

    def __init__(
        self,
        browser: MiniWoBBrowser,
        policy: Policy,
        performer: ActionPerformer,
        frames: FrameSource,
        options: MiniWoBOptions,
        *,
        trajectory_root: Path | None,
        session_meta: dict[str, Any] | None = None,
        keep_screenshots: int = 3,
    ) -> None:
        self.browser = browser
        self.policy = policy
        self.performer = performer
        self.frames = frames
        self.options = options
        self.trajectory_root = trajectory_root
        self.session_meta = dict(session_meta or {})
        self.keep_screenshots = keep_screenshots

    def run(
        self, on_episode: Callable[[EpisodeResult], None] | None = None, report: MiniWoBReport | None = None
    ) -> MiniWoBReport:
        """Every episode in order, added to `report` (a new one by default) as each ends, so a caller
        holding it still has the finished ones when the run raises."""
        report = report if report is not None else MiniWoBReport()
        for task in self.options.tasks:
            self.browser.open_task(task)
            for number in range(self.options.episodes):
                result = self.run_episode(task, self.options.seed + number)
                report.episodes.append(result)
                if on_episode is not None:
                    on_episode(result)
        return report

    def run_episode(self, task: str, seed: int) -> EpisodeResult:
        """One episode of the open `task` with `seed`, from the instruction to the page's reward."""
        options = self.options
        before = self.frames.grab(options.monitor)
        instruction = self.browser.start_episode(seed, options.episode_time_limit_s)
        wait_until_drawn(self.frames, options.monitor, before)
        engine: StepEngine | None = None

        ended_by_page: list[bool] = []

        def stop_when_episode_ends(event: EngineEvent) -> None:
            # After each action the page may have ended the episode: stop before asking the model again.
            if event.state is EngineState.SETTLING and engine is not None and self.browser.state().done:
                ended_by_page.append(True)
                engine.stop()

        engine = StepEngine(
            self.policy,
            EvalAutoApproval(),
            self.performer,
            self.frames,
            EngineSettings(
                max_steps=options.max_steps,
                monitor=options.monitor,
                settle_timeout_s=options.settle_timeout_s,
                settle_poll_s=0.05,
                keep_screenshots=self.keep_screenshots,
                trajectory_root=self.trajectory_root,
                session_meta={**self.session_meta, "eval": "miniwob", "miniwob_task": task, "seed": seed},
            ),
            listener=stop_when_episode_ends,
        )
        started = time.perf_counter()
        run = engine.run(instruction)
        seconds = time.perf_counter() - started
        if run.outcome is Outcome.STOPPED and not ended_by_page:
            # Ctrl+C reached the engine, which ends its run as a stop: the evaluation ends with it (the
            # next episode would otherwise start and wait on the model again).
            raise KeyboardInterrupt(run.detail)
        state = self.browser.state()
        if not state.done:
            self.browser.end_episode()
        return EpisodeResult(
            task=task,
            seed=seed,
            instruction=instruction,
            success=state.done and state.raw_reward > 0,
            reward=state.reward if state.done else 0.0,
            raw_reward=state.raw_reward if state.done else 0.0,
            steps=run.steps,
            outcome="episode_ended" if state.done else run.outcome.value,
            # The engine was stopped by this class when the page ended the episode: say so instead.
            detail=f"the page ended the episode ({state.reason or 'reward given'})" if state.done else run.detail,
            seconds=seconds,
            trajectory=str(run.folder) if run.folder is not None else None,
        )


def parse_task_list(value: str, known: Sequence[str]) -> tuple[str, ...]:
    """A comma-separated task list, each checked against `known` (an unknown name is a ValueError)."""
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    if not names:
        raise ValueError("the task list is empty")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown MiniWoB task(s): {', '.join(unknown)} (--list shows them)")
    return names
