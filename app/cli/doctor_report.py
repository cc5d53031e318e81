"""What `holodesk doctor` reports and is asked: one check's result, its status, the user's intent.

Its own module so the checks split out of doctor.py (model_fit.py, server_checks.py) share these
types without importing doctor.py, which imports them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    OK = "OK"
    INFO = "INFO"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One line of the report. `blocking` marks a FAIL that stops the chosen backend."""

    name: str
    status: Status
    detail: str
    fix: str = ""
    blocking: bool = False

    def line(self) -> str:
        text = f"{self.status.value:<5} {self.name}: {self.detail}"
        return f"{text}\n      fix: {self.fix}" if self.fix else text


@dataclass(frozen=True, slots=True)
class DoctorOptions:
    """What the user intends to run, so the doctor knows what blocks it."""

    backend: str  # "local", "remote" or "scripted"; the defaults are the settings file's
    model: str | None  # checkpoint directory or repo id (local backend)
    base_url: str | None  # server URL (remote backend)
    device: str  # "cuda" or "cpu" (local backend)
    try_step: bool = False  # --try: load the model and run one step on a canned screenshot
    profile: str = "holotron"  # the model profile (prompt and answer format) the tasks use
    max_steps: int = 30  # the step limit of a task: the context must hold its last step


def printable(text: str, limit: int = 160) -> str:
    """Model text made safe for a terminal: control characters escaped, one line, at most `limit` characters."""
    cleaned = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."
