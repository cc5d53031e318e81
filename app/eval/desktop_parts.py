"""The processes an eval worker's desktop is made of, and which of them has died.

A worker's episode needs all of them: Xvfb (the screen), openbox (focus and stacking), chromedriver
(the page's bookkeeping) and Chromium (the page). When one dies, what the episode reports next is
the dead part's symptom ("invalid session id", a capture that fails), not the model's doing: the
worker asks `dead()` before and after each episode, and a desktop with a dead part is given up
(app/eval/worker_loop.py) so the parent runs the episode again on a fresh one.

A part is a pid and its name. The worker's own children are waited for by `subprocess` (a dead one
shows as exited); Chromium is chromedriver's child, so its pid is looked up in /proc, where a dead
process that its parent has not collected yet reads as a zombie.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Part:
    """One process of the desktop: `process` when this process started it, else just its pid."""

    name: str
    pid: int
    process: subprocess.Popen[bytes] | None = None

    def exit_status(self) -> str | None:
        """Words for how it ended ("exit status 1", "killed by signal 9"), or None while it runs."""
        if self.process is not None:
            status = self.process.poll()
            if status is None:
                return None
            return f"killed by signal {-status}" if status < 0 else f"exit status {status}"
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return "gone"
        return "exited" if state in ("Z", "X") else None


class DesktopParts:
    """The parts to watch; `dead()` names the first that has died, in words."""

    def __init__(self, parts: Sequence[Part] = ()) -> None:
        self.parts = list(parts)

    def add(self, part: Part) -> None:
        self.parts.append(part)

    def dead(self) -> str | None:
        for part in self.parts:
            status = part.exit_status()
            if status is not None:
                return f"{part.name} (pid {part.pid}) died ({status})"
        return None


def children(parent: int) -> list[tuple[int, str]]:
    """(pid, command name) of the live processes whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        if int(text.rsplit(")", 1)[1].split()[1]) == parent:
            found.append((int(entry.name), name))
    return found
