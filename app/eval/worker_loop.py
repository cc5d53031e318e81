"""An eval worker's job loop: run each episode it is sent, unless its desktop has lost a part.

The worker process (app/eval/episode_worker.py, or a test's stand-in with the same protocol) reads
`EpisodeJob`s and answers each with one message:
- `EpisodeDone`: the episode ran to its end on a whole desktop;
- `WorkerBroken`: a part of the desktop (Xvfb, openbox, chromedriver, Chromium) died before or
  during the episode, so its outcome says nothing about the model. The loop then ends, the worker
  exits, and the parent (app/eval/workers.py) turns it into `WorkerLost`: a fresh worker on a fresh
  desktop runs the episode again;
- `EpisodeFailed`: the episode raised one of `refused` (a page that does not load) on a whole desktop.
Any other exception ends the worker (a crash: the parent sees it gone, also `WorkerLost`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from holodesk.app.eval.desktop_parts import DesktopParts
from holodesk.app.eval.workers import EpisodeDone, EpisodeFailed, EpisodeJob, WorkerBroken, receive, send

RunJob = Callable[[EpisodeJob], EpisodeDone]


def serve_jobs(
    inbox: IO[bytes],
    outbox: IO[bytes],
    run_job: RunJob,
    parts: DesktopParts,
    refused: tuple[type[Exception], ...] = (),
) -> bool:
    """Answer jobs until the inbox closes or brings None (True), or a part died (False: give up the desktop)."""
    while True:
        try:
            job = receive(inbox)
        except EOFError:
            return True
        if job is None:
            return True
        assert isinstance(job, EpisodeJob), type(job)
        dead = parts.dead()
        if dead is not None:
            send(outbox, WorkerBroken(job, f"{dead} before the episode started"))
            return False
        try:
            done = run_job(job)
        except Exception as exc:
            # The part's death is the cause whatever the episode raised (a page script's "invalid
            # session id", a failed capture): asked after the fact, when the symptom has shown.
            dead = parts.dead()
            if dead is not None:
                send(outbox, WorkerBroken(job, f"{dead} during the episode ({type(exc).__name__}: {exc})"))
                return False
            if isinstance(exc, refused):
                send(outbox, EpisodeFailed(job, str(exc)))
                continue
            raise
        dead = parts.dead()
        if dead is not None:  # an outcome reached on a broken desktop (a step that failed to capture) is not kept
            send(outbox, WorkerBroken(job, f"{dead} during the episode"))
            return False
        send(outbox, done)
