"""`holodesk run` and `holodesk locate`: the engine and the policy from a terminal.

Exit codes (stable, for scripts): 0 the task finished, 1 it failed (unusable answer, backend or
execution error), 2 bad arguments or configuration, 3 stopped by the user, 4 the model asks the
user a question, 5 the step limit was reached.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from holodesk.app.common.policy_factory import PolicyConfigError, PolicyOptions, build_policy, print_progress
from holodesk.automation.coords import FrameMapping
from holodesk.automation.engine import EngineSettings, Outcome, RunResult, StepEngine
from holodesk.automation.errors import AutomationError
from holodesk.automation.proposal import UnusableProposal
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy

EXIT_CODES = {
    Outcome.DONE: 0,
    Outcome.ERROR: 1,
    Outcome.STOPPED: 3,
    Outcome.ASK_USER: 4,
    Outcome.STEP_LIMIT: 5,
}
EXIT_CONFIG = 2


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
) -> int:
    from holodesk.app.cli.terminal_approver import TerminalApprover
    from holodesk.automation.backends import create_backends

    if not task.strip():
        err.write("error: the task is empty\n")
        return EXIT_CONFIG
    policy = _policy_or_exit_code(options, err)
    if isinstance(policy, int):
        return policy
    try:
        # X11 (mss + pyautogui) or, in a Wayland session, the desktop portal, whose permission
        # dialog shows on this first grab: its explanation goes to stderr before the dialog.
        capture, executor = create_backends(lambda text: print(text, file=err))
        capture.grab(monitor)  # fail now, clearly, rather than inside the first step
    except AutomationError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    pictures = Path(tempfile.mkdtemp(prefix="holodesk-approval-"))
    engine = StepEngine(
        policy,
        TerminalApprover(pictures, stdin=stdin, stdout=out),
        executor,
        capture,
        EngineSettings(
            max_steps=max_steps,
            monitor=monitor,
            trajectory_root=sessions,
            keep_screenshots=policy.profile.budget.keep_screenshots,
            session_meta={"backend": options.backend, "profile": options.profile},
        ),
    )
    out.write(f"task: {task}\n(Ctrl+C stops at any time)\n")
    try:
        result = engine.run(task)
    finally:
        capture.close()  # on Wayland this ends the portal session: the desktop stops sharing
    _report(result, out)
    return EXIT_CODES[result.outcome]


def _policy_or_exit_code(options: PolicyOptions, err: TextIO) -> ModelPolicy | int:
    """The policy, or the exit code after saying on `err` why it could not be built."""
    try:
        return build_policy(options, print_progress(err))
    except PolicyConfigError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CONFIG
    except (InferenceError, OSError) as exc:
        err.write(f"error: {exc}\n")
        return EXIT_CODES[Outcome.ERROR]


def _report(result: RunResult, out: TextIO) -> None:
    out.write(f"\n{result.outcome.value}: {result.detail}\n")
    out.write(f"steps: {result.steps}\n")
    if result.folder is not None:
        out.write(f"trajectory: {result.folder}\n")


def locate(image_path: Path, instruction: str, options: PolicyOptions, out: TextIO, err: TextIO) -> int:
    """Print {"x": .., "y": ..} in the image's pixels for one described element."""
    from PIL import Image, UnidentifiedImageError

    from holodesk.automation.screen import frame_from_image

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
        err.write(f"error: the model's answer was unusable: {exc}\nraw answer: {exc.raw_text}\n")
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
