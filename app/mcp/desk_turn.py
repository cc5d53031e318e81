"""Whose turn the desktop is: one engine run at a time across the tray app's own tasks and MCP clients.

`holodesk mcp` alone has one StepRunner and needs nothing more. The tray app serves MCP clients on the
same desktop, approver and model as its own tasks, so a client's step and a task typed in the tray must
not both run: each side takes the turn before it starts a run and gives it back at the run's end, and the
side that finds it taken says in words who has it.
"""

from __future__ import annotations

import threading


class DeskTurn:
    """A non-blocking lock that remembers, in words, who holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder = ""

    def take(self, who: str) -> str | None:
        """Take the turn for `who` (words, e.g. "a task started in the tray"); None when taken, else the
        words of whoever holds it now (the turn is then not taken)."""
        if not self._lock.acquire(blocking=False):
            return self._holder or "another run"
        self._holder = who
        return None

    def give_back(self) -> None:
        """End the turn taken with `take` (any thread)."""
        self._holder = ""
        self._lock.release()

    @property
    def taken(self) -> bool:
        return self._lock.locked()
