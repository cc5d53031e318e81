"""A picklable policy source for parallel-eval tests: the DOM oracle on the worker's own browser.

An eval worker (app/eval/episode_worker.py) builds its policy in its own process, next to its own
Chromium; this source makes that policy the MiniWoB oracle (bench/rigs/miniwob_oracle.py), so
episodes on several desktops at once are scored by each page's own reward. With `marker`, the first
step any worker is asked for (whichever claims the marker file first) is a crash mid-episode: that
worker process exits at once, or, with `pause_s`, writes its process ids into the marker and waits
that long, so that a test can kill its node from outside mid-episode. Every later step is the oracle's.
With `meeting`, each worker's steps wait (bounded) until `parties` workers have been asked for a step:
otherwise, on a loaded machine, the first worker to start can finish every episode before the second
has started its browser, and a test of how episodes spread sees one worker only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from bench.rigs.miniwob_oracle import MiniWoBOracle
from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.automation.coords import Rect
from holodesk.inference.generation import Generation
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.base import ChatRequest

CRASH_STATUS = 17


MEETING_TIMEOUT_S = 180.0


@dataclass(frozen=True, slots=True)
class OracleSource:
    marker: Path | None = None
    pause_s: float = 0.0
    meeting: Path | None = None
    parties: int = 2

    def build(self, browser: MiniWoBBrowser, region: Rect) -> ModelPolicy:
        oracle = MiniWoBOracle(browser, region)
        if self.meeting is not None:
            return ModelPolicy(get_profile("holotron"), _Meeting(oracle, self.meeting, self.parties))
        if self.marker is None:
            return ModelPolicy(get_profile("holotron"), oracle)
        return ModelPolicy(get_profile("holotron"), _CrashingOnce(oracle, self.marker, self.pause_s))


class _Meeting:
    """The oracle, each step once `parties` workers have each been asked for one (see the module docstring)."""

    def __init__(self, oracle: MiniWoBOracle, folder: Path, parties: int) -> None:
        self.oracle = oracle
        self.folder = folder
        self.parties = parties

    def generate(self, request: ChatRequest) -> Generation:
        (self.folder / str(os.getpid())).touch()
        deadline = time.monotonic() + MEETING_TIMEOUT_S
        while len(list(self.folder.iterdir())) < self.parties and time.monotonic() < deadline:
            time.sleep(0.05)  # past the deadline the step goes on, and the test's own assertion says what happened
        return self.oracle.generate(request)


class _CrashingOnce:
    """The oracle, except for the one step that claims the marker (see the module docstring)."""

    def __init__(self, oracle: MiniWoBOracle, marker: Path, pause_s: float) -> None:
        self.oracle = oracle
        self.marker = marker
        self.pause_s = pause_s

    def generate(self, request: ChatRequest) -> Generation:
        try:
            claimed = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self.oracle.generate(request)
        os.write(claimed, f"{os.getpid()} {os.getppid()}\n".encode())
        os.close(claimed)
        if not self.pause_s:
            os._exit(CRASH_STATUS)
        parent = os.getppid()
        deadline = time.monotonic() + self.pause_s
        while time.monotonic() < deadline:  # the test kills this worker's node meanwhile
            if os.getppid() != parent:  # the actor that started this worker is gone: so is its episode
                os._exit(CRASH_STATUS)
            time.sleep(0.1)
        return self.oracle.generate(request)
