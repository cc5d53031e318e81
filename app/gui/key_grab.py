"""Owns a few keys on X11 while Holodesk asks about a step, so they never reach the user's window.

The approval panel does not take the keyboard when it appears (the user keeps typing where they
were), so without this an Enter meant to approve goes to the focused application too: in a terminal
it runs the command line. While a step waits, `KeyGrab` holds passive grabs (XGrabKey on the root
window) on the answer keys, on its own X connection: the X server then sends those keys to Holodesk
only, whatever window has the focus, and `on_key` is called (on the grab's thread) when a grabbed
key is released. `stop()` gives the keys back. Caps Lock and Num Lock do not matter; other modifiers
do (Shift+Enter still reaches the panel's text field, for a new line).

`hotkey_grab()` grabs the prompt hotkey the same way for as long as the app runs, so that it
does not also reach the focused application (pynput, which listens through RECORD, still sees it).

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


_MODIFIER_MASKS = {"ctrl": 1 << 2, "shift": 1 << 0, "alt": 1 << 3, "cmd": 1 << 6, "super": 1 << 6}  # X masks
_PYNPUT_KEYSYMS = {"esc": "Escape", "enter": "Return", "space": "space", "tab": "Tab", "backspace": "BackSpace"}


def stop_keysym(key: str) -> str:
    """The X keysym name of one key in pynput syntax ("<esc>" is Escape, "<f12>" F12, "q" q)."""
    name = key.strip().removeprefix("<").removesuffix(">").lower()
    return _PYNPUT_KEYSYMS.get(name, name.upper() if len(name) > 1 and name[0] == "f" else name)


def hotkey_grab(hotkey: str, display_name: str | None = None) -> KeyGrab:
    """A KeyGrab for a hotkey in pynput syntax ("<ctrl>+<alt>+h"); ValueError for one it cannot read."""
    modifiers = 0
    keysym = ""
    for part in hotkey.lower().split("+"):
        name = part.strip().removeprefix("<").removesuffix(">")
        if name in _MODIFIER_MASKS:
            modifiers |= _MODIFIER_MASKS[name]
        elif keysym or not name:
            raise ValueError(f"cannot read the hotkey {hotkey!r}")
        else:
            keysym = _PYNPUT_KEYSYMS.get(name, name.upper() if len(name) > 1 and name[0] == "f" else name)
    if not keysym:
        raise ValueError(f"the hotkey {hotkey!r} names no key")
    return KeyGrab({"hotkey": (keysym,)}, lambda _key: None, display_name, modifiers)


class KeyGrab:
    """Grabs keys on the X display until `stop()`: `keysyms` maps the name given to `on_key` to X keysym names."""

    def __init__(
        self,
        keysyms: dict[str, tuple[str, ...]],
        on_key: Callable[[str], None],
        display_name: str | None = None,
        modifiers: int = 0,
    ) -> None:
        self.keysyms = dict(keysyms)
        self.keys: Sequence[str] = tuple(keysyms)
        self.on_key = on_key
        self.display_name = display_name
        self.modifiers = modifiers
        self._display: Any = None
        self._grabbed: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = 0  # grabbed keys pressed and not yet released (written by the grab's thread only)

    @property
    def active(self) -> bool:
        return self._display is not None

    @property
    def held(self) -> bool:
        """Whether a grabbed key is down now: giving the keys back then would send its release elsewhere."""
        return self._held > 0

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
            for name in self.keysyms[key]:
                keycode = display.keysym_to_keycode(XK.string_to_keysym(name))
                if keycode:
                    keycodes[keycode] = key
        failed = xerror.CatchError(xerror.BadAccess)
        ignored = (0, X.LockMask, X.Mod2Mask, X.LockMask | X.Mod2Mask)  # Caps Lock, Num Lock
        if not keycodes:
            display.close()
            return False
        for keycode in keycodes:
            for ignored_modifiers in ignored:
                modifiers = self.modifiers | ignored_modifiers
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
        self._held = 0
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
        self._held = 0
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
                        self._held = len(pressed)
                    elif event.type == X.KeyRelease and keycode in pressed:
                        # Answer on the release, as the panel does: the press and the release
                        # both stay with Holodesk.
                        pressed.discard(keycode)
                        self._held = len(pressed)
                        self._call(keycodes[keycode])
            except Exception:  # the connection closed under us (stop() from another thread)
                if not self._stop.is_set():
                    log.exception("the approval key grab stopped")
                return

    def _call(self, key: str) -> None:
        try:
            self.on_key(key)
        except Exception:  # a broken callback must not end the grab thread; logged
            log.exception("approval key callback failed")
