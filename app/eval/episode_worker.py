"""`python -m holodesk.app.eval.episode_worker`: one eval worker process (see app/eval/workers.py).

It reads a `WorkerSetup` from stdin, starts its private desktop (Xvfb + openbox), Chromium and the
step engine on it, says `WorkerReady`, then runs each `EpisodeJob` it reads and answers with the
result and the packed trajectory (app/eval/worker_loop.py), until stdin closes or brings None; then
it closes everything. When a part of its desktop dies (Chromium, chromedriver, Xvfb, openbox), it
says so (`WorkerBroken`) and exits with EXIT_BROKEN: the parent runs the episode on a fresh worker.

Its arguments, from the parent: `--root ROOT` (its temp folder, also TMPDIR) and `--parent PID`;
its reaper (app/eval/reaper.py) ends its processes and removes ROOT however it dies.

The desktop is named to this process alone: DISPLAY and XDG_RUNTIME_DIR are set in this process's
own environment before anything opens the display (pyautogui and mss read $DISPLAY, the held-input
marker goes to the runtime folder), and the browser is given the display explicitly. The pickled
protocol owns the real stdout; the fd 1 everything else sees is the log (stderr), so a child that
prints cannot corrupt it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import IO

from holodesk.app.eval.desktop import PrivateDesktop, screen_size_for
from holodesk.app.eval.desktop_parts import DesktopParts
from holodesk.app.eval.miniwob_browser import WINDOW_HEIGHT_CSS, WINDOW_WIDTH_CSS, BrowserError, MiniWoBBrowser
from holodesk.app.eval.miniwob_eval import MiniWoBEvaluation
from holodesk.app.eval.reaper import start_reaper
from holodesk.app.eval.worker_loop import serve_jobs
from holodesk.app.eval.workers import (
    EpisodeDone,
    EpisodeFailed,
    EpisodeJob,
    WorkerReady,
    WorkerSetup,
    pack_trajectory,
    receive,
    send,
)
from holodesk.automation.held_input import HeldInputMarker
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.screen import ScreenCapture

EXIT_BROKEN = 75  # a part of the desktop died; the parent has been told (WorkerBroken)

# Set once WorkerReady is sent: a failure after it is a crash (the parent retries the episode
# elsewhere), before it a start that failed (said in words).
_started = [False]


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `finally` blocks that close Chromium and Xvfb


def serve(setup: WorkerSetup, inbox: IO[bytes], outbox: IO[bytes]) -> bool:
    """Start the desktop, then run episodes until told to stop (True) or a part died (False)."""

    options = setup.options
    size = screen_size_for(round(WINDOW_WIDTH_CSS * options.zoom), round(WINDOW_HEIGHT_CSS * options.zoom))
    scratch = Path(tempfile.mkdtemp(prefix="holodesk-worker-"))
    try:
        with PrivateDesktop(*size) as desktop:
            os.environ.update(DISPLAY=desktop.display, XDG_RUNTIME_DIR=str(desktop.runtime_dir))
            os.environ.pop("WAYLAND_DISPLAY", None)
            return _run_on(desktop.display, DesktopParts(desktop.parts()), setup, scratch, inbox, outbox)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_on(
    display: str,
    parts: DesktopParts,
    setup: WorkerSetup,
    scratch: Path,
    inbox: IO[bytes],
    outbox: IO[bytes],
) -> bool:
    where = f"{socket.gethostname()}{display}"
    capture = ScreenCapture()
    monitor = capture.monitors()[0]
    browser = MiniWoBBrowser(
        zoom=setup.options.zoom,
        origin=(monitor.rect.left, monitor.rect.top),
        chromium=setup.chromium,
        chromedriver=setup.chromedriver,
        display=display,
    )
    backend = X11Input(capture=capture, held_marker=HeldInputMarker(display=display))
    try:
        policy = setup.policy.build(browser, monitor.rect)
        sessions = scratch / "sessions"
        evaluation = MiniWoBEvaluation(
            browser,
            policy,
            InputPerformer(backend),
            capture,
            setup.options,
            trajectory_root=sessions,
            session_meta={**setup.session_meta, "worker": where},
            keep_screenshots=policy.profile.budget.keep_screenshots,
        )
        for part in browser.parts():
            parts.add(part)
        send(outbox, WorkerReady(where))
        _started[0] = True

        def run_job(job: EpisodeJob) -> EpisodeDone:
            if browser.task != job.task:
                browser.open_task(job.task)
            result = evaluation.run_episode(job.task, job.seed)
            folder = Path(result.trajectory) if result.trajectory is not None else None
            archive = pack_trajectory(folder) if folder is not None else b""
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)  # sent: the parent's copy is the one that counts
            return EpisodeDone(job, replace(result, trajectory=None), folder.name if folder else None, archive, where)

        return serve_jobs(inbox, outbox, run_job, parts, refused=(BrowserError,))
    finally:
        backend.close()
        browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name if __spec__ else __name__}")
    parser.add_argument("--root", type=Path, help="this worker's temp folder, removed when it ends")
    parser.add_argument("--parent", type=int, default=os.getppid(), help="the process that started it")
    args = parser.parse_args(argv)
    if os.getppid() != args.parent:
        return 1  # the parent is gone before we began: nobody would read an answer
    start_reaper(args.root, args.parent)
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # see the module docstring: stdout's fd is the log from here on
    signal.signal(signal.SIGTERM, _stop)
    inbox = sys.stdin.buffer
    try:
        setup = receive(inbox)
    except EOFError:
        return 0
    assert isinstance(setup, WorkerSetup), type(setup)
    try:
        whole = serve(setup, inbox, outbox)
    except Exception as exc:  # anything that kept the worker from starting is told to the parent in words
        if _started[0]:
            raise
        with contextlib.suppress(OSError):
            send(outbox, EpisodeFailed(EpisodeJob(-1, "", 0), f"the worker could not start: {exc}"))
        raise
    return 0 if whole else EXIT_BROKEN


if __name__ == "__main__":
    sys.exit(main())
