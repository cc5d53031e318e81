"""`python -m bench.routines`: routines recorded on one MiniWoB++ episode, replayed on new ones.

For each task, the DOM oracle (tests/support/miniwob_oracle.py) solves one episode through the step
engine, which records it; the session is compiled into a routine; the routine is replayed, without
the model, on new episodes of the same task (the page picks new texts and, for some tasks, new
positions) and, with --perturb, on a page zoomed differently. Every step is approved automatically
(the bench counts the steps that would have been asked). A parameter's value for a new episode is
read from its instruction, where the recorded value stood in the recorded one.

Prints a table and writes JSON: success per task, steps located without the model, time per
replayed step (locating and acting; settling apart), model calls, and the oracle-driven agent loop
on the same episodes for comparison. A wrong click is an episode the page scored below zero.

    python -m bench.routines --episodes 5
"""

from __future__ import annotations

import argparse
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

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "routines_results.json"
# Tasks whose solution is the same sequence of targets in every episode (texts may change).
ROUTINE_TASKS = ("focus-text", "enter-text", "enter-password", "login-user", "click-dialog")


@dataclass
class TaskRow:
    task: str
    condition: str
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
    """Approves every step, counting them; stops at any problem (never guesses)."""

    def __init__(self) -> None:
        self.asked = 0
        self.problems: list[str] = []

    def decide(self, request: Any) -> Any:
        from holodesk.automation.routines.replay import Verdict

        self.asked += 1
        return Verdict.APPROVE_ALL_EXACT

    def problem(self, request: Any) -> Any:
        from holodesk.automation.routines.replay import ProblemChoice

        self.problems.append(request.problem)
        return ProblemChoice.STOP

    def offer_repair(self, request: Any) -> bool:
        return False


def run_task(browser: Any, capture: Any, task: str, seeds: Sequence[int], work: Path, condition: str) -> TaskRow:
    """Record on seed 0, replay on `seeds` (each also solved by the agent loop for comparison)."""
    from holodesk.app.eval.miniwob_eval import MiniWoBEvaluation, MiniWoBOptions
    from holodesk.automation.executor import Executor
    from holodesk.automation.routines.compiler import compile_session, save_compiled
    from holodesk.automation.routines.replay import ReplayOutcome, RoutineRunner
    from holodesk.automation.routines.routine_file import load_routine
    from holodesk.automation.trajectory import read_session
    from holodesk.inference.model_policy import ModelPolicy
    from holodesk.inference.profiles import get_profile
    from tests.support.miniwob_oracle import MiniWoBOracle

    row = TaskRow(task, condition)
    oracle = MiniWoBOracle(browser, capture.monitors()[0].rect)
    executor = Executor(capture=capture)
    evaluation = MiniWoBEvaluation(
        browser,
        ModelPolicy(get_profile("holotron"), oracle),
        executor,
        capture,
        MiniWoBOptions(tasks=(task,), episodes=1),
        trajectory_root=work / "sessions",
    )
    browser.open_task(task)
    recorded = evaluation.run_episode(task, 0)
    if not recorded.success or recorded.trajectory is None:
        row.failures.append(f"the oracle did not solve the recorded episode: {recorded.detail}")
        return row
    name = f"{task}-{condition}"
    folder = save_compiled(compile_session(read_session(Path(recorded.trajectory)), name), work / "routines")
    routine = load_routine(folder)
    defaults = {p.name: p.default for p in routine.parameters}
    for seed in seeds:
        # The agent loop (the oracle as its model) on the same episode, for comparison.
        agent = evaluation.run_episode(task, seed)
        row.agent_successes += agent.success
        row.agent_seconds.append(agent.seconds)
        instruction = browser.start_episode(seed, 30.0)
        approver = AutoApprove()
        runner = RoutineRunner(routine, executor, capture, approver)
        started = time.perf_counter()
        result = runner.run(parameter_values_from(routine.task, defaults, instruction))
        row.replay_seconds.append(time.perf_counter() - started)
        state = browser.state()
        if not state.done:
            browser.end_episode()
        row.episodes += 1
        success = state.done and state.raw_reward > 0 and result.outcome is ReplayOutcome.DONE
        row.successes += success
        row.wrong += state.done and state.raw_reward < 0
        row.asked += approver.asked
        row.model_calls += result.model_calls
        for record in result.records:
            row.steps += 1
            row.steps_without_model += record.model_calls == 0
            row.step_ms.append(record.locate_ms + record.act_ms)
        if not success:
            row.failures.append(f"seed {seed}: {result.outcome.value}: {result.detail} {approver.problems}")
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.routines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=5, help="replayed episodes per task (default 5)")
    parser.add_argument("--tasks", default=",".join(ROUTINE_TASKS))
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
    from holodesk.automation.screen import ScreenCapture
    from holodesk.automation.virtual_display import DisplayLayout, xvfb_display

    tasks = [t for t in args.tasks.split(",") if t]
    seeds = list(range(1, args.episodes + 1))
    rows: list[TaskRow] = []
    with xvfb_display(DisplayLayout(1280, 800)), tempfile.TemporaryDirectory() as work:
        capture = ScreenCapture()
        with MiniWoBBrowser(zoom=3) as browser:
            for task in tasks:
                rows.append(run_task(browser, capture, task, seeds, Path(work) / task, "unperturbed"))
                print(_line(rows[-1]), flush=True)
    print(table(rows))
    for row in rows:
        for failure in row.failures:
            print(f"  {row.task}: {failure}")
    args.output.write_text(json.dumps([asdict(row) for row in rows], indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


def _line(row: TaskRow) -> str:
    return f"{row.task} ({row.condition}): {row.successes}/{row.episodes}"


def table(rows: Sequence[TaskRow]) -> str:
    head = (
        f"{'task':16} {'condition':12} {'replay ok':>9} {'agent ok':>8} {'wrong':>5} {'no-model steps':>14} "
        f"{'asked':>5} {'model calls':>11} {'ms/step med':>11} {'replay s':>8} {'agent s':>7}"
    )
    lines = [head]
    for r in rows:
        median = statistics.median(r.step_ms) if r.step_ms else float("nan")
        replay = statistics.median(r.replay_seconds) if r.replay_seconds else float("nan")
        agent = statistics.median(r.agent_seconds) if r.agent_seconds else float("nan")
        lines.append(
            f"{r.task:16} {r.condition:12} {r.successes:>4}/{r.episodes:<4} {r.agent_successes:>3}/{r.episodes:<4}"
            f" {r.wrong:>5} {r.steps_without_model:>7}/{r.steps:<6} {r.asked:>5} {r.model_calls:>11}"
            f" {median:>11.0f} {replay:>8.2f} {agent:>7.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
