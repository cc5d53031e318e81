"""`python -m bench.routines`: routines recorded on one MiniWoB++ episode, replayed on new ones.

For each task, the DOM oracle (bench/rigs/miniwob_oracle.py) solves one episode through the step
engine, which records it; the session is compiled into a routine; the routine is replayed, without
the model, on new episodes of the same task (the page picks new texts and, for some tasks, new
positions), and under perturbations of the page added by a style sheet after recording: zoomed
(110%, 125%), shifted (a banner above and a margin beside the task), another theme (colours
inverted) and another font. Each perturbation is checked to change the page: the screenshot
differs and, for zoom and shift, the task area moved on the screen (said in the JSON).

Each episode is replayed twice: without the model, and with the model fallback through a
vLLM-like HTTP server on 127.0.0.1 (bench/rigs/fake_openai_server.py). That server's answers
come from the DOM oracle (the element's true centre), so the fallback rows measure the plumbing
(request, mapping, approval, acting), never a model's accuracy. A replay is what the app runs: the
step engine with the routine as its proposer, recording a session. Every step the engine's rules
show is answered "approve all" (the bench counts them: the steps a user would be shown); any
problem stops the replay (never a guess). A parameter's value for a new episode is read from its instruction, where
the recorded value stood in the recorded one.

Prints a table and writes JSON: success per task and condition, steps located without the model,
time per replayed step (from the engine asking for it to its action done: locating, the step
written ahead with its screenshot, acting; settling apart), model calls, and the oracle-driven
agent loop on the same episodes for comparison. A wrong click is an episode the page scored below
zero.

    python -m bench.routines --episodes 5
    python -m bench.routines --episodes 2 --perturbations unperturbed --no-fallback   # quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer
from bench.rigs.miniwob_oracle import MiniWoBOracle
from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.app.eval.miniwob_eval import MiniWoBEvaluation, MiniWoBOptions, wait_until_drawn
from holodesk.automation.engine_protocols import ApprovalDecision, Decision, EngineEvent, EngineState, Outcome
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.routines.grounding import ModelGrounder
from holodesk.automation.routines.routine_file import load_routine
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.screen_change import wait_for_settle
from holodesk.automation.trajectory import read_session
from holodesk.automation.virtual_display import DisplayLayout, xvfb_display
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.remote import RemoteBackend, RetryPolicy

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "routines_results.json"
# Tasks whose solution is the same sequence of targets in every episode (texts may change).
ROUTINE_TASKS = ("focus-text", "enter-text", "enter-password", "login-user", "click-dialog")
# Style sheets put on the page after recording; "unperturbed" is the page as recorded.
PERTURBATIONS: dict[str, str] = {
    "unperturbed": "",
    "zoom-110": "#wrap { transform: scale(1.1); transform-origin: 0 0; }",
    "zoom-125": "#wrap { transform: scale(1.25); transform-origin: 0 0; }",
    "shifted": "body::before { content: ''; display: block; height: 14px; background: #d0d0d0; }"
    " #wrap { margin-left: 12px; }",
    "inverted": "#wrap { filter: invert(1) hue-rotate(180deg); }",
    "serif-font": "* { font-family: 'DejaVu Serif', serif !important; }",
}
MOVES_THE_AREA = frozenset({"zoom-110", "zoom-125", "shifted"})
STYLE_ID = "holodesk-bench-perturbation"
AREA_RECT_JS = (
    "var r = document.querySelector('#area').getBoundingClientRect(); return [r.left, r.top, r.width, r.height];"
)


@dataclass
class TaskRow:
    task: str
    condition: str
    fallback: str = "none"  # "none", or "fake server (oracle answers)"
    perturbation_check: str = ""
    episodes: int = 0
    successes: int = 0
    wrong: int = 0  # the page scored the episode below zero: something was clicked that should not be
    steps: int = 0
    steps_without_model: int = 0
    asked: int = 0
    model_calls: int = 0
    step_ms: list[float] = field(default_factory=list)
    agent_successes: int = 0
    agent_seconds: list[float] = field(default_factory=list)
    replay_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def parameter_values_from(task_pattern: str, defaults: dict[str, str], instruction: str) -> dict[str, str]:
    """The parameters' values in `instruction`, where their recorded values stood in `task_pattern`."""
    pattern = re.escape(task_pattern)
    group_of: dict[str, str] = {}  # a recorded value -> the group that reads it (one value may be typed twice)
    for name, value in sorted(defaults.items(), key=lambda item: -len(item[1])):
        if value not in group_of and re.escape(value) in pattern:
            pattern = pattern.replace(re.escape(value), f"(?P<{name}>.+?)", 1)
            group_of[value] = name
    match = re.fullmatch(pattern, instruction)
    if match is None:
        return dict(defaults)
    return {name: match.group(group_of[value]) if value in group_of else value for name, value in defaults.items()}


class AutoApprove:
    """Approves every step it is shown with "approve all" (the engine's rules decide which steps it is
    shown: they are the steps that would have been asked), counting them; stops at any problem."""

    def __init__(self) -> None:
        self.asked = 0
        self.problems: list[str] = []

    def decide(self, request: Any) -> Any:
        self.asked += 1
        return ApprovalDecision(Decision.APPROVE_ALL_EXACT)

    def problem(self, request: Any) -> Any:
        # heavy: OpenCV
        from holodesk.automation.routines.replay import ProblemChoice

        self.problems.append(request.problem)
        return ProblemChoice.STOP

    def offer_repair(self, request: Any) -> bool:
        return False


def set_perturbation(browser: Any, css: str) -> None:
    """Put `css` on the open page (replacing an earlier perturbation); empty removes it."""
    browser.run_js(
        "var old = document.getElementById(arguments[0]); if (old) { old.remove(); }"
        "if (arguments[1]) { var s = document.createElement('style'); s.id = arguments[0];"
        " s.textContent = arguments[1]; document.head.appendChild(s); }",
        STYLE_ID,
        css,
    )


def check_perturbation(browser: Any, capture: Any, name: str, seed: int) -> str:
    """Start episode `seed` as recorded, then perturbed: how the page changed (ValueError if it did not)."""

    def settled() -> Any:
        return wait_for_settle(lambda: capture.grab(1), 3.0, 0.05)[0]

    set_perturbation(browser, "")
    browser.start_episode(seed, 30.0)
    before, area_before = settled(), browser.run_js(AREA_RECT_JS)
    set_perturbation(browser, PERTURBATIONS[name])
    after, area_after = settled(), browser.run_js(AREA_RECT_JS)
    browser.end_episode()
    changed = int(
        (abs(before.pixels[:, :, :3].astype(int) - after.pixels[:, :, :3].astype(int)).max(axis=2) > 24).sum()
    )
    if changed == 0:
        raise ValueError(f"the perturbation {name} did not change the screen")
    moved = [round(a - b, 1) for a, b in zip(area_after, area_before, strict=True)]
    if name in MOVES_THE_AREA and not any(moved):
        raise ValueError(f"the perturbation {name} did not move the task area")
    return f"{changed} pixels changed; task area (left, top, width, height) moved by {moved} CSS px"


def describe_targets(routine: Any, session: Any) -> Any:
    """The oracle names no element (the model's `element`): give each target the recorded step's
    thought instead, as a person editing the file would, so the model rung has words to look for."""
    from dataclasses import replace

    thoughts = [str(s.get("thought") or s.get("note") or "") for s in session.steps if s.get("decision") == "approve"]
    steps = []
    for step, thought in zip(routine.steps, thoughts, strict=False):
        if step.target is not None and not step.target.element and thought:
            step = replace(step, target=replace(step.target, element=thought))
        steps.append(step)
    return replace(routine, steps=tuple(steps))


class OracleFedPolicy:
    """The model's `locate` through the HTTP server, whose answer is queued from the DOM oracle just before.

    The request and its answer take the whole real path (RemoteBackend, the profile's parser, the
    coordinate mapping); only the answer's content is the oracle's, so this measures the plumbing.
    """

    def __init__(self, oracle: Any, server: Any, policy: Any) -> None:
        self.oracle, self.server, self.policy = oracle, server, policy

    def locate(self, frame: Any, instruction: str) -> Any:
        image = self.policy.profile.prepare_image(frame)
        step = json.loads(self.oracle.answer(image.image.width, image.image.height))
        point = {"x": step["action"]["x"], "y": step["action"]["y"]}
        self.server.queue(Completion(text=json.dumps(point)))
        return self.policy.locate(frame, instruction)


def run_task(
    browser: Any,
    capture: Any,
    task: str,
    seeds: Sequence[int],
    work: Path,
    perturbations: Sequence[str] = ("unperturbed",),
    server: Any = None,
) -> list[TaskRow]:
    """Record on seed 0, replay on `seeds` under each perturbation, without and (given `server`) with
    the model fallback; each episode also solved by the agent loop for comparison."""
    # heavy: OpenCV
    from holodesk.automation.routines.compiler import compile_session, save_compiled

    oracle = MiniWoBOracle(browser, capture.monitors()[0].rect)
    input_performer = InputPerformer(X11Input(capture=capture))
    evaluation = MiniWoBEvaluation(
        browser,
        ModelPolicy(get_profile("holotron"), oracle),
        input_performer,
        capture,
        MiniWoBOptions(tasks=(task,), episodes=1),
        trajectory_root=work / "sessions",
    )
    browser.open_task(task)
    # A freshly opened task shows MiniWoB's START cover until its first episode has been drawn; the
    # engine's first screenshot could catch it (the oracle still solves from the DOM, but the
    # routine would hold pictures of the cover). One episode started and settled removes it.
    from holodesk.automation.screen_change import wait_for_settle

    cover = capture.grab(1).pixels.copy()
    browser.start_episode(0, 30.0)
    deadline = time.monotonic() + 5.0
    while (capture.grab(1).pixels == cover).all() and time.monotonic() < deadline:
        time.sleep(0.05)  # until the cover is gone from the screen (bounded)
    wait_for_settle(lambda: capture.grab(1), 3.0, 0.05)
    browser.end_episode()
    recorded = evaluation.run_episode(task, 0)
    if not recorded.success or recorded.trajectory is None:
        row = TaskRow(task, "unperturbed")
        row.failures.append(f"the oracle did not solve the recorded episode: {recorded.detail}")
        return [row]
    folder = save_compiled(compile_session(read_session(Path(recorded.trajectory)), task), work / "routines")
    routine = describe_targets(load_routine(folder), read_session(Path(recorded.trajectory)))
    grounder = None
    if server is not None:
        backend = RemoteBackend(server.base_url, model=None, api_key="", retry=RetryPolicy(max_attempts=1))
        policy = ModelPolicy(get_profile("holotron"), backend)
        grounder = ModelGrounder(OracleFedPolicy(oracle, server, policy))
    fallbacks = [("none", None)] + ([("fake server (oracle answers)", grounder)] if grounder else [])
    rows: list[TaskRow] = []
    for name in perturbations:
        check = "" if name == "unperturbed" else check_perturbation(browser, capture, name, seeds[0])
        condition_rows = [TaskRow(task, name, fallback, check) for fallback, _ in fallbacks]
        set_perturbation(browser, PERTURBATIONS[name])
        for seed in seeds:
            agent = evaluation.run_episode(task, seed)
            for row, (_, model) in zip(condition_rows, fallbacks, strict=True):
                row.agent_successes += agent.success
                row.agent_seconds.append(agent.seconds)
                replay_episode(browser, capture, input_performer, routine, seed, row, model, work / "replays")
        set_perturbation(browser, "")
        rows.extend(condition_rows)
    return rows


def replay_episode(
    browser: Any, capture: Any, input_performer: Any, routine: Any, seed: int, row: TaskRow, model: Any, sessions: Path
) -> None:
    """Replay `routine` on episode `seed` as the app does (a run of the step engine, recorded under `sessions`)."""
    # heavy: OpenCV
    from holodesk.automation.routines.replay import RoutinePolicy, routine_engine

    defaults = {p.name: p.default for p in routine.parameters}
    before = capture.grab(1)
    instruction = browser.start_episode(seed, 30.0)
    wait_until_drawn(capture, 1, before)
    approver = AutoApprove()
    values = parameter_values_from(routine.task, defaults, instruction)
    policy = RoutinePolicy(routine, values, capture, approver, grounder=model)
    # A replayed step's time: from the engine asking for it (locating) to its action done (the
    # screenshot written ahead included), settling apart.
    began: dict[int, float] = {}
    step_ms: list[float] = []

    def listener(event: EngineEvent) -> None:
        if event.state is EngineState.THINKING:
            began[event.step] = time.perf_counter()
        elif event.state is EngineState.SETTLING and event.step in began:
            step_ms.append((time.perf_counter() - began.pop(event.step)) * 1000)

    engine = routine_engine(
        policy,
        approver,
        input_performer,
        capture,
        trajectory_root=sessions,
        monitor=1,
        agent_steps=1,
        listener=listener,
    )
    started = time.perf_counter()
    result = engine.run(routine.task)
    row.replay_seconds.append(time.perf_counter() - started)
    state = browser.state()
    if not state.done:
        browser.end_episode()
    row.episodes += 1
    success = state.done and state.raw_reward > 0 and result.outcome is Outcome.DONE
    row.successes += success
    row.wrong += state.done and state.raw_reward < 0
    row.asked += approver.asked
    row.model_calls += policy.model_calls
    for record in policy.records:
        row.steps += 1
        row.steps_without_model += record.model_calls == 0
    row.step_ms.extend(step_ms)
    if not success:
        row.failures.append(f"seed {seed}: {result.outcome.value}: {result.detail} {approver.problems}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.routines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=5, help="replayed episodes per task (default 5)")
    parser.add_argument("--tasks", default=",".join(ROUTINE_TASKS))
    parser.add_argument("--perturbations", default=",".join(PERTURBATIONS), help="of: " + ", ".join(PERTURBATIONS))
    parser.add_argument("--no-fallback", action="store_true", help="replay without the model only")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    tasks = [t for t in args.tasks.split(",") if t]
    perturbations = [p for p in args.perturbations.split(",") if p]
    unknown = sorted(set(perturbations) - set(PERTURBATIONS))
    if unknown:
        parser.error(f"unknown perturbations: {', '.join(unknown)}")
    seeds = list(range(1, args.episodes + 1))
    rows: list[TaskRow] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(xvfb_display(DisplayLayout(1280, 800)))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server = None if args.no_fallback else stack.enter_context(FakeOpenAIServer())
        capture = ScreenCapture()
        browser = stack.enter_context(MiniWoBBrowser(zoom=3))
        for task in tasks:
            for row in run_task(browser, capture, task, seeds, work / task, perturbations, server):
                rows.append(row)
                print(_line(row), flush=True)
        if server is not None and server.problems:
            print(f"the fake server saw requests vLLM would refuse: {server.problems}")
    print(table(rows))
    for row in rows:
        if row.perturbation_check and row.fallback == "none":
            print(f"  {row.task} {row.condition}: {row.perturbation_check}")
        for failure in row.failures:
            print(f"  {row.task} {row.condition} fallback {row.fallback}: {failure[:300]}")
    args.output.write_text(json.dumps([asdict(row) for row in rows], indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


def _line(row: TaskRow) -> str:
    return f"{row.task} ({row.condition}, fallback {row.fallback}): {row.successes}/{row.episodes}"


def table(rows: Sequence[TaskRow]) -> str:
    head = (
        f"{'task':16} {'condition':12} {'fallback':8} {'replay ok':>9} {'agent ok':>8} {'wrong':>5}"
        f" {'no-model steps':>14} {'asked':>5} {'model calls':>11} {'ms/step med':>11} {'replay s':>8} {'agent s':>7}"
    )
    lines = [head]
    for r in rows:
        median = statistics.median(r.step_ms) if r.step_ms else float("nan")
        replay = statistics.median(r.replay_seconds) if r.replay_seconds else float("nan")
        agent = statistics.median(r.agent_seconds) if r.agent_seconds else float("nan")
        lines.append(
            f"{r.task:16} {r.condition:12} {'fake' if r.fallback != 'none' else 'none':8}"
            f" {r.successes:>4}/{r.episodes:<4} {r.agent_successes:>3}/{r.episodes:<4}"
            f" {r.wrong:>5} {r.steps_without_model:>7}/{r.steps:<6} {r.asked:>5} {r.model_calls:>11}"
            f" {median:>11.0f} {replay:>8.2f} {agent:>7.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
