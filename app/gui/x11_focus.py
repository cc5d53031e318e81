"""Give the keyboard focus back to the user's window after the approval panel had it (X11 only).

Clicking the panel (to edit, or to answer with Enter) focuses it. Hiding it before the action runs
is what keeps keystrokes out of it, but where the focus goes next differs: a window manager focuses
another window, while with none (a kiosk, a test display) X reverts the focus to the root window and
keys then go to whatever is under the pointer: where the panel was, often nothing. So the panel
remembers the focused window when it appears and, if after hiding the focus is left on nothing, on
the root or on one of our own windows, gives it back. Elsewhere (Wayland, Windows, macOS) this does
nothing and the platform's own focus handling applies.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

try:  # python-xlib comes with pyautogui on Linux; without it there is simply nothing to restore
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib import error as xerror
except ImportError:  # pragma: no cover - non-Linux platforms
    X = None


def _window_id(value: Any) -> int:
    return value if isinstance(value, int) else int(value.id)


class FocusReturn:
    """Remember the X input focus, and give it back if it ended up nowhere useful."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and X is not None and bool(os.environ.get("DISPLAY"))
        self._previous: int | None = None

    def remember(self, own_windows: Iterable[int]) -> None:
        """Note who has the keyboard now (unless it is one of ours)."""
        self._previous = None
        if not self.enabled:
            return
        try:
            connection = xdisplay.Display()
        except Exception:  # python-xlib raises DisplayError, OSError and others (xauth, protocol) here
            return
        try:
            focus = _window_id(connection.get_input_focus().focus)
            root = connection.screen().root.id
            if focus not in (X.NONE, X.PointerRoot, root, *own_windows):
                self._previous = focus
        finally:
            connection.close()

    def give_back(self, own_windows: Iterable[int]) -> bool:
        """After our windows are hidden: refocus the remembered window if the focus is left adrift."""
        previous, self._previous = self._previous, None
        if previous is None or not self.enabled:
            return False
        try:
            connection = xdisplay.Display()
        except Exception:  # python-xlib raises DisplayError, OSError and others (xauth, protocol) here
            return False
        try:
            root = connection.screen().root.id
            focus = _window_id(connection.get_input_focus().focus)
            if focus not in (X.NONE, X.PointerRoot, root, *own_windows):
                return False  # a window manager (or the user) already chose where the keys go
            window = connection.create_resource_object("window", previous)
            if window.get_attributes().map_state != X.IsViewable:
                return False
            window.set_input_focus(X.RevertToParent, X.CurrentTime)
            connection.sync()
            return True
        except xerror.XError as exc:  # the window went away meanwhile
            log.debug("could not give the focus back to window %#x: %s", previous, exc)
            return False
        finally:
            connection.close()
