"""Agents loop: the same action on a screen that does not change. Detect it so the user is asked."""

from __future__ import annotations

from holodesk.automation.actions import Action
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.screen_change import Fingerprint, fingerprint


class _Screen:
    """A screen as the guard saw it: a fingerprint, or a frame fingerprinted only if it comes to that."""

    def __init__(self, screen: Fingerprint | ScreenFrame) -> None:
        self._frame = screen if isinstance(screen, ScreenFrame) else None
        self._print = screen if isinstance(screen, Fingerprint) else None

    def fingerprint(self) -> Fingerprint:
        if self._print is None:
            assert self._frame is not None
            self._print, self._frame = fingerprint(self._frame), None
        return self._print


class LoopGuard:
    """Counts how often the same screen-space action was proposed on a visually unchanged screen."""

    def __init__(self, repeats: int = 3) -> None:
        if repeats < 2:
            raise ValueError(f"a loop needs at least 2 repeats, got {repeats}")
        self.repeats = repeats
        self._last: tuple[Action, _Screen] | None = None
        self._count = 0

    def observe(self, action: Action, screen: Fingerprint | ScreenFrame) -> bool:
        """Record a proposal; True when it is the `repeats`-th identical one on an unchanged screen.

        Given the frame itself, the guard fingerprints it only when the action repeats the last one
        (most steps propose something new, and a fingerprint is a pass over the frame).
        """
        seen = _Screen(screen)
        last = self._last
        if last is not None and last[0] == action and last[1].fingerprint().looks_like(seen.fingerprint()):
            self._count += 1
        else:
            self._count = 1
        self._last = (action, seen)
        return self._count >= self.repeats

    def reset(self) -> None:
        """Forget the streak (the user looked at it and decided)."""
        self._last = None
        self._count = 0
