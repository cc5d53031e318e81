"""What `holodesk run` shows between decisions: a live "thinking" line and the model-loading bar.

On a terminal (a TTY) the line is redrawn in place every few tenths of a second with the elapsed
time, and erased when the step moves on; on a pipe or a file each state is written once, as a
plain line, so logs stay readable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NoReturn, TextIO

from tqdm import tqdm

from holodesk.automation.engine_protocols import EngineEvent, EngineState

REDRAW_S = 0.25
LINE_WIDTH = 78
_LOADING_BAR = "loading the model {bar:24} {percentage:3.0f}%  {desc}"

# The states worth a line; the others (acting, settling...) pass too quickly to read.
_WORDS = {
    EngineState.THINKING: "the model is thinking",
    EngineState.PAUSED: "paused",
    EngineState.SAVING: "saving the step's screenshot before acting",  # only when the disk is slow
}


def is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # a closed stream
        return False


class LiveStatus:
    """An engine listener that shows the slow states with their elapsed time. Call `close()` at the end."""

    def __init__(self, out: TextIO, live: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.live = is_terminal(out) if live is None else live
        self._clock = clock
        self._lock = threading.Lock()
        self._text: str | None = None  # what the live line says now (None: no line)
        self._since = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, event: EngineEvent) -> None:
        words = _WORDS.get(event.state)
        with self._lock:
            self._erase()
            if words is None:
                self._text = None
                return
            self._text = f"step {event.step}: {words}" if event.step else words
            self._since = self._clock()
            if not self.live:
                self.out.write(self._text + "\n")
                self.out.flush()
                self._text = None
                return
            self._draw()
        if self._thread is None:
            self._thread = threading.Thread(target=self._redraw, name="holodesk-live-line", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._erase()
            self._text = None

    def _redraw(self) -> None:
        while not self._stop.wait(REDRAW_S):
            with self._lock:
                if self._text is not None:
                    self._draw()

    def _draw(self) -> None:
        elapsed = self._clock() - self._since
        line = f"{self._text}… {elapsed:4.1f} s  (Ctrl+C stops)"
        self.out.write("\r" + line[:LINE_WIDTH].ljust(LINE_WIDTH))
        self.out.flush()

    def _erase(self) -> None:
        if self.live and self._text is not None:
            self.out.write("\r" + " " * LINE_WIDTH + "\r")
            self.out.flush()


def progress_bar(out: TextIO, live: bool | None = None) -> Callable[[float, str], None]:
    """A model-loading progress callback: tqdm's bar with the stage and percentage on a terminal,
    one line per new stage elsewhere."""
    live = is_terminal(out) if live is None else live
    last_stage: list[str] = []
    bars: list[tqdm[NoReturn]] = []

    def report(fraction: float, stage: str) -> None:
        fraction = min(max(fraction, 0.0), 1.0)
        if live:
            if not bars:
                bars.append(tqdm(total=100, file=out, desc=stage, bar_format=_LOADING_BAR, mininterval=0))
            bar = bars[0]
            bar.set_description_str(stage, refresh=False)
            bar.update(round(fraction * 100) - bar.n)
            if fraction >= 1:
                bar.close()
        elif not last_stage or last_stage[0] != stage:
            out.write(f"loading the model: {fraction:4.0%} {stage}\n")
            out.flush()
            last_stage[:] = [stage]

    return report
