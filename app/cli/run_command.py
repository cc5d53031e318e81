"""`holodesk run` and `holodesk locate`: the engine and the policy from a terminal.

Exit codes (stable, for scripts): 0 the task finished, 1 it failed (unusable answer, backend
error, an action that could not run or was refused), 2 bad arguments or configuration, 3 stopped by
the user, 4 the model asks the user a question, 5 the step limit was reached.

Ctrl+C, SIGTERM and SIGHUP (the terminal closed) stop the run like a "quit" (exit 3, with an end
record; app.cli.stop_signals), from the command's start (the session then says the run was stopped
before its first step) until its session closes (one after the last step is recorded as a stop); after
that, a signal changes nothing and the exit code is the session's.
Before anything else, the runtime folder that holds the crash markers is checked (ours alone: owned by
the user, mode 0700, not a link, the folder $XDG_RUNTIME_DIR names included); an unsafe one is
refused in words, exit 2, before anything is pressed. Then input left held by a run that was killed
outright is released (automation.held_input). The annotated pictures shown at approval live in a private temporary
folder that is removed when the run ends.
Configuration problems (a server that is down, a wrong URL or model path, a 404 page, a TLS
mismatch, a refused key) are found before the run starts, said in words with what to do, and exit
2 without recording a session: a run that never started leaves no trace in the history.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from holodesk.app.cli.live_status import LiveStatus, progress_bar
from holodesk.app.cli.stop_signals import STOP_SIGNALS, InterruptibleApprover, StopSignals, signals_stop_the_run
from holodesk.app.cli.terminal_approver import TerminalApprover, terminal_event_printer
from holodesk.app.common.backend_problems import NO_GPU_HERE_TERMINAL, gpu_missing, in_words, preflight, run_end_hint
from holodesk.app.common.policy_factory import PolicyConfigError, PolicyOptions, build_policy, plain_http_key_warning
from holodesk.automation.backends import create_backends
from holodesk.automation.coords import FrameMapping
from holodesk.automation.display_text import safe_lines, safe_text
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import EngineEvent, EngineSettings, Outcome, RunResult
from holodesk.automation.errors import AutomationError
from holodesk.automation.held_input import release_leftover_input
from holodesk.automation.private_dir import runtime_dir_problem
from holodesk.automation.proposal import UnusableProposal
from holodesk.automation.screen import frame_from_image
from holodesk.automation.trajectory import TrajectoryWriteError, check_writable, record_stopped_before_start
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy

if TYPE_CHECKING:
    from holodesk.automation.backends import Backends

EXIT_CODES = {
    Outcome.DONE: 0,
    Outcome.ERROR: 1,
    Outcome.FAILED: 1,
    Outcome.STOPPED: 3,
    Outcome.ASK_USER: 4,
    Outcome.STEP_LIMIT: 5,
}
EXIT_CONFIG = 2
PICTURES_PREFIX = "holodesk-approval-"  # + pid: the temporary folder of annotated approval pictures


def run_task(
    task: str,
    options: PolicyOptions,
    *,
    max_steps: int,
    monitor: int | None,
    sessions: Path,
    stdin: TextIO | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    signals: StopSignals | None = None,
) -> int:
    """`signals`: the command's, taken as it started (a signal before the run is then a stop too)."""

    signals = signals or StopSignals()  # not installed: Ctrl+C while the model loads still stops the start
    meta = {"settings": {"max_steps": max_steps, "monitor": monitor, "backend": options.backend}}

    if not task.strip():
        err.write("error: the task is empty\n")
        return EXIT_CONFIG
    try:
        check_writable(sessions)
    except TrajectoryWriteError as exc:
        err.write(f"error: {exc}; choose another folder with --sessions\n")
        return EXIT_CONFIG
    if unsafe_runtime_dir(err):
        return EXIT_CONFIG
    # Before a model loads (minutes, for a local one): release a button a killed run left pressed.
    leftover = release_leftover_input()
    if leftover.markers:
        err.write(f"note: {leftover.describe()}\n")
    warning = plain_http_key_warning(options)
    if warning:
        err.write(f"warning: {warning}\n")
    try:
        with signals.interrupting():  # the model's loading holds no X connection: a signal ends it at once
            policy = _policy_or_exit_code(options, err)
    except KeyboardInterrupt:  # Ctrl+C (or a signal) while the model loads or the server is asked: a stop
        return stopped_before_start(task, sessions, signals.reason or STOP_SIGNALS[signal.SIGINT], meta, out, err)
    if isinstance(policy, int):
        return policy
    try:
        # X11 (mss + pyautogui) or, in a Wayland session, the desktop portal, whose permission
        # dialog shows on this first grab: its explanation goes to stderr before the dialog.
        backends = create_backends(lambda text: print(text, file=err))
        backends.capture.grab(monitor)  # fail now, clearly, rather than inside the first step
    except AutomationError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    if signals.reason is not None:  # a signal while the desktop was reached: the run does not start
        backends.close()
        return stopped_before_start(task, sessions, signals.reason, meta, out, err)
    _remove_pictures_of_dead_runs()
    pictures = Path(tempfile.mkdtemp(prefix=f"{PICTURES_PREFIX}{os.getpid()}-"))
    try:
        return _run_engine(
            task, policy, backends, pictures, max_steps, monitor, sessions, options, stdin, out, err, signals
        )
    finally:
        shutil.rmtree(pictures, ignore_errors=True)


def stopped_before_start(
    task: str, sessions: Path, reason: str, meta: Mapping[str, object], out: TextIO, err: TextIO
) -> int:
    """A signal during start-up: nothing was done, and the session says the run stopped before its first step."""
    detail = f"{reason}, before the first step"
    try:
        folder: Path | None = record_stopped_before_start(sessions, task, detail, meta)
    except TrajectoryWriteError as exc:
        err.write(f"error: {exc}\n")
        folder = None
    _report(RunResult(Outcome.STOPPED, detail, 0, folder), out)
    return EXIT_CODES[Outcome.STOPPED]


def late_signals(result: RunResult, received: list[str], err: TextIO) -> None:
    """Say so when a stop signal came after the session had closed: it changed nothing."""
    if received and result.outcome is not Outcome.STOPPED:
        names = ", ".join(dict.fromkeys(received))
        err.write(f"note: {names} came after the run had ended; it is kept as it ended ({result.outcome.value})\n")


def unsafe_runtime_dir(err: TextIO) -> bool:
    """Say so and return True when the runtime folder is not ours alone: the markers that repair a
    killed run's held keys and rebound keycodes live there, and another user could hide or forge them."""
    problem = runtime_dir_problem()
    if problem is None:
        return False
    err.write(
        f"error: {problem}\nnothing was done: Holodesk keeps the markers that undo a killed run's held keys there\n"
    )
    return True


def _remove_pictures_of_dead_runs() -> None:
    """A run killed outright could not remove its pictures folder: the next run does (ours, pid gone)."""
    if os.name != "posix":
        return
    for folder in Path(tempfile.gettempdir()).glob(f"{PICTURES_PREFIX}*-*"):
        pid_text = folder.name[len(PICTURES_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or folder.is_symlink() or folder.stat().st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # alive (another user's process with that number, or our other run)


def _run_engine(
    task: str,
    policy: ModelPolicy,
    backends: Backends,
    pictures: Path,
    max_steps: int,
    monitor: int | None,
    sessions: Path,
    options: PolicyOptions,
    stdin: TextIO | None,
    out: TextIO,
    err: TextIO,
    signals: StopSignals,
) -> int:
    approver = InterruptibleApprover(TerminalApprover(pictures, stdin=stdin, stdout=out))
    live = LiveStatus(out)
    engine = StepEngine(
        policy,
        approver,
        backends.performer,
        backends.capture,
        EngineSettings(
            max_steps=max_steps,
            monitor=monitor,
            trajectory_root=sessions,
            keep_screenshots=policy.profile.budget.keep_screenshots,
            session_meta={"backend": options.backend, "profile": options.profile},
        ),
        listener=_both(live, terminal_event_printer(out)),
        questions=approver,
    )
    out.write(f"task: {task}\n(Ctrl+C stops at any time)\n")
    # The command's signals when it took them at its start (they stay taken until the process exits).
    with signals_stop_the_run(engine.cancel, approver, signals if signals.installed else None) as received:
        try:
            result = engine.run(task)
        finally:
            live.close()
            # Spare keycode bindings go; on Wayland the portal session ends: the desktop stops sharing.
            backends.close()
    _report(result, out)
    late_signals(result, received, err)
    return EXIT_CODES[result.outcome]


def _both(*listeners: Callable[[EngineEvent], None]) -> Callable[[EngineEvent], None]:
    """One engine listener that hands each event to every one of `listeners`, in order."""

    def on_event(event: EngineEvent) -> None:
        for listener in listeners:
            listener(event)

    return on_event


def _policy_or_exit_code(options: PolicyOptions, err: TextIO) -> ModelPolicy | int:
    """The policy, checked ready to serve, or the exit code after saying on `err` why it is not.

    Every failure here is a configuration problem (exit 2): the model could not be loaded or the
    server cannot serve, so the run must not start.
    """
    try:
        policy = build_policy(options, progress_bar(err))
        problem = preflight(policy.backend, policy.profile.name)
    except PolicyConfigError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    except (InferenceError, OSError) as exc:
        if options.backend == "local" and options.device == "cuda" and gpu_missing():
            # As the tray: whatever the reason says (a download, the GPU extra), only a server can help here.
            err.write(f"error: {NO_GPU_HERE_TERMINAL}\n")
        else:
            err.write(f"error: {in_words(exc, options.profile)}\n")
        return EXIT_CONFIG
    if problem is not None:
        err.write(f"error: {problem}\n")
        return EXIT_CONFIG
    return policy


def _report(result: RunResult, out: TextIO) -> None:
    out.write(f"\n{result.outcome.value}: {safe_text(result.detail)}\n")
    hint = run_end_hint(result.detail)
    if hint:
        out.write(f"{hint}\n")
    out.write(f"steps taken: {result.steps}\n")
    if result.folder is not None:
        out.write(f"trajectory: {result.folder}\n")


def locate(image_path: Path, instruction: str, options: PolicyOptions, out: TextIO, err: TextIO) -> int:
    """Print {"x": .., "y": ..} in the image's pixels for one described element."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(image_path) as image:
            frame = frame_from_image(image)
    except (OSError, UnidentifiedImageError) as exc:
        err.write(f"error: cannot read the image {image_path}: {exc}\n")
        return EXIT_CONFIG
    policy = _policy_or_exit_code(options, err)
    if isinstance(policy, int):
        return policy
    try:
        proposal = policy.locate(frame, instruction)
        mapping = FrameMapping(frame.region, proposal.image_width, proposal.image_height)
        (model_point,) = proposal.action.points()
        point = mapping.model_to_screen(model_point, proposal.space)
    except UnusableProposal as exc:
        # The model's text escaped (a terminal would act on its control sequences), line breaks kept.
        err.write(f"error: the model's answer was unusable: {safe_text(str(exc))}\n")
        err.write(f"the model's answer: {safe_lines(exc.raw_text)}\n")
        return EXIT_CODES[Outcome.ERROR]
    except (InferenceError, AutomationError) as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CODES[Outcome.ERROR]
    out.write(
        json.dumps(
            {"x": point.x, "y": point.y, "model_point": [model_point.x, model_point.y], "raw_text": proposal.raw_text},
            ensure_ascii=False,
        )
        + "\n"
    )
    return 0
