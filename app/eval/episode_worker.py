"""`python -m holodesk.app.eval.episode_worker`: one eval worker process (see app/eval/workers.py).

It reads a `WorkerSetup` from stdin, starts its private desktop (Xvfb + openbox), Chromium and the
step engine on it, says `WorkerReady`, then runs each `EpisodeJob` it reads and answers with the
result and the packed trajectory, until stdin closes or brings None; then it closes everything.

The desktop is named to this process alone: DISPLAY and XDG_RUNTIME_DIR are set in this process's
own environment before anything opens the display (pyautogui and mss read $DISPLAY, the held-input
marker goes to the runtime folder), and the browser is given the display explicitly. The pickled
protocol owns the real stdout; the fd 1 everything else sees is the log (stderr), so a child that
prints cannot corrupt it.
"""

from __future__ import annotations

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

# Set once WorkerReady is sent: a failure after it is a crash (the parent retries the episode
# elsewhere), before it a start that failed (said in words).
_started = [False]


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `finally` blocks that close Chromium and Xvfb


def serve(setup: WorkerSetup, inbox: IO[bytes], outbox: IO[bytes]) -> None:
    """Start the desktop, then run episodes until told to stop (see the module docstring)."""
    from holodesk.app.eval.desktop import PrivateDesktop, screen_size_for
    from holodesk.app.eval.miniwob_browser import WINDOW_HEIGHT_CSS, WINDOW_WIDTH_CSS

    options = setup.options
    size = screen_size_for(round(WINDOW_WIDTH_CSS * options.zoom), round(WINDOW_HEIGHT_CSS * options.zoom))
    scratch = Path(tempfile.mkdtemp(prefix="holodesk-worker-"))
    try:
        with PrivateDesktop(*size) as desktop:
            os.environ.update(DISPLAY=desktop.display, XDG_RUNTIME_DIR=str(desktop.runtime_dir))
            os.environ.pop("WAYLAND_DISPLAY", None)
            _run_on(desktop.display, setup, scratch, inbox, outbox)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_on(
    display: str,
    setup: WorkerSetup,
    scratch: Path,
    inbox: IO[bytes],
    outbox: IO[bytes],
) -> None:
    from holodesk.app.eval.miniwob_browser import BrowserError, MiniWoBBrowser
    from holodesk.app.eval.miniwob_eval import MiniWoBEvaluation
    from holodesk.automation.held_input import HeldInputMarker
    from holodesk.automation.input.performer import InputPerformer
    from holodesk.automation.input.x11.backend import X11Input
    from holodesk.automation.screen import ScreenCapture

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
        send(outbox, WorkerReady(where))
        _started[0] = True
        while True:
            try:
                job = receive(inbox)
            except EOFError:
                return
            if job is None:
                return
            assert isinstance(job, EpisodeJob), type(job)
            try:
                if browser.task != job.task:
                    browser.open_task(job.task)
                result = evaluation.run_episode(job.task, job.seed)
            except BrowserError as exc:
                send(outbox, EpisodeFailed(job, str(exc)))
                continue
            folder = Path(result.trajectory) if result.trajectory is not None else None
            archive = pack_trajectory(folder) if folder is not None else b""
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)  # sent: the parent's copy is the one that counts
            done = EpisodeDone(job, replace(result, trajectory=None), folder.name if folder else None, archive, where)
            send(outbox, done)
    finally:
        backend.close()
        browser.close()


def _start_reaper() -> None:
    """Fork a reaper that kills this worker's process group once the worker is gone, however it went.

    The worker leads its own process group (LocalWorker starts it in a new session), and so do the
    Xvfb, openbox, chromedriver and Chromium it starts. A worker killed outright (SIGKILL, a crash,
    Ray ending its actor's children) cannot stop them itself: the reaper waits on a pipe whose
    write end only the worker holds, and the kernel closes it when the worker dies.
    """
    if os.getpgrp() != os.getpid():
        return  # not a group of our own (started by hand): killing the group could hit others
    read_end, write_end = os.pipe()
    if os.fork() != 0:
        os.close(read_end)
        return  # the worker keeps write_end open for its whole life, never writing to it
    try:
        os.close(write_end)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, read_end)
        os.closerange(read_end + 1, 65536)
        while os.read(read_end, 1):
            pass
    finally:
        os.killpg(os.getpgrp(), signal.SIGKILL)  # this reaper included, last of all
        os._exit(0)


def main() -> int:
    _start_reaper()
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
        serve(setup, inbox, outbox)
    except Exception as exc:  # anything that kept the worker from starting is told to the parent in words
        if _started[0]:
            raise
        with contextlib.suppress(OSError):
            send(outbox, EpisodeFailed(EpisodeJob(-1, "", 0), f"the worker could not start: {exc}"))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
