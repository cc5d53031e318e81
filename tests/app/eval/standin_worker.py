"""`python tests/app/eval/standin_worker.py`: an eval worker process without a desktop, for the fast tier.

It is started by the real `LocalWorker` (app/eval/workers.py, `WorkerSetup.worker_command`), runs the real reaper
(app/eval/reaper.py) and the real job loop (app/eval/worker_loop.py), and dies the ways a real
worker dies. Its "Chromium" is a `sleep` child registered as a desktop part; its temp folder a
`hd-chromium-*` folder under TMPDIR (the root its parent made). It never says `WorkerLost`:
turning its deaths into that is the code under test.

`--on INDEX=ACTION` (repeatable) picks what happens in episode INDEX, once (the first try to claim
it in `--claims DIR` does it), or on every try with `ACTION!`:
- `exit`: the process exits mid-episode (status 17), as a crash does;
- `chromium`: its Chromium is SIGKILLed mid-episode, and the episode raises the page's error, as
  selenium's "invalid session id" reaches the real worker;
- `refuse`: the episode raises the page's error on a whole desktop (a page that does not load);
- `hang`: writes its pid to `DIR/hanging` and waits (the test kills something meanwhile).
Every other episode ends with a one-line trajectory.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from holodesk.app.eval.desktop_parts import DesktopParts, Part
from holodesk.app.eval.miniwob_browser import BrowserError
from holodesk.app.eval.miniwob_eval import EpisodeResult
from holodesk.app.eval.reaper import start_reaper
from holodesk.app.eval.worker_loop import serve_jobs
from holodesk.app.eval.workers import EpisodeDone, EpisodeJob, WorkerReady, pack_trajectory, receive, send
from holodesk.automation.trajectory import TrajectoryWriter

CRASH_STATUS = 17


def _claimed(claims: Path, index: int, every_try: bool) -> bool:
    if every_try:
        return True
    try:
        os.close(os.open(claims / f"claimed-{index}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--on", action="append", default=[])
    parser.add_argument("--claims", type=Path, required=True)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args()
    start_reaper(args.root, args.parent)
    actions = {int(index): action for index, action in (item.split("=", 1) for item in args.on)}
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inbox = sys.stdin.buffer
    receive(inbox)  # the setup: nothing in it is needed here
    scratch = Path(tempfile.mkdtemp(prefix="hd-chromium-"))  # under TMPDIR: the worker's root
    chromium = subprocess.Popen(["sleep", "600"])
    parts = DesktopParts([Part("Chromium", chromium.pid, chromium)])
    send(outbox, WorkerReady(f"stand-in {os.getpid()}"))

    def run_job(job: EpisodeJob) -> EpisodeDone:
        action = actions.get(job.index, "")
        every_try = action.endswith("!")
        action = action.rstrip("!")
        if action and _claimed(args.claims, job.index, every_try):
            if action == "exit":
                os._exit(CRASH_STATUS)
            if action == "chromium":
                chromium.send_signal(signal.SIGKILL)
                chromium.wait()
                raise BrowserError("the page script failed: invalid session id")
            if action == "refuse":
                raise BrowserError(f"the page of {job.task} did not load: net::ERR_FILE_NOT_FOUND")
            if action == "hang":
                (args.claims / "hanging").write_text(f"{os.getpid()}\n")
                time.sleep(600)
        writer = TrajectoryWriter.create(scratch / "sessions", f"{job.task} {job.seed}")
        writer.close()
        result = EpisodeResult(job.task, job.seed, "do it", True, 0.9, 1.0, 1, "episode_ended", "", 0.1, None)
        return EpisodeDone(job, result, writer.folder.name, pack_trajectory(writer.folder), f"stand-in {os.getpid()}")

    whole = serve_jobs(inbox, outbox, run_job, parts, refused=(BrowserError,))
    chromium.kill()
    chromium.wait()
    return 0 if whole else 75


if __name__ == "__main__":
    sys.exit(main())
