"""Runs MiniWoB episodes on several workers at once and gathers them into one report and one sessions folder.

Each slot (a local worker process, or a Ray actor) takes the next episode from a shared queue. A
worker that dies mid-episode (`WorkerLost`) is replaced by a fresh one in its slot and the episode
goes back on the queue, up to `max_attempts` tries in all; after that it is counted once, as an
error that says so. An episode counts only when its result came back, so a lost attempt is never
counted and a retried one never twice. Trajectory folders come back packed with the results and
are unpacked under the command's sessions root (app/eval/workers.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from holodesk.app.eval.miniwob_eval import EpisodeResult, MiniWoBOptions, MiniWoBReport
from holodesk.app.eval.workers import (
    EpisodeDone,
    EpisodeError,
    EpisodeJob,
    WorkerLost,
    WorkerStartError,
    unpack_trajectory,
)

DEFAULT_MAX_ATTEMPTS = 3
STOP_TIMEOUT_S = 60.0  # after Ctrl+C, for each slot to end its worker (20 s to close, 15 s for its group)


class EpisodeRunner(Protocol):
    """One started worker: runs one episode at a time (WorkerLost when it died first)."""

    def run(self, job: EpisodeJob) -> EpisodeDone: ...

    def stop(self) -> None:
        """End the worker at once, from another thread; its pending `run` then raises WorkerLost."""
        ...

    def close(self) -> None: ...


# Starts the worker for slot `n`: WorkerStartError when it cannot, WorkerLost when it died while starting.
RunnerStarter = Callable[[int], EpisodeRunner]


def jobs_for(options: MiniWoBOptions) -> list[EpisodeJob]:
    """The episodes the options name, in the single-desktop eval's order (task by task, seeds up)."""
    return [EpisodeJob(index, task, seed) for index, (task, seed) in enumerate(options.planned())]


class ParallelRun:
    """`slots` workers from `start` running `jobs`; `run()` returns the report in the jobs' order."""

    def __init__(
        self,
        jobs: Sequence[EpisodeJob],
        start: RunnerStarter,
        slots: int,
        sessions: Path,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        on_episode: Callable[[EpisodeResult], None] | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError(f"at least one worker is needed, got {slots}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.jobs = list(jobs)
        self.start = start
        self.slots = min(slots, len(self.jobs)) or 1
        self.sessions = sessions
        self.max_attempts = max_attempts
        self.on_episode = on_episode
        self._queue: queue.Queue[EpisodeJob] = queue.Queue()
        for job in self.jobs:
            self._queue.put(job)
        self._lock = threading.Lock()
        self._results: dict[int, EpisodeResult] = {}
        self._attempts: dict[int, int] = {}
        self._runners: dict[int, EpisodeRunner] = {}
        self._problems: list[BaseException] = []
        self._stopping = threading.Event()
        self._ended = [threading.Event() for _ in range(self.slots)]
        self.where: dict[int, str] = {}  # job index -> the worker that finished it

    @property
    def retried(self) -> int:
        """Episodes that needed more than one try."""
        return sum(1 for attempts in self._attempts.values() if attempts > 0)

    def run(self) -> MiniWoBReport:
        # Each slot says it has ended (its worker closed, its folders removed) with an Event, not
        # Thread.join: a join that Ctrl+C interrupts can leave the thread marked as ended while it
        # runs (CPython 3.11), and the command then exited before that slot closed its worker.
        for n in range(self.slots):
            threading.Thread(target=self._slot, args=(n,), name=f"eval-slot-{n}").start()
        try:
            for ended in self._ended:
                while not ended.wait(0.5):  # wakes for Ctrl+C
                    pass
        except KeyboardInterrupt:
            self._stopping.set()
            self._stop_all()
            for ended in self._ended:
                ended.wait(STOP_TIMEOUT_S)
            raise
        if self._problems:
            problem = self._problems[0]
            if isinstance(problem, EpisodeError):
                raise problem
            raise EpisodeError(str(problem)) from problem
        missing = [job for job in self.jobs if job.index not in self._results]
        if missing:  # every slot failed to restart its worker while episodes were left
            raise EpisodeError(f"{len(missing)} episodes were not run: no worker could be started for them")
        return self.report()

    def report(self) -> MiniWoBReport:
        """The episodes finished so far, in the jobs' order (after `run` raised: what it did finish)."""
        with self._lock:
            finished = [self._results[job.index] for job in self.jobs if job.index in self._results]
        return MiniWoBReport(episodes=finished, retried=self.retried)

    def _slot(self, slot: int) -> None:
        try:
            runner = self._started(slot)
            while not self._stopping.is_set():
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    return
                try:
                    done = runner.run(job)
                except WorkerLost as exc:
                    runner.close()
                    if self._stopping.is_set():
                        return
                    self._lost(job, exc)
                    runner = self._started(slot)
                    continue
                self._finished(done)
        except (WorkerStartError, EpisodeError) as exc:
            with self._lock:
                self._problems.append(exc)
            self._stopping.set()
        except BaseException as exc:  # a bug: stop everything and report it, rather than hang the other slots
            with self._lock:
                self._problems.append(exc)
            self._stopping.set()
        finally:
            with self._lock:
                runner_left = self._runners.pop(slot, None)
            try:
                if runner_left is not None:
                    runner_left.close()
            finally:
                self._ended[slot].set()

    def _started(self, slot: int) -> EpisodeRunner:
        """A started worker for `slot`; one that dies while starting (its node went away) is tried again."""
        for _ in range(self.max_attempts):
            try:
                runner = self.start(slot)
            except WorkerLost as exc:
                lost = exc
                continue
            with self._lock:
                self._runners[slot] = runner
            return runner
        raise WorkerStartError(f"{self.max_attempts} workers in a row died while starting; the last: {lost}")

    def _lost(self, job: EpisodeJob, exc: WorkerLost) -> None:
        with self._lock:
            attempts = self._attempts.get(job.index, 0) + 1
            self._attempts[job.index] = attempts
            if attempts < self.max_attempts:
                self._queue.put(job)
                return
        # Out of tries: counted once, as an error in words (never lost, never twice).
        self._record(
            EpisodeResult(
                task=job.task,
                seed=job.seed,
                instruction="",
                success=False,
                reward=0.0,
                raw_reward=0.0,
                steps=0,
                outcome="error",
                detail=f"the worker died on each of {attempts} tries: {exc}",
                seconds=0.0,
                trajectory=None,
            ),
            job.index,
            "",
        )

    def _finished(self, done: EpisodeDone) -> None:
        with self._lock:
            if done.job.index in self._results:
                return  # already counted (cannot happen with one answer per try; guarded all the same)
        trajectory = None
        if done.folder_name is not None:
            trajectory = str(unpack_trajectory(done.archive, done.folder_name, self.sessions))
        self._record(replace(done.result, trajectory=trajectory), done.job.index, done.worker)

    def _record(self, result: EpisodeResult, index: int, where: str) -> None:
        with self._lock:
            if index in self._results:
                return
            self._results[index] = result
            self.where[index] = where
            if self.on_episode is not None:
                self.on_episode(result)

    def _stop_all(self) -> None:
        """Ends every worker mid-episode; each slot's thread then closes its own (Ctrl+C)."""
        with self._lock:
            runners = list(self._runners.values())
        for runner in runners:
            runner.stop()
