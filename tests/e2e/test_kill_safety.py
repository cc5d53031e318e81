"""Kill `holodesk run` at random moments during long drags and typing; nothing stays held, no step is lost.

Each run gets its approvals as soon as it asks for step 1 and is then killed (SIGKILL, SIGTERM or
SIGINT, 10 of each in a shuffled order) at a chosen moment, while it drags across the screen or
types a long text. The moments are laid out, not drawn blindly: for each signal and each first step
(a drag, or typing), one kill right after approving (before the pointer moves), one at a random
moment in each third of the first second (the first action), and one once step 2 was proposed
(between the steps or in step 2's action, whatever the machine's speed; a plain random draw of 20
a signal left some of these to luck and to the load). Then the X server is asked (not pyautogui)
which buttons and keys it considers held, and the project's reader is asked which steps the session has:

- SIGTERM and SIGINT stop the run like the Stop button: exit 3 within a few seconds, an end record
  "stopped", nothing held.
- After SIGKILL a button or key may be held; the next start must release it before it asks anything
  (`holodesk doctor` does the same: tests/automation/test_held_input.py).
- Every step that began is in the session: each action moves the pointer to its own row of the screen
  first, so where the pointer is after the kill says which step had begun; that step and every one
  before it must be there (a step cut by SIGKILL reads as interrupted).

Figures (kills, held at the kill, stuck after recovery, lost steps, time to exit) are printed.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.e2e.scripting import holotron, model_point
from tests.support import x11_probe
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack

# Per signal, split evenly between the two scripts (drag first, typing first): each gets a kill at 0 s,
# one in each of the (KILLS_PER_SIGNAL / 2 - 2) equal slices of MAX_DELAY_S, and one after step 2's prompt.
KILLS_PER_SIGNAL = int(os.environ.get("HOLODESK_KILLS_PER_SIGNAL", "10"))
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
PARK = Point(5, 5)  # where the pointer waits between runs; no action goes near it
MAX_DELAY_S = 1.0  # kill this long at most after approving: inside the first action or just after it
TEXT = "the quick brown fox jumps over the lazy dog; " * 12
ROWS = (150, 300, 450, 600, 750, 900)  # each step acts on its own row of the screen


def _steps(screen: Rect, drag_first: bool) -> list[tuple[str, int, str]]:
    """(kind, row, model answer) for each step: drags and typing alternate, each on its own row."""
    steps = []
    for number, row in enumerate(ROWS):
        start, end = model_point(Point(100, row), screen), model_point(Point(1800, row), screen)
        if (number % 2 == 0) == drag_first:
            answer = holotron("drag_to_desktop", start_x=start.x, start_y=start.y, x=end.x, y=end.y)
            steps.append(("drag", row, answer))
        else:
            steps.append(("type", row, holotron("write_desktop", content=TEXT, x=start.x, y=start.y)))
    return steps


class Kill(NamedTuple):
    """One run's kill: the signal, the script, which step's prompt to wait for, then how long after it."""

    sig: signal.Signals
    drag_first: bool
    after_prompt: int  # 1: counted from the approvals (sent at step 1's prompt); 2: from step 2's prompt
    delay_s: float


def kill_plan(rng: random.Random, kills_per_signal: int) -> list[Kill]:
    """Every run's kill, shuffled.

    For each signal and script: delay 0 (killed before the first action moves anything), one delay
    drawn inside each equal slice of (0, MAX_DELAY_S] (every part of the first action, where in its
    slice varying with the seed), and one within MAX_DELAY_S / 2 of step 2's prompt, which a time
    from the start reaches only on a fast machine.
    """
    if kills_per_signal < 6 or kills_per_signal % 2:
        raise ValueError(f"HOLODESK_KILLS_PER_SIGNAL must be even and at least 6, not {kills_per_signal}")
    slices = kills_per_signal // 2 - 2
    width = MAX_DELAY_S / slices
    plan = []
    for sig in SIGNALS:
        for drag_first in (True, False):
            plan.append(Kill(sig, drag_first, 1, 0.0))
            plan += [Kill(sig, drag_first, 1, rng.uniform(k * width, (k + 1) * width)) for k in range(slices)]
            plan.append(Kill(sig, drag_first, 2, rng.uniform(0.0, MAX_DELAY_S / 2)))
    rng.shuffle(plan)
    return plan


def _begun_step(pointer: tuple[int, int]) -> int:
    """The step (1-based) whose row the pointer is on, or 0 when it never left its parking place."""
    x, y = pointer
    if (x, y) == (PARK.x, PARK.y):
        return 0
    for number, row in enumerate(ROWS, start=1):
        if abs(y - row) <= 2 and 95 <= x <= 1805:
            return number
    raise AssertionError(f"the pointer is at {pointer}, on no step's row")


def _held() -> tuple[list[str], list[int]]:
    _, _, buttons = x11_probe.pointer()
    return buttons, x11_probe.pressed_keycodes()


class _Run:
    """One `holodesk run` with its stdout lines on a queue."""

    def __init__(self, script: Path, sessions: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [*HOLODESK_COMMAND, "run", "Drag and type", "--backend", "scripted", "--script", str(script),
             "--sessions", str(sessions), "--max-steps", str(len(ROWS))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.process.stdout is not None
        stdout = self.process.stdout
        threading.Thread(target=lambda: [self.lines.put(line) for line in stdout], daemon=True).start()

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {timeout_s} s; seen: {self.seen[-5:]}") from None
            self.seen.append(line)
            if text in line:
                return

    def drain(self) -> None:
        while not self.lines.empty():
            self.seen.append(self.lines.get_nowait())

    def prompts(self) -> list[int]:
        return [int(line.split()[1]) for line in self.seen if line.startswith("Step ") and "proposes:" in line]


def test_kills_at_random_moments_leave_nothing_held_and_lose_no_step(xvfb, tmp_path):
    rng = random.Random(int(os.environ.get("HOLODESK_KILL_SEED", "11")))
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    scripts = {}
    for drag_first in (True, False):
        path = tmp_path / f"script-{'drag' if drag_first else 'type'}-first.jsonl"
        path.write_text("".join(json.dumps(a) + "\n" for _, _, a in _steps(screen, drag_first)), encoding="utf-8")
        scripts[drag_first] = path
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_RUNTIME_DIR": str(runtime)}
    sessions = tmp_path / "sessions"
    plan = kill_plan(rng, KILLS_PER_SIGNAL)

    figures: dict[str, Counter[str]] = {sig.name: Counter() for sig in SIGNALS}
    exit_times: dict[str, list[float]] = {sig.name: [] for sig in SIGNALS}
    problems: list[str] = []
    started = time.monotonic()
    for attempt, (sig, drag_first, after_prompt, delay_s) in enumerate(plan):
        name = sig.name
        x11_probe.move_pointer_like_the_user(PARK.x, PARK.y)
        before = set(iter_session_folders(sessions))
        run = _Run(scripts[drag_first], sessions, env)
        try:
            run.wait_for("Step 1 proposes:", 60)
            # The start released whatever an earlier SIGKILL left held, before asking anything.
            buttons, keys = _held()
            if buttons or keys:
                problems.append(f"run {attempt}: held at the start of the next run: {buttons} {keys}")
            assert run.process.stdin is not None
            run.process.stdin.write("a\n" * len(ROWS))
            run.process.stdin.flush()
            if after_prompt == 2:
                run.wait_for("Step 2 proposes:", 60)
            time.sleep(delay_s)
            killed_at = time.monotonic()
            run.process.send_signal(sig)
            try:
                returncode = run.process.wait(10)
            except subprocess.TimeoutExpired:
                problems.append(f"run {attempt}: still running 10 s after {name} (deadlock?)")
                run.process.kill()
                returncode = run.process.wait(10)
            exit_times[name].append(time.monotonic() - killed_at)
        finally:
            if run.process.poll() is None:
                run.process.kill()
                run.process.wait(10)
        run.drain()
        figures[name]["kills"] += 1
        buttons, keys = _held()
        if buttons or keys:
            figures[name]["held right after"] += 1
            if sig is not signal.SIGKILL:
                figures[name]["stuck"] += 1
                problems.append(f"run {attempt}: {name} left held: buttons {buttons}, keycodes {keys}")
        begun = _begun_step(x11_probe.pointer()[:2])
        # A step prompted after another means that other one finished; the pointer's row names the last begun.
        prompts = run.prompts()
        must_have = max([begun, *(n - 1 for n in prompts)])

        (folder,) = set(iter_session_folders(sessions)) - before
        session = read_session(folder)
        recorded = {step["index"]: step for step in session.steps}
        lost = [n for n in range(1, must_have + 1) if n not in recorded]
        figures[name]["lost steps"] += len(lost)
        figures[name]["interrupted steps"] += len(session.interrupted_steps)
        figures[name]["killed mid-action"] += int(begun > 0 and begun not in {n - 1 for n in prompts})
        figures[name]["before any action"] += int(begun == 0)
        figures[name]["past step 1"] += int(len(prompts) > 1)  # between steps or in step 2's action
        if lost:
            problems.append(f"run {attempt}: {name} lost steps {lost} (begun: {begun}, prompts {prompts})")
        for index, step in recorded.items():
            # An approved step acted (or was cut while acting): it has a result, or reads as interrupted.
            if step.get("decision") in ("approve", "edit") and not step.get("result"):
                problems.append(f"run {attempt}: approved step {index} has no result and is not marked interrupted")
        if sig is signal.SIGKILL:
            interrupted = sorted(step["index"] for step in session.interrupted_steps)
            # Only the step that was acting when the process died may read as interrupted (every other
            # step's result was written): the last one whose pointer moved, or the next one, written
            # ahead but killed before its pointer moved. One whose action was visibly under way (a
            # button or a key still held at the kill) must: it never wrote its result.
            if len(interrupted) > 1 or not set(interrupted) <= {begun, begun + 1}:
                problems.append(f"run {attempt}: steps {interrupted} read as interrupted; step {begun} was acting")
            if (buttons or keys) and interrupted != [begun]:
                problems.append(
                    f"run {attempt}: killed during step {begun}'s action (held: {buttons} {keys}), "
                    f"but the session says interrupted: {interrupted}"
                )
        else:
            if returncode != 3 or session.outcome != "stopped" or session.interrupted_steps:
                problems.append(
                    f"run {attempt}: {name} gave exit {returncode}, outcome {session.outcome!r}, "
                    f"{len(session.interrupted_steps)} interrupted steps"
                )

    # One more start releases what the last kill may have left held; then quit at the first prompt.
    last = _Run(scripts[True], sessions, env)
    try:
        last.wait_for("Step 1 proposes:", 60)
        buttons, keys = _held()
        if buttons or keys:
            problems.append(f"held at the start of the final run: {buttons} {keys}")
        assert last.process.stdin is not None
        last.process.stdin.write("q\n")
        last.process.stdin.flush()
        assert last.process.wait(30) == 3
    finally:
        if last.process.poll() is None:
            last.process.kill()
    figures["SIGKILL"]["stuck"] = sum("held at the start" in p for p in problems)

    elapsed = time.monotonic() - started
    print(f"\n{len(plan)} kills in {elapsed:.0f} s")
    for name, counts in figures.items():
        times = sorted(exit_times[name])
        print(
            f"{name:8} kills {counts['kills']:3}  before any action {counts['before any action']:3}  "
            f"mid-action {counts['killed mid-action']:3}  past step 1 {counts['past step 1']:3}  "
            f"held right after {counts['held right after']:3}  stuck {counts['stuck']:3}  "
            f"lost steps {counts['lost steps']:3}  interrupted steps {counts['interrupted steps']:3}  "
            f"exit median {times[len(times) // 2] * 1000:5.0f} ms, max {times[-1] * 1000:5.0f} ms"
        )
    assert not problems, "\n".join(problems)
    assert all(counts["kills"] == KILLS_PER_SIGNAL for counts in figures.values())
