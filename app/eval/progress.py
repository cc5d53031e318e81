"""Progress for long batch commands (eval, annotate): tqdm's bar on a terminal, plain lines in logs.

On a terminal the bar is tqdm's, redrawn in place. On a stream that is not a terminal (CI logs, a file)
a redrawn bar would leave carriage-return noise, so a plain line is written every `every` items
instead. Text from a model never goes here: only counts, rates and names chosen by Holodesk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm


class ProgressBar:
    """Counts finished items out of `total`, and failures among them, with the rate since the start."""

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
        live = bool(getattr(stream, "isatty", lambda: False)())
        # mininterval=0: batches are slow (seconds per item), so every item is worth a redraw.
        self._bar = (
            tqdm(total=total, file=stream, unit=f" {unit}", dynamic_ncols=True, mininterval=0, leave=True)
            if live
            else None
        )

    @property
    def rate(self) -> float:
        elapsed = self._clock() - self._started
        return self.done / elapsed if elapsed > 0 else 0.0

    def line(self, note: str = "") -> str:
        """The plain-line form used in logs."""
        failed = f", {self.failed} failed" if self.failed else ""
        text = f"{self.done}/{self.total} {self.unit} ({self.rate:.2f}/s{failed})"
        return f"{text} {note}".rstrip()

    def advance(self, count: int = 1, *, failed: bool = False, note: str = "") -> None:
        self.done += count
        if failed:
            self.failed += count
        if self._bar is not None:
            postfix = {"failed": self.failed} if self.failed else {}
            self._bar.set_postfix(postfix, refresh=False)
            self._bar.set_description_str(note[:40], refresh=False)
            self._bar.update(count)
        elif self.done % self.every == 0 or self.done == self.total:
            self.stream.write(self.line(note) + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
