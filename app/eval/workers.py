"""Eval workers: one process per private desktop, running MiniWoB episodes it is sent one at a time.

The parent (the `holodesk eval miniwob --workers N` command, or a Ray actor) starts a worker with
`LocalWorker(setup)`: a `python -m holodesk.app.eval.episode_worker` process that starts its own
desktop (app/eval/desktop.py), Chromium on it, and a step engine whose policy `setup.policy` builds
there. Messages are pickles over the worker's stdin and stdout, between processes of the same
install (never from the network): an `EpisodeJob` in, an `EpisodeDone` (the result and the episode's
trajectory folder as a tar archive), an `EpisodeFailed` or a `WorkerBroken` out.

A worker that dies (killed, crashed, its machine gone), or whose desktop lost a part (Chromium,
chromedriver, Xvfb or openbox died: `WorkerBroken`, app/eval/worker_loop.py), is a `WorkerLost` to
whoever sent the job: the scheduler (app/eval/parallel.py) runs that episode again on a fresh worker.
That turn happens here, in `LocalWorker.run`, from what the worker process really does: it exits, or
it says its desktop broke. A trajectory folder is sent back only with a finished episode, so a lost
attempt leaves nothing in the results.

Everything a worker writes to temp goes under one folder this side makes for it (its root, named to
it in TMPDIR); its reaper (app/eval/reaper.py) removes it when the worker dies, and `close` does too.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import select
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.common.policy_factory import PolicyOptions, build_policy
from holodesk.app.eval.miniwob_eval import EpisodeResult, MiniWoBOptions
from holodesk.app.eval.reaper import LOG_NAME, remove_root, wait_for_group
from holodesk.automation.coords import Rect
from holodesk.inference.model_policy import ModelPolicy

if TYPE_CHECKING:  # without importing selenium here
    from holodesk.app.eval.miniwob_browser import MiniWoBBrowser

WORKER_MODULE = "holodesk.app.eval.episode_worker"
WORKER_COMMAND = (sys.executable, "-m", WORKER_MODULE)
START_TIMEOUT_S = 180.0  # Xvfb, openbox, Chromium and a model's load on two loaded cores
LOG_TAIL_CHARS = 1500  # of the worker's log, in a start failure's message
# The worker's root, where Chromium's sockets end up (TMPDIR/ROOT/hd-chromium-X/.org.chromium.Chromium.X/
# SingletonSocket): short names keep that path within a socket path's 107 bytes for a TMPDIR of up to 17.
ROOT_PREFIX = "holodesk-eval-"
LOST_TAIL_CHARS = 400  # in a lost episode's detail (the JSON), where a traceback's last lines say why


class PolicySource(Protocol):
    """Builds a worker's policy inside the worker, next to its browser (picklable: it travels there)."""

    def build(self, browser: MiniWoBBrowser, region: Rect) -> ModelPolicy: ...


@dataclass(frozen=True, slots=True)
class OptionsPolicySource:
    """The policy the command's settings and flags describe (local, remote or scripted backend)."""

    options: PolicyOptions

    def build(self, browser: MiniWoBBrowser, region: Rect) -> ModelPolicy:
        return build_policy(self.options)


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """Everything a worker needs to start: what to run, the policy, and where Chromium is."""

    options: MiniWoBOptions
    policy: PolicySource
    session_meta: dict[str, str | None] = field(default_factory=dict)
    chromium: str | None = None
    chromedriver: str | None = None
    # The worker process's command (given `--root ROOT --parent PID` after it): this install's
    # episode worker, or a test's stand-in that speaks the same protocol without a desktop.
    worker_command: tuple[str, ...] = WORKER_COMMAND


@dataclass(frozen=True, slots=True)
class EpisodeJob:
    """One episode to run: `index` is its place in the command's order (and its identity for retries)."""

    index: int
    task: str
    seed: int


@dataclass(frozen=True, slots=True)
class EpisodeDone:
    """A finished episode: its result and its trajectory folder (`folder_name`) as a tar archive."""

    job: EpisodeJob
    result: EpisodeResult
    folder_name: str | None
    archive: bytes
    worker: str  # where it ran (host and display), for the JSON


@dataclass(frozen=True, slots=True)
class EpisodeFailed:
    """The episode could not be run for a reason a retry would not change (a page that does not load)."""

    job: EpisodeJob
    message: str


@dataclass(frozen=True, slots=True)
class WorkerBroken:
    """A part of the worker's desktop died (`reason` says which and when): the worker gives it up and exits."""

    job: EpisodeJob
    reason: str


@dataclass(frozen=True, slots=True)
class WorkerReady:
    """Sent once the worker's desktop, browser and policy are up."""

    where: str


class WorkerLost(HolodeskAppError):
    """The worker process (or its machine) went away before answering; the message says what is known."""


class WorkerStartError(HolodeskAppError):
    """A worker could not start (no Xvfb, no Chromium, a model that does not load); the message says why."""


class EpisodeError(HolodeskAppError):
    """A worker reported an `EpisodeFailed`: the run stops, as the single-desktop eval does."""


def pack_trajectory(folder: Path) -> bytes:
    """`folder` as an uncompressed tar archive (its PNGs are compressed already), named by its own name."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(folder, arcname=folder.name)
    return buffer.getvalue()


def unpack_trajectory(archive: bytes, folder_name: str, root: Path) -> Path:
    """Unpack a packed trajectory under `root`; the folder appears under its name only when complete.

    The archive is unpacked into a hidden folder beside it first, then renamed into place, so a
    command killed mid-unpack never leaves a half folder that reads as a session.
    """
    if "/" in folder_name or folder_name in ("", ".", ".."):
        raise ValueError(f"not a trajectory folder name: {folder_name!r}")
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    incoming = Path(tempfile.mkdtemp(prefix=".incoming-", dir=root))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as opened:
            opened.extractall(incoming, filter="data")
        target = root / folder_name
        if target.exists():  # the same folder twice would mean an episode counted twice
            raise FileExistsError(f"{target} is there already")
        os.rename(incoming / folder_name, target)
        return target
    finally:
        for leftover in sorted(incoming.rglob("*"), reverse=True):
            leftover.unlink() if not leftover.is_dir() else leftover.rmdir()
        incoming.rmdir()


def send(stream: IO[bytes], message: object) -> None:
    pickle.dump(message, stream, protocol=pickle.HIGHEST_PROTOCOL)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """The next message; EOFError when the other side is gone."""
    return pickle.load(stream)


class LocalWorker:
    """A worker process on this machine, on its own desktop (see the module docstring).

    `setup.worker_command` starts the worker process; it is given `--root ROOT --parent PID` and
    speaks the protocol above.
    """

    def __init__(
        self,
        setup: WorkerSetup,
        *,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX))
        self._log = open(self.root / LOG_NAME, "wb")  # noqa: SIM115 - the worker's stderr for its whole life
        # The worker starts its own desktop and names it to itself: this process's DISPLAY is never touched.
        env = {key: value for key, value in os.environ.items() if key != "WAYLAND_DISPLAY"}
        env["TMPDIR"] = str(self.root)  # everything it and its programs put in temp, removed with the root
        self._process = subprocess.Popen(
            [*setup.worker_command, "--root", str(self.root), "--parent", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,  # its own process group, which its reaper ends (app/eval/reaper.py)
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._to, self._from = self._process.stdin, self._process.stdout
        self.where = f"pid {self._process.pid}"
        try:
            send(self._to, setup)
            readable, _, _ = select.select([self._from], [], [], start_timeout_s)
            if not readable:
                raise WorkerStartError(f"the worker did not start within {start_timeout_s:g} s{self._log_tail()}")
            ready = receive(self._from)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            message = f"the worker exited while starting{self._log_tail()}"  # before close() removes the log
            self.close()
            raise WorkerStartError(message) from exc
        except WorkerStartError:
            self.close()
            raise
        if isinstance(ready, EpisodeFailed):
            self.close()
            raise WorkerStartError(ready.message)
        if not isinstance(ready, WorkerReady):
            self.close()
            raise WorkerStartError(f"the worker sent {type(ready).__name__} instead of its ready message")
        self.where = ready.where

    @property
    def pid(self) -> int:
        return self._process.pid

    def run(self, job: EpisodeJob) -> EpisodeDone:
        """Run `job` there; WorkerLost when the process dies first or its desktop broke, EpisodeError
        when it could not run it."""
        try:
            send(self._to, job)
            answer = receive(self._from)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            try:  # its pipe closes a moment before its exit status is there to read
                status: int | None = self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                status = None
            raise WorkerLost(
                f"the worker on {self.where} went away during episode {job.task} seed {job.seed}"
                f" ({'still running' if status is None else f'exit status {status}'}){self._log_tail(LOST_TAIL_CHARS)}"
            ) from exc
        if isinstance(answer, WorkerBroken) and answer.job == job:
            raise WorkerLost(f"the desktop of the worker on {self.where} broke: {answer.reason}")
        if isinstance(answer, EpisodeFailed):
            raise EpisodeError(answer.message)
        if not isinstance(answer, EpisodeDone) or answer.job != job:
            raise WorkerLost(f"the worker on {self.where} answered out of turn")
        return answer

    def _log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        try:
            text = Path(self._log.name).read_text(encoding="utf-8", errors="replace")[-chars:].strip()
        except OSError:
            return ""
        return f"; its log ends:\n{text}" if text else ""

    def stop(self) -> None:
        """End the worker now, mid-episode or not, from any thread (Ctrl+C): SIGTERM, which it answers
        by closing Chromium and its desktop; the thread waiting on its answer then sees it gone."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.terminate()

    def close(self) -> None:
        """Ask the worker to stop (it closes Chromium and its desktop), else kill it; then, once its
        process group has gone (its reaper ends what is left), remove its root; never raises."""

        if self._process.poll() is None:
            try:
                send(self._to, None)
                self._to.close()
                self._process.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait(timeout=10)
        for stream in (self._to, self._from):
            with contextlib.suppress(OSError):
                stream.close()
        self._log.close()
        wait_for_group(self._process.pid)  # the group outlives its leader while its reaper works
        remove_root(self.root)
