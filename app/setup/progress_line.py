"""The download's progress as one line of text: written by `holodesk setup` when its output is not a
terminal, read back by the tray's first-run window, which runs that command and shows its progress."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(
    r"^downloading (?P<file>\S+): (?P<done>\d+) of (?P<total>\d+) bytes \(\d+%\), (?P<rate>[\d.]+) MB/s,"
    r" (?:(?P<left>\d+) s left|time left unknown)$"
)


@dataclass(frozen=True, slots=True)
class ProgressLine:
    file: str
    done: int
    total: int
    rate_mb_s: float
    left_s: int | None


def format_line(line: ProgressLine) -> str:
    left = f"{line.left_s} s left" if line.left_s is not None else "time left unknown"
    return (
        f"downloading {line.file}: {line.done} of {line.total} bytes ({100 * line.done // max(line.total, 1)}%),"
        f" {line.rate_mb_s:.1f} MB/s, {left}"
    )


def parse_line(text: str) -> ProgressLine | None:
    match = _LINE.match(text.strip())
    if match is None:
        return None
    left = match["left"]
    return ProgressLine(
        match["file"], int(match["done"]), int(match["total"]), float(match["rate"]), int(left) if left else None
    )
