"""Agents loop: the same action on a screen that does not change. Detect it so the user is asked."""

from __future__ import annotations

from holodesk.automation.actions import Action
from holodesk.automation.screen_change import Fingerprint


class LoopGuard:
    """Counts how often the same screen-space action was proposed on a visually unchanged screen."""

    def __init__(self, repeats: int = 3) -> None:
        if repeats < 2:
            raise ValueError(f"a loop needs at least 2 repeats, got {repeats}")
        self.repeats = repeats
        self._last: tuple[Action, Fingerprint] | None = None
        self._count = 0

    def observe(self, action: Action, screen: Fingerprint) -> bool:
        """Record a proposal; True when it is the `repeats`-th identical one on an unchanged screen."""
        if self._last is not None and self._last[0] == action and self._last[1].looks_like(screen):
            self._count += 1
        else:
            self._count = 1
        self._last = (action, screen)
        return self._count >= self.repeats

    def reset(self) -> None:
        """Forget the streak (the user looked at it and decided)."""
        self._last = None
        self._count = 0
