"""Preparing the next screenshot for the model while the engine waits for the screen to settle.

Settling waits a poll interval (100 ms by default) between grabs. A policy that can prepare a frame
ahead (ModelPolicy: the image the model will be shown) does so meanwhile on a worker thread, so the
next step's propose finds it ready instead of spending its first milliseconds on it. Only the newest
candidate matters: an older one still waiting to start is dropped. A failure is left to propose,
which prepares the frame again and reports the error where the user sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from holodesk.automation.screen import ScreenFrame

log = logging.getLogger(__name__)


class FramePreparer:
    """Runs `prepare(frame)` in the background for the frames offered; `None` prepares nothing."""

    def __init__(self, prepare: Callable[[ScreenFrame], object] | None) -> None:
        self._prepare = prepare
        self._worker = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="holodesk-prepare") if prepare is not None else None
        )
        self._latest: tuple[ScreenFrame, Future[object]] | None = None

    def offer(self, frame: ScreenFrame) -> None:
        """Start preparing `frame` (returns at once); a previous frame not yet started is dropped."""
        if self._worker is None or self._prepare is None:
            return
        if self._latest is not None:
            self._latest[1].cancel()  # a no-op once it runs: at most one runs and one waits
        self._latest = (frame, self._worker.submit(self._prepare, frame))

    def wait_for(self, frame: ScreenFrame) -> None:
        """If `frame` is being prepared, wait for that work (a few ms) rather than do it twice."""
        if self._latest is None or self._latest[0] is not frame:
            return
        try:
            self._latest[1].result()
        except Exception:  # propose prepares the frame again, and reports what fails there
            log.debug("preparing a frame ahead failed", exc_info=True)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)
        self._latest = None
