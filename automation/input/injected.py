"""The log of keys Holodesk itself presses, which the kill-switch listener must not count as the user's.

On X11 pynput's `injected` flag is False for XTEST input, so the listener cannot tell our key
presses from the user's: every backend notes here what it is about to press.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from holodesk.automation.errors import ActionError
from holodesk.automation.keys import normalize_key

# pyautogui presses shift around these characters itself; the injected-key log must say so too.
_SHIFTED_PUNCTUATION = frozenset('~!@#$%^&*()_+{}|:"<>?')


def keys_for_text(text: str) -> frozenset[str]:
    """Canonical names of the keys pyautogui.write presses to type `text` (for the injected-key log)."""
    keys: set[str] = set()
    for character in text:
        if character == "\n":
            keys.add("enter")
        elif character == "\t":
            keys.add("tab")
        elif character == " ":
            keys.add("space")
        else:
            keys.add(character.lower())
            if character.isupper() or character in _SHIFTED_PUNCTUATION:
                keys.add("shift")
    return frozenset(keys)


@dataclass(frozen=True, slots=True)
class InjectedKey:
    """One key event an input backend sent: canonical key name and `time.monotonic()` when sent."""

    key: str
    at: float


class InjectedInput:
    """A short log of the keys the input backends themselves press, for the kill-switch listener to ignore.

    On X11 pynput's `injected` flag is False for XTEST input, so the listener cannot tell our key
    presses from the user's. Each press a backend sends is noted (`note`) just before it is sent,
    and the listener, seeing a press, `claim_press`es it: one noted press accounts for exactly one
    seen press, so a user's press of the same key right after ours (a double Esc after the model's
    Esc, the stop key while the model types it) is left unclaimed and counts as the user's.
    `recently_injected` (a time window) remains for releases and held keys.
    """

    def __init__(
        self,
        max_entries: int = 512,
        clock: Callable[[], float] = time.monotonic,
        claim_within_s: float = 2.0,
    ) -> None:
        self._entries: deque[InjectedKey] = deque(maxlen=max_entries)
        self._held: dict[str, int] = {}
        self._pending: dict[str, deque[float]] = {}
        self._reserved: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self._clock = clock
        self.claim_within_s = claim_within_s  # a noted press the listener has not seen by then never came

    def note(self, keys: Iterable[str]) -> None:
        """Record that a backend is about to press each of these (canonical) keys once."""
        now = self._clock()
        with self._lock:
            for key in keys:
                self._entries.append(InjectedKey(key, now))
                self._pending.setdefault(key, deque(maxlen=self._entries.maxlen)).append(now)

    def reserve(self, keys: Iterable[str]) -> None:
        """Keys the user presses to stop a run: the backends type these characters on other keycodes."""
        with self._lock:
            self._reserved = frozenset(keys)

    @property
    def reserved(self) -> frozenset[str]:
        with self._lock:
            return self._reserved

    def claim_press(self, key: str) -> bool:
        """True if a press of `key` just seen is one a backend sent (and no longer counts for later ones)."""
        try:
            canonical = normalize_key(key)
        except ActionError:
            return False  # a key we cannot name is not one we pressed
        cutoff = self._clock() - self.claim_within_s
        with self._lock:
            pending = self._pending.get(canonical)
            while pending and pending[0] < cutoff:
                pending.popleft()
            if pending:
                pending.popleft()
                return True
        return False

    @contextmanager
    def holding(self, keys: Iterable[str]) -> Iterator[None]:
        """Mark keys as held by a backend for the duration of the block."""
        held = tuple(keys)
        self.note(held)
        with self._lock:
            for key in held:
                self._held[key] = self._held.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                for key in held:
                    remaining = self._held.get(key, 0) - 1
                    if remaining > 0:
                        self._held[key] = remaining
                    else:
                        self._held.pop(key, None)
                # Releases are not presses: they enter the time log only.
                now = self._clock()
                self._entries.extend(InjectedKey(key, now) for key in held)

    def held_keys(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held)

    def recently_injected(self, key: str, within_s: float = 0.3) -> bool:
        """True if a backend holds `key` now or sent it in the last `within_s` seconds."""
        try:
            canonical = normalize_key(key)
        except ActionError:
            return False  # a key we cannot name is not one we pressed
        cutoff = self._clock() - within_s
        with self._lock:
            if canonical in self._held:
                return True
            for entry in reversed(self._entries):
                if entry.at < cutoff:
                    return False
                if entry.key == canonical:
                    return True
        return False

    def entries(self) -> list[InjectedKey]:
        with self._lock:
            return list(self._entries)
