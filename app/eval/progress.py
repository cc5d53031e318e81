"""A one-line progress bar for long batch commands (eval, annotate), redrawn in place on a terminal.

On a stream that is not a terminal it writes a plain line every `every` items instead, so logs stay
readable. Text from a model never goes here: only counts, rates and names chosen by Holodesk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 24


class ProgressBar:
    """Counts finished items out of `total` and shows the rate (items per second) since the start."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        unit: str = "items",
        every: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total < 0:
            raise ValueError("the total must not be negative")
        self.total = total
        self.done = 0
        self.failed = 0
        self.stream = stream
        self.unit = unit
        self.every = max(1, every)
        self._clock = clock
        self._started = clock()
        self._live = bool(getattr(stream, "isatty", lambda: False)())

    @property
    def rate(self) -> float:
        elapsed = self._clock() - self._started
        return self.done / elapsed if elapsed > 0 else 0.0

    def line(self, note: str = "") -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = round(fraction * BAR_WIDTH)
        failed = f", {self.failed} failed" if self.failed else ""
        text = (
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total} {self.unit}"
            f" ({self.rate:.2f}/s{failed})"
        )
        return f"{text} {note}".rstrip()

    def advance(self, count: int = 1, *, failed: bool = False, note: str = "") -> None:
        self.done += count
        if failed:
            self.failed += count
        if self._live:
            self.stream.write("\r" + self.line(note)[:150].ljust(100))
            self.stream.flush()
        elif self.done % self.every == 0 or self.done == self.total:
            self.stream.write(self.line(note) + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._live:
            self.stream.write("\n")
            self.stream.flush()
