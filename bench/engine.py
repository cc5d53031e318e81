"""Figure 4a: the step engine's own cost per step, on a real Xvfb screen, with the model's time taken out.

StepEngine runs the holotron profile over a ScriptedBackend (real answers, parsed for real), an
approver that approves at once, and the real InputPerformer moving the pointer (pyautogui over XTEST) on a
1920x1080 Xvfb showing `bench.screens.desktop_picture`. Listener events, a timed backend, a timed
frame source and a timed performer split every step into:
- model: the backend's generate (scripted: microseconds) - subtracted;
- propose: the rest of THINKING (prepare the image, build the prompt, parse, map to the screen,
  the loop guard, the worker thread hand-off);
- approve: WAITING_APPROVAL to ACTING (an instant approver: the engine's own bookkeeping, the
  step's fsynced write-ahead line, and whatever is left of its PNG's encoding: the action waits for
  it, so with the scripted model's microseconds the encoding shows here, while a model slower than
  the encoding, as in the 200 ms variant, hides it);
- act: the InputPerformer's move (pyautogui's 10 ms pause included) - reported, not overhead;
- record: ACTING to SETTLING minus act (the step's result line; the write-ahead line is in approve);
- capture: the grabs while settling (the last one is the next step's frame);
- settle other: the rest of settling but its deliberate wait (settle_poll_s per poll, reported
  apart): frame comparisons and the wake-up latency of the wait.
overhead = propose + approve + record + capture + settle other: the figure with the 25 ms goal (issue #10 point 9).

Five variants, interleaved run by run: the engine recording a trajectory (as the app does); the
same engine as it was at bench.engine_reference.REFERENCE_COMMIT, before issue #10 point 9 (its
record waited for each step's PNG), run by this very code in a child process, for the side-by-side
figure; the recording engine with the scripted model taking 200 ms (as a real model takes seconds);
the engine not recording; and the baseline, a bare loop (grab, propose, map, execute) with no thread,
recording, loop guard or settling. Step 1 of every run is dropped (first-call costs).

Pieces of a step are also timed alone on captured frames: preparing one frame for the model (to a
PIL image; each frame once, the policy keeps it for later steps), the loop guard's fingerprint
(taken only when an action repeats) and one exact comparison of two frames (settling, no change).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from bench.engine_reference import REFERENCE_COMMIT, ReferenceEngine, ReferenceUnavailable
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
from holodesk.automation.proposal import PastStep
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.screen_change import fingerprint
from holodesk.inference.generation import Generation
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.scripted import ScriptedBackend

if TYPE_CHECKING:
    # Today's input layer only for types: the reference's child process imports this module too,
    # and its checkout predates holodesk.automation.input (bench.engine_reference).
    from holodesk.automation.input.performer import ExecutionResult

NAME = "engine"
GOAL_OVERHEAD_MS = 25.0  # issue #10 point 9 (it was 50 ms before)
STEPS_PER_RUN = 8
SETTLE_POLL_S = 0.1  # EngineSettings' default
TASK = "Archive every unread newsletter in my mail"
MODEL_DELAY_S = 0.2  # a stand-in for model time, long enough for the PNG encoding to overlap it
REFERENCE = "engine, recording, before #10.9"  # bench.engine_reference.REFERENCE_COMMIT
VARIANTS = ("engine, recording", REFERENCE, "engine, recording, 200 ms model", "engine, not recording", "bare loop")
PARTS = ("model", "propose", "approve", "act", "record", "capture", "settle other", "settle wait", "overhead")
# The table shows every part for the app's configuration and what differs for the others (JSON has all).
TABLE_PARTS = {
    "engine, recording": PARTS,
    REFERENCE: ("propose", "approve", "record", "capture", "settle other", "overhead"),
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


class StepInput(Protocol):
    """What the engine acts through: today's InputPerformer, or the reference's own (bench.engine_reference)."""

    def validate(self, action: Action) -> None: ...

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult: ...

    def close(self) -> None: ...


class TimedPerformer:
    """The real performer, timed."""

    def __init__(self, input_performer: StepInput) -> None:
        self.input_performer = input_performer
        self.seconds: list[float] = []

    def validate(self, action: Action) -> None:
        # The engine's check before asking (counted in `propose`, as in the app).
        self.input_performer.validate(action)

    def close(self) -> None:
        self.input_performer.close()

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        started = time.perf_counter()
        result = self.input_performer.execute(action, cancel)
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


def run_engine(
    capture: ScreenCapture,
    input_performer: StepInput,
    record_to: Path | None,
    into: StepParts,
    model_delay_s: float = 0.0,
) -> None:
    """One engine run of STEPS_PER_RUN steps; adds steps 2.. to `into`."""
    backend = TimedBackend(ScriptedBackend(move_answers(STEPS_PER_RUN), delay_s=model_delay_s))
    frames = TimedFrames(capture)
    performer = TimedPerformer(input_performer)
    events: list[tuple[float, EngineEvent]] = []
    settings = EngineSettings(max_steps=STEPS_PER_RUN, monitor=1, trajectory_root=record_to)
    engine = StepEngine(
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


def run_bare_loop(capture: ScreenCapture, input_performer: StepInput, into: StepParts) -> None:
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
        input_performer.execute(action, cancel)
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
    # Not at the top: the reference's child imports this module with REFERENCE_COMMIT's holodesk, which
    # has no automation.input (it came with the input split).
    from holodesk.automation.input.performer import InputPerformer
    from holodesk.automation.input.x11.backend import X11Input

    result = BenchResult(NAME)
    measured = {variant: StepParts() for variant in VARIANTS}
    rounds = 2 if settings.quick else settings.rounds(5)
    with desktop_display(1920, 1080), tempfile.TemporaryDirectory(prefix="holodesk-bench-") as folder:
        capture = ScreenCapture()
        input_performer = InputPerformer(X11Input(capture=capture))
        reference: ReferenceEngine | None = None
        try:
            reference = ReferenceEngine()
        except ReferenceUnavailable as exc:
            result.notes.append(f"reference engine ({REFERENCE_COMMIT[:10]}) skipped: {exc}")

        def run_reference() -> None:
            assert reference is not None
            for part, values in reference.run().items():
                measured[REFERENCE].parts[part].extend(values)

        runs: dict[str, Callable[[], None]] = {
            "engine, recording": lambda: run_engine(
                capture, input_performer, Path(folder), measured["engine, recording"]
            ),
            REFERENCE: run_reference,
            "engine, recording, 200 ms model": lambda: run_engine(
                capture, input_performer, Path(folder), measured["engine, recording, 200 ms model"], MODEL_DELAY_S
            ),
            "engine, not recording": lambda: run_engine(
                capture, input_performer, None, measured["engine, not recording"]
            ),
            "bare loop": lambda: run_bare_loop(capture, input_performer, measured["bare loop"]),
        }
        variants = [variant for variant in VARIANTS if variant != REFERENCE or reference is not None]
        try:
            kept = [capture.grab(1) for _ in range(2)]
            pieces = interleaved(
                {
                    "prepare a frame for the model": lambda: get_profile("holotron").prepare_image(kept[-1]),
                    "fingerprint": lambda: fingerprint(kept[-1]),
                    "compare two frames": lambda: kept[-1].same_pixels(kept[0]),
                },
                settings.rounds(15),
                settings.warmup,
            )
            for round_index in range(rounds):
                shift = round_index % len(variants)
                for variant in variants[shift:] + variants[:shift]:
                    runs[variant]()
        finally:
            if reference is not None:
                reference.close()
            capture.close()
    for variant in variants:
        parts = measured[variant].parts
        result.extra[variant] = {part: stats_of(parts[part]).to_dict() for part in PARTS}
        for part in TABLE_PARTS[variant]:
            result.add(
                f"{variant} {part}",
                stats_of(parts[part]),
                baseline=_baseline(variant, part, has_reference=reference is not None),
                goal=GOAL_OVERHEAD_MS if part == "overhead" and variant == "engine, recording" else None,
            )
    for piece, stats in pieces.items():
        result.add(f"piece: {piece}", stats)
    result.extra["reference_commit"] = REFERENCE_COMMIT if reference is not None else None
    result.notes.append(
        f"{rounds} runs per variant of {STEPS_PER_RUN} steps, step 1 of each dropped; 1920x1080 Xvfb;"
        f" settle_poll_s {SETTLE_POLL_S} s; overhead = propose + approve + record + capture + settle other"
        " (model, the action itself and the settle poll wait excluded);"
        f" '{REFERENCE}' is commit {REFERENCE_COMMIT[:10]}'s engine run by this code in a child process"
    )
    return result


def _baseline(variant: str, part: str, *, has_reference: bool) -> str | None:
    """Today's engine is compared with the reference (the figure with the goal), the rest with the bare loop."""
    if variant == "engine, recording" and has_reference and part in TABLE_PARTS[REFERENCE]:
        return f"{REFERENCE} {part}"
    if part == "overhead" and variant != "bare loop":
        return "bare loop overhead"
    return None
