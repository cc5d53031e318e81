"""Figure 4a: the step engine's own cost per step, on a real Xvfb screen, with the model's time taken out.

StepEngine runs the holotron profile over a ScriptedBackend (real answers, parsed for real), an
approver that approves at once, and the real Executor moving the pointer (pyautogui over XTEST) on a
1920x1080 Xvfb showing `bench.screens.desktop_picture`. Listener events, a timed backend, a timed
frame source and a timed performer split every step into:
- model: the backend's generate (scripted: microseconds) - subtracted;
- propose: the rest of THINKING (prepare the image, build the prompt, parse, map to the screen,
  the loop guard's fingerprint, the worker thread hand-off);
- approve: WAITING_APPROVAL (an instant approver: the engine's own bookkeeping);
- act: the Executor's move (pyautogui's 10 ms pause included) - reported, not overhead;
- record: ACTING to SETTLING minus act (the fsynced JSON line; before #10 also waiting for the PNG);
- capture: the grabs while settling (the last one is the next step's frame);
- settle other: the rest of settling but its deliberate wait (settle_poll_s per poll, reported
  apart): frame comparisons and the wake-up latency of the wait.
overhead = propose + approve + record + capture + settle other: the figure with the 50 ms goal.

Five variants, interleaved run by run: the engine recording a trajectory (as the app does: the
step's line names its screenshot without waiting for the PNG encoding); the engine as it recorded
before issue #10 (each line waited for its PNG), for the side-by-side figure; the recording engine
with the scripted model taking 200 ms (as a real model takes seconds); the engine not
recording; and the baseline, a bare loop (grab, propose, map, execute) with no thread, recording,
loop guard or settling. Step 1 of every run is dropped (first-call costs).

Two parts of `propose` are also timed alone on the captured frames: turning the 3 kept frames into
PIL images (the profile's prepare_image, every step) and the loop guard's fingerprint.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import BenchResult, BenchSettings, interleaved, stats_of
from bench.screens import desktop_display
from holodesk.automation.actions import Action
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import FrameMapping, action_to_screen
from holodesk.automation.engine import (
    ApprovalDecision,
    ApprovalRequest,
    EngineEvent,
    EngineSettings,
    EngineState,
    StepEngine,
)
from holodesk.automation.executor import Executor
from holodesk.automation.proposal import PastStep
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.screen_change import fingerprint
from holodesk.inference.generation import Generation
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.scripted import ScriptedBackend

NAME = "engine"
GOAL_OVERHEAD_MS = 50.0
STEPS_PER_RUN = 8
SETTLE_POLL_S = 0.1  # EngineSettings' default
TASK = "Archive every unread newsletter in my mail"
MODEL_DELAY_S = 0.2  # a stand-in for model time, long enough for the PNG encoding to overlap it
PNG_WAITING = "engine, recording, waiting for the PNG (as before #10)"
VARIANTS = ("engine, recording", PNG_WAITING, "engine, recording, 200 ms model", "engine, not recording", "bare loop")
PARTS = ("model", "propose", "approve", "act", "record", "capture", "settle other", "settle wait", "overhead")
# The table shows every part for the app's configuration and what differs for the others (JSON has all).
TABLE_PARTS = {
    "engine, recording": PARTS,
    PNG_WAITING: ("record", "overhead"),
    "engine, recording, 200 ms model": ("record", "overhead"),
    "engine, not recording": ("record", "overhead"),
    "bare loop": ("capture", "propose", "act", "overhead"),
}


def move_answers(count: int) -> list[str]:
    """Holotron answers moving the pointer around the screen (a harmless action that changes no pixel)."""
    answers = []
    for index in range(count):
        x, y = 100 + (index * 137) % 800, 100 + (index * 89) % 800
        step = {"note": f"step {index}", "thought": "Hover the next row.", "action": {"name": "move_to_desktop"}}
        step["action"].update(x=x, y=y)  # type: ignore[union-attr]
        answers.append(json.dumps(step))
    return answers


class TimedBackend:
    """A backend wrapper that remembers how long each generate took (the model time to subtract)."""

    def __init__(self, inner: ScriptedBackend) -> None:
        self.inner = inner
        self.seconds: list[float] = []

    def generate(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        generation = self.inner.generate(request)
        self.seconds.append(time.perf_counter() - started)
        return generation


class TimedFrames:
    """A frame source wrapper that remembers when each grab started and ended."""

    def __init__(self, capture: ScreenCapture) -> None:
        self.capture = capture
        self.grabs: list[tuple[float, float]] = []

    def grab(self, monitor: int | None) -> ScreenFrame:
        started = time.perf_counter()
        frame = self.capture.grab(monitor)
        self.grabs.append((started, time.perf_counter()))
        return frame


class TimedPerformer:
    """The real Executor, timed."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.seconds: list[float] = []

    def validate(self, action: Action) -> None:
        # The engine's check before asking (counted in `propose`, as in the app).
        self.executor.validate(action)

    def execute(self, action: Action, cancel: CancelToken) -> Any:
        started = time.perf_counter()
        result = self.executor.execute(action, cancel)
        self.seconds.append(time.perf_counter() - started)
        return result


class InstantApprover:
    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve()


@dataclass
class StepParts:
    """Milliseconds per part, one list entry per measured step."""

    parts: dict[str, list[float]] = field(default_factory=lambda: {part: [] for part in PARTS})

    def add(self, **values: float) -> None:
        for name, value in values.items():
            self.parts[name].append(value * 1000)


def _grab_time_between(grabs: Sequence[tuple[float, float]], start: float, end: float) -> tuple[float, int]:
    inside = [(a, b) for a, b in grabs if start <= a and b <= end]
    return sum(b - a for a, b in inside), len(inside)


class PngWaitingEngine(StepEngine):
    """The engine as it recorded before issue #10: each step's line waited for its screenshot's PNG."""

    def _record(self, writer: Any, record: dict[str, Any], screenshot: Any) -> None:
        if screenshot is not None:
            screenshot.result()
        super()._record(writer, record, screenshot)


def run_engine(
    capture: ScreenCapture,
    executor: Executor,
    record_to: Path | None,
    into: StepParts,
    model_delay_s: float = 0.0,
    engine_class: type[StepEngine] = StepEngine,
) -> None:
    """One engine run of STEPS_PER_RUN steps; adds steps 2.. to `into`."""
    backend = TimedBackend(ScriptedBackend(move_answers(STEPS_PER_RUN), delay_s=model_delay_s))
    frames = TimedFrames(capture)
    performer = TimedPerformer(executor)
    events: list[tuple[float, EngineEvent]] = []
    settings = EngineSettings(max_steps=STEPS_PER_RUN, monitor=1, trajectory_root=record_to)
    engine = engine_class(
        ModelPolicy(get_profile("holotron"), backend),
        InstantApprover(),
        performer,
        frames,
        settings,
        listener=lambda event: events.append((time.perf_counter(), event)),
    )
    result = engine.run(TASK)
    if result.steps != STEPS_PER_RUN:
        raise RuntimeError(f"the benchmark run ended early: {result.outcome} {result.detail}")
    at = {(event.state, event.step): moment for moment, event in events}
    finished = next(moment for moment, event in events if event.state is EngineState.FINISHED)
    for step in range(2, STEPS_PER_RUN + 1):
        thinking = at[(EngineState.THINKING, step)]
        waiting = at[(EngineState.WAITING_APPROVAL, step)]
        acting = at[(EngineState.ACTING, step)]
        settling = at[(EngineState.SETTLING, step)]
        step_end = at.get((EngineState.THINKING, step + 1), finished)
        model = backend.seconds[step - 1]
        act = performer.seconds[step - 1]
        grab_seconds, grab_count = _grab_time_between(frames.grabs, settling, step_end)
        settle_wait = max(0, grab_count - 1) * settings.settle_poll_s
        settle_other = step_end - settling - settle_wait - grab_seconds
        propose = waiting - thinking - model
        approve = acting - waiting
        record = settling - acting - act
        into.add(
            model=model,
            propose=propose,
            approve=approve,
            act=act,
            record=record,
            capture=grab_seconds,
            **{"settle other": settle_other, "settle wait": settle_wait},
            overhead=propose + approve + record + grab_seconds + settle_other,
        )


def run_bare_loop(capture: ScreenCapture, executor: Executor, into: StepParts) -> None:
    """The floor: grab, propose, map, execute, nothing else; same parts where they exist."""
    backend = TimedBackend(ScriptedBackend(move_answers(STEPS_PER_RUN)))
    policy = ModelPolicy(get_profile("holotron"), backend)
    history: list[PastStep] = []
    cancel = CancelToken()
    for step in range(1, STEPS_PER_RUN + 1):
        started = time.perf_counter()
        frame = capture.grab(1)
        grabbed_at = time.perf_counter()
        proposal = policy.propose(TASK, history, [frame])
        mapping = FrameMapping(frame.region, proposal.image_width, proposal.image_height)
        action = action_to_screen(proposal.action, proposal.space, mapping, frame.monitors)
        proposed = time.perf_counter()
        executor.execute(action, cancel)
        executed = time.perf_counter()
        history.append(PastStep(proposal.action, proposal.note, proposal.thought))
        if step == 1:
            continue
        model = backend.seconds[-1]
        zero = 0.0
        into.add(
            model=model,
            propose=proposed - grabbed_at - model,
            approve=zero,
            act=executed - proposed,
            record=zero,
            capture=grabbed_at - started,
            **{"settle other": zero, "settle wait": zero},
            overhead=proposed - started - model,
        )


def run(settings: BenchSettings) -> BenchResult:
    result = BenchResult(NAME)
    measured = {variant: StepParts() for variant in VARIANTS}
    rounds = 2 if settings.quick else settings.rounds(5)
    with desktop_display(1920, 1080), tempfile.TemporaryDirectory(prefix="holodesk-bench-") as folder:
        capture = ScreenCapture()
        executor = Executor(capture=capture)
        runs: dict[str, Callable[[], None]] = {
            "engine, recording": lambda: run_engine(capture, executor, Path(folder), measured["engine, recording"]),
            PNG_WAITING: lambda: run_engine(
                capture, executor, Path(folder), measured[PNG_WAITING], engine_class=PngWaitingEngine
            ),
            "engine, recording, 200 ms model": lambda: run_engine(
                capture, executor, Path(folder), measured["engine, recording, 200 ms model"], MODEL_DELAY_S
            ),
            "engine, not recording": lambda: run_engine(capture, executor, None, measured["engine, not recording"]),
            "bare loop": lambda: run_bare_loop(capture, executor, measured["bare loop"]),
        }
        try:
            kept = [capture.grab(1) for _ in range(3)]
            pieces = interleaved(
                {
                    "3 frames to PIL": lambda: [frame.to_image() for frame in kept],
                    "fingerprint": lambda: fingerprint(kept[-1]),
                },
                settings.rounds(15),
                settings.warmup,
            )
            for round_index in range(rounds):
                shift = round_index % len(VARIANTS)
                for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                    runs[variant]()
        finally:
            capture.close()
    baseline = "bare loop overhead"
    for variant in VARIANTS:
        parts = measured[variant].parts
        result.extra[variant] = {part: stats_of(parts[part]).to_dict() for part in PARTS}
        for part in TABLE_PARTS[variant]:
            is_overhead = part == "overhead"
            result.add(
                f"{variant} {part}",
                stats_of(parts[part]),
                baseline=baseline if is_overhead and variant != "bare loop" else None,
                goal=GOAL_OVERHEAD_MS if is_overhead and variant == "engine, recording" else None,
            )
    result.add("part of propose: 3 frames to PIL", pieces["3 frames to PIL"])
    result.add("part of propose: fingerprint", pieces["fingerprint"])
    result.notes.append(
        f"{rounds} runs per variant of {STEPS_PER_RUN} steps, step 1 of each dropped; 1920x1080 Xvfb;"
        f" settle_poll_s {SETTLE_POLL_S} s; overhead = propose + approve + record + capture + settle other"
        " (model, the action itself and the settle poll wait excluded)"
    )
    return result
