"""Owns a few keys on X11 while Holodesk asks about a step, so they never reach the user's window.

The approval panel does not take the keyboard when it appears (the user keeps typing where they
were), so without this an Enter meant to approve goes to the focused application too: in a terminal
it runs the command line. While a step waits, `KeyGrab` holds passive grabs (XGrabKey on the root
window) on the answer keys, on its own X connection: the X server then sends those keys to Holodesk
only, whatever window has the focus, and `on_key` is called (on the grab's thread) when a grabbed
key is released. `stop()` gives the keys back. Caps Lock and Num Lock do not matter; other modifiers
do (Shift+Enter still reaches the panel's text field, for a new line).

Elsewhere (Wayland, Windows, macOS) `start()` returns False and the panel's own key handling applies.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

# Canonical key name -> X keysym names that produce it.
ANSWER_KEYSYMS: dict[str, tuple[str, ...]] = {"enter": ("Return", "KP_Enter"), "esc": ("Escape",)}
POLL_S = 0.05  # how often the grab's thread looks at its stop flag


class KeyGrab:
    """Grabs `keys` (canonical names of ANSWER_KEYSYMS) on the X display until `stop()`."""

    def __init__(self, keys: Sequence[str], on_key: Callable[[str], None], display_name: str | None = None) -> None:
        unknown = [key for key in keys if key not in ANSWER_KEYSYMS]
        if unknown:
            raise ValueError(f"cannot grab {unknown}: known keys are {sorted(ANSWER_KEYSYMS)}")
        self.keys = tuple(keys)
        self.on_key = on_key
        self.display_name = display_name
        self._display: Any = None
        self._grabbed: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self._display is not None

    def start(self) -> bool:
        """Grab the keys. False when there is no X display or another client holds one of them."""
        if self._display is not None:
            return True
        if not (self.display_name or os.environ.get("DISPLAY")):
            return False
        try:
            from Xlib import XK, X
            from Xlib import display as xdisplay
            from Xlib import error as xerror
        except ImportError:
            return False
        try:
            display = xdisplay.Display(self.display_name)
        except (xerror.DisplayError, OSError, KeyError) as exc:
            log.info("cannot grab the approval keys: %s", exc)
            return False
        root = display.screen().root
        keycodes: dict[int, str] = {}
        for key in self.keys:
            for name in ANSWER_KEYSYMS[key]:
                keycode = display.keysym_to_keycode(XK.string_to_keysym(name))
                if keycode:
                    keycodes[keycode] = key
        failed = xerror.CatchError(xerror.BadAccess)
        ignored = (0, X.LockMask, X.Mod2Mask, X.LockMask | X.Mod2Mask)  # Caps Lock, Num Lock
        for keycode in keycodes:
            for modifiers in ignored:
                root.grab_key(keycode, modifiers, False, X.GrabModeAsync, X.GrabModeAsync, onerror=failed)
                self._grabbed.append((keycode, modifiers))
        display.sync()
        if failed.get_error() is not None:
            log.warning("another program holds one of the approval keys; the panel's own keys apply")
            self._ungrab(display)
            display.close()
            return False
        self._display = display
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._serve, args=(display, keycodes), name="holodesk-key-grab", daemon=True
        )
        self._thread.start()
        return True

    def stop(self) -> None:
        """Give the keys back (idempotent). Returns once the X server has released them."""
        display = self._display
        if display is None:
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2.0)
        self._thread = None
        self._display = None
        try:
            self._ungrab(display)
            display.sync()
        except Exception:  # the connection may be gone; the server drops its grabs with it
            log.debug("releasing the approval keys failed", exc_info=True)
        display.close()

    def _ungrab(self, display: Any) -> None:
        root = display.screen().root
        for keycode, modifiers in self._grabbed:
            root.ungrab_key(keycode, modifiers)
        self._grabbed = []

    def _serve(self, display: Any, keycodes: dict[int, str]) -> None:
        from Xlib import X

        pressed: set[int] = set()
        while not self._stop.is_set():
            try:
                readable, _, _ = select.select([display.fileno()], [], [], POLL_S)
                if not readable and not display.pending_events():
                    continue
                while display.pending_events() and not self._stop.is_set():
                    event = display.next_event()
                    keycode = getattr(event, "detail", None)
                    if keycode not in keycodes:
                        continue
                    if event.type == X.KeyPress:
                        pressed.add(keycode)
                    elif event.type == X.KeyRelease and keycode in pressed:
                        # Answer on the release, as the panel does: the press and the release
                        # both stay with Holodesk.
                        pressed.discard(keycode)
                        self._call(keycodes[keycode])
            except Exception:  # the connection closed under us (stop() from another thread)
                if not self._stop.is_set():
                    log.exception("the approval key grab stopped")
                return

    def _call(self, key: str) -> None:
        try:
            self.on_key(key)
        except Exception:
            log.exception("approval key callback failed")
