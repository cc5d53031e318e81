"""`holodesk routine save | list | run`: routines from the terminal.

save SESSION NAME  compiles a finished session (a folder name or unique prefix) into a routine,
                   says which steps were left out and why, and asks to confirm each proposed
                   parameter (Enter keeps it, a new name renames it, n makes the text literal).
list               every routine: name, steps, parameters, task (a broken one says what is wrong).
run NAME           replays it (--set PARAM=VALUE for parameters); the model locates what the
                   pictures cannot find unless --no-model. The replay is a run of the step
                   engine, recorded as a session (`holodesk history`), stopped by Ctrl+C,
                   SIGTERM and SIGHUP like `holodesk run`; "continue with the agent" hands the
                   same run to the model.

Exit codes as `holodesk run`: 0 done, 1 failed, 2 bad arguments, 3 stopped.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from holodesk.app.cli.run_command import (
    EXIT_CODES,
    PICTURES_PREFIX,
    _policy_or_exit_code,
    _remove_pictures_of_dead_runs,
    late_signals,
    stopped_before_start,
    unsafe_runtime_dir,
)
from holodesk.app.cli.stop_signals import InterruptibleApprover, StopSignals, signals_stop_the_run
from holodesk.app.cli.terminal_approver import TerminalApprover, terminal_event_printer
from holodesk.app.common.session_words import steps_in_words
from holodesk.automation.actions import Point
from holodesk.automation.backends import create_backends
from holodesk.automation.display_text import safe_text
from holodesk.automation.engine_protocols import ActionPerformer, FrameSource, RunResult
from holodesk.automation.errors import AutomationError
from holodesk.automation.held_input import release_leftover_input
from holodesk.automation.routines.compiler import CompiledRoutine, CompileError, compile_session, save_compiled
from holodesk.automation.routines.grounding import ModelGrounder
from holodesk.automation.routines.locators import Grounder
from holodesk.automation.routines.replay import (
    HandOver,
    ParameterError,
    RoutinePolicy,
    parameter_values,
    routine_engine,
    task_with_values,
)
from holodesk.automation.routines.routine_file import (
    PARAMETER_PATTERN,
    Parameter,
    Routine,
    RoutineFileError,
    load_routine,
    routine_folders,
)
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.trajectory import TrajectoryWriteError, check_writable, iter_session_folders, read_session

if TYPE_CHECKING:
    from holodesk.app.common.settings import Settings

EXIT_DONE, EXIT_CONFIG = 0, 2


def find_session(root: Path, name: str) -> Path | str:
    """The session folder `name` names (a path, a folder name or a unique prefix), or why not."""
    if Path(name).is_dir() and (Path(name) / "session.jsonl").is_file():
        return Path(name)
    matches = [f for f in iter_session_folders(root) if f.name.startswith(name)]
    if not matches:
        return f"no session matches {name!r} under {root} (holodesk history lists them)"
    if len(matches) > 1 and not any(m.name == name for m in matches):
        return f"{len(matches)} sessions start with {name!r}; give more of the name"
    return next((m for m in matches if m.name == name), matches[0])


def save(sessions: Path, session_name: str, name: str, routines: Path, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    folder = find_session(sessions, session_name)
    if isinstance(folder, str):
        err.write(f"error: {folder}\n")
        return EXIT_CONFIG
    session = read_session(folder)
    try:
        compiled = compile_session(session, name)
    except (CompileError, ValueError) as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    for line in compiled.left_out:
        out.write(f"left out: {safe_text(line)}\n")
    for line in compiled.warnings:
        out.write(f"warning: {safe_text(line)}\n")
    if session.outcome != "done":
        out.write(f"note: the session ended {session.outcome!r}, not done; only the steps that ran are kept\n")
    compiled = confirm_parameters(compiled, stdin, out)
    try:
        saved = save_compiled(compiled, routines)
    except FileExistsError as exc:
        err.write(f"error: {exc}; choose another name\n")
        return EXIT_CONFIG
    except OSError as exc:
        err.write(f"error: cannot write the routine under {routines}: {exc.strerror or exc}\n")
        return EXIT_CONFIG
    routine = compiled.routine
    out.write(
        f"saved the routine {routine.name!r}: {steps_in_words(len(routine.steps))}, in {saved / 'routine.toml'}\n"
    )
    for step in routine.steps:
        flag = "  (always asked: irreversible)" if step.irreversible else ""
        out.write(f"  {step.number}. {safe_text(step.describe())}{flag}\n")
    return EXIT_DONE


def confirm_parameters(compiled: CompiledRoutine, stdin: TextIO, out: TextIO) -> CompiledRoutine:
    """Ask about each proposed parameter: Enter keeps it, a name renames it, n types the text literally."""
    routine = compiled.routine
    kept: list[Parameter] = []
    steps = list(routine.steps)
    for parameter in routine.parameters:
        out.write(
            f"parameter {parameter.name} = {safe_text(parameter.default)!r} ({safe_text(parameter.description)}); "
            "Enter keeps it, a new name renames it, n types the text as recorded > "
        )
        out.flush()
        answer = stdin.readline().strip()
        if answer.lower() in ("n", "no"):
            steps = [replace(s, text_parameter="") if s.text_parameter == parameter.name else s for s in steps]
            continue
        new_name = parameter.name
        if answer and PARAMETER_PATTERN.match(answer) and answer not in {p.name for p in kept}:
            new_name = answer
        elif answer:
            out.write(f"  {answer!r} is not a usable name (lower-case letters, digits, _); kept {parameter.name}\n")
        steps = [replace(s, text_parameter=new_name) if s.text_parameter == parameter.name else s for s in steps]
        kept.append(replace(parameter, name=new_name))
    compiled.routine = replace(routine, parameters=tuple(kept), steps=tuple(steps))
    return compiled


def list_routines(routines: Path, out: TextIO) -> int:
    folders = routine_folders(routines)
    if not folders:
        out.write(f"no routines under {routines} (holodesk routine save SESSION NAME makes one)\n")
        return EXIT_DONE
    rows = [("NAME", "STEPS", "PARAMETERS", "TASK")]
    for folder in folders:
        try:
            routine = load_routine(folder)
        except RoutineFileError as exc:
            rows.append((folder.name, "-", "-", f"cannot be read: {safe_text(exc.problems[0])}"))
            continue
        except Exception as exc:  # whatever breaks one routine, the others are still listed
            rows.append((folder.name, "-", "-", f"cannot be read: {type(exc).__name__}: {safe_text(str(exc))}"))
            continue
        params = ", ".join(p.name for p in routine.parameters) or "-"
        task = safe_text(routine.task)
        rows.append((routine.name, str(len(routine.steps)), params, task[:60] + ("…" if len(task) > 60 else "")))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3] + "\n")
    return EXIT_DONE


def parse_sets(pairs: Sequence[str]) -> dict[str, str]:
    """--set NAME=VALUE pairs; ParameterError for one without '='."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise ParameterError(f"--set takes NAME=VALUE, got {pair!r}")
        values[name.strip()] = value
    return values


def open_routine(routines: Path, name: str, err: TextIO) -> Routine | None:
    folder = routines / name
    try:
        return load_routine(folder)
    except FileNotFoundError:
        err.write(f"error: there is no routine {name!r} under {routines} (holodesk routine list shows them)\n")
    except RoutineFileError as exc:
        err.write(f"error: {exc}\n")
    return None


def run(
    routine: Routine,
    sets: Sequence[str],
    *,
    performer: ActionPerformer,
    frames: FrameSource,
    grounder: Grounder | None,
    monitor: int | None,
    agent: Callable[[], HandOver | str] | None,
    agent_steps: int,
    sessions: Path,
    stdin: TextIO,
    out: TextIO,
    err: TextIO,
    signals: StopSignals | None = None,
) -> int:
    """Replay `routine` as a run of the step engine, recorded as a session under `sessions`, stopped by
    Ctrl+C, SIGTERM and SIGHUP as `holodesk run` is (`signals`: the command's, taken as it started);
    `agent()` builds the agent for a hand-over."""
    try:
        values = parameter_values(routine, parse_sets(sets))
    except ParameterError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    try:
        check_writable(sessions)
    except TrajectoryWriteError as exc:
        err.write(f"error: {exc}; choose another folder with --sessions\n")
        return EXIT_CONFIG
    if unsafe_runtime_dir(err):  # before the first key: the crash markers could not be trusted there
        return EXIT_CONFIG
    leftover = release_leftover_input()  # what a killed run left held (a button, a key, bound keycodes)
    if leftover.markers:
        err.write(f"note: {leftover.describe()}\n")
    if signals is not None and signals.reason is not None:  # a signal during start-up: the replay does not start
        meta = {"settings": {"monitor": monitor, "routine": routine.name}}
        return stopped_before_start(routine.task, sessions, signals.reason, meta, out, err)
    _remove_pictures_of_dead_runs()
    pictures = Path(tempfile.mkdtemp(prefix=f"{PICTURES_PREFIX}{os.getpid()}-"))
    try:
        terminal = TerminalApprover(pictures, stdin=stdin, stdout=out)
        approver = InterruptibleApprover(terminal)

        def notify(line: str) -> None:
            out.write(f"  {safe_text(line)}\n")
            out.flush()

        policy = RoutinePolicy(
            routine, values, frames, terminal, grounder=grounder, agent=agent, monitor=monitor, notify=notify
        )
        engine = routine_engine(
            policy,
            approver,
            performer,
            frames,
            trajectory_root=sessions,
            monitor=monitor,
            agent_steps=agent_steps,
            listener=terminal_event_printer(out),
            questions=approver,
        )
        out.write(f"routine {routine.name!r}: {steps_in_words(len(routine.steps))} (Ctrl+C stops)\n")
        for name, value in values.items():
            out.write(f"  {name} = {safe_text(value)!r}\n")
        out.flush()
        taken = signals if signals is not None and signals.installed else None
        with signals_stop_the_run(engine.cancel, approver, taken) as received:
            result = engine.run(task_with_values(routine, policy.values))  # recorded as this run's task
    finally:
        shutil.rmtree(pictures, ignore_errors=True)
    report(result, policy, out)
    late_signals(result, received, err)
    return EXIT_CODES[result.outcome]


def report(result: RunResult, policy: RoutinePolicy, out: TextIO) -> None:
    out.write(f"\n{result.outcome.value}: {safe_text(result.detail)}\n")
    out.write(f"steps taken: {result.steps}, model calls: {policy.model_calls}\n")
    if policy.handed_over:
        out.write("the agent's steps are in the same session as the routine's\n")
    for previous in policy.repairs_written:
        out.write(f"repaired; the previous version is kept in {previous}\n")
    if result.folder is not None:
        out.write(f"trajectory: {result.folder}\n")


class LazyGrounder:
    """The model, loaded on the first target the pictures cannot find (a replay usually needs none)."""

    def __init__(self, build: Callable[[], Grounder | None], err: TextIO) -> None:
        self._build = build
        self._grounder: Grounder | None = None
        self._failed = ""
        self.err = err

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        if self._grounder is None and not self._failed:
            self.err.write("the pictures did not find a target: loading the model to locate it...\n")
            grounder = self._build()
            if grounder is None:
                self._failed = "the model could not be loaded (said above)"
            self._grounder = grounder
        if self._grounder is None:
            raise RuntimeError(self._failed)
        return self._grounder.locate(frame, description)


def run_with_settings(
    args_name: str,
    sets: Sequence[str],
    routines: Path,
    use_model: bool,
    settings: Settings,
    signals: StopSignals | None = None,
) -> int:
    """`holodesk routine run`: the desktop backends, the model (lazily: to locate, or to take over)."""

    err, out = sys.stderr, sys.stdout
    routine = open_routine(routines, args_name, err)
    if routine is None:
        return EXIT_CONFIG
    options = settings.to_policy_options()
    monitor = settings.run.capture_monitor

    def build_grounder() -> Grounder | None:
        policy = _policy_or_exit_code(options, err)
        return None if isinstance(policy, int) else ModelGrounder(policy)

    def agent() -> HandOver | str:
        err.write("loading the model for the agent to continue...\n")
        policy = _policy_or_exit_code(options, err)
        if isinstance(policy, int):
            return "the model could not be loaded (said above)"
        return HandOver(policy, policy.profile.space)

    backends = create_backends(lambda text: print(text, file=err))
    try:
        backends.capture.grab(monitor)
    except AutomationError as exc:
        backends.close()
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    try:
        return run(
            routine,
            sets,
            performer=backends.performer,
            frames=backends.capture,
            grounder=LazyGrounder(build_grounder, err) if use_model else None,
            monitor=monitor,
            agent=agent,
            agent_steps=settings.run.max_steps,
            sessions=settings.sessions.folder,
            stdin=sys.stdin,
            out=out,
            err=err,
            signals=signals,
        )
    finally:
        backends.close()  # spare keycodes bound for the routine's text are given back; the portal ends
