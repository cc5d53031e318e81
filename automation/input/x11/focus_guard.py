"""Keeps Holodesk's own windows from receiving the keys of an action (X11).

The user may click Holodesk's control window, prompt or panel between the screenshot and the action;
keys typed then would land in Holodesk itself (a space pressed its "New task" button). The engine's
frame source calls `remember()` right after each screenshot: it notes the window that has the
keyboard focus, unless that window is one of this process's own. Before a keyboard action the
X11 input backend calls `restore()`: when the focus is on one of our windows, or on nothing, it goes back to
the remembered window. A window is ours when it, or an ancestor, carries _NET_WM_PID of this process
(Qt sets it on every top-level window). Without an X display (Wayland, Windows, macOS, tests without
one) both calls do nothing.
"""

from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger(__name__)


class FocusGuard:
    """Remember the user's focused window at screenshot time; give it the focus back before keys go out."""

    def __init__(self, own_pid: int | None = None, display_name: str | None = None) -> None:
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.display_name = display_name
        self._display: Any = None
        self.remembered: int | None = None

    def _open(self) -> Any:
        if self._display is None:
            if not (self.display_name or os.environ.get("DISPLAY")):
                return None
            try:
                from Xlib import display as xdisplay
            except ImportError:
                return None
            try:
                self._display = xdisplay.Display(self.display_name)
            except Exception:  # python-xlib raises several kinds when the display cannot be opened
                log.debug("no X display for the focus guard", exc_info=True)
                return None
        return self._display

    def close(self) -> None:
        if self._display is not None:
            self._display.close()
            self._display = None

    def remember(self) -> None:
        """Note the focused window now, unless it is nothing, the root, or one of ours."""
        display = self._open()
        if display is None:
            return
        try:
            focus = self._focused(display)
            if focus is not None and not self._is_ours(display, focus):
                self.remembered = focus.id
        except Exception:  # the window may vanish between the calls; keep what was remembered
            log.debug("could not read the focused window", exc_info=True)

    def restore(self) -> str:
        """If our window (or nothing) has the focus, give it back to the remembered one; say what was done."""
        display = self._open()
        if display is None or self.remembered is None:
            return ""
        from Xlib import X

        try:
            focus = self._focused(display)
            if focus is not None and not self._is_ours(display, focus):
                return ""  # the user's own window has the keys: leave them there
            target = display.create_resource_object("window", self.remembered)
            if target.get_attributes().map_state != X.IsViewable:
                return ""
            target.set_input_focus(X.RevertToParent, X.CurrentTime)
            display.sync()
        except Exception as exc:  # the remembered window is gone
            log.debug("could not give the focus back: %s", exc)
            return ""
        return f"gave the keyboard focus back to window {self.remembered:#x}"

    @staticmethod
    def _focused(display: Any) -> Any:
        focus = display.get_input_focus().focus
        root = display.screen().root
        if not hasattr(focus, "id") or focus.id in (0, root.id):
            return None
        return focus

    def _is_ours(self, display: Any, window: Any) -> bool:
        pid_atom = display.intern_atom("_NET_WM_PID")
        root_id = display.screen().root.id
        for _ in range(32):  # a bounded walk up the tree
            prop = window.get_full_property(pid_atom, 0)  # 0: any type (CARDINAL)
            if prop is not None and len(prop.value) and int(prop.value[0]) == self.own_pid:
                return True
            parent = window.query_tree().parent
            if not hasattr(parent, "id") or parent.id in (0, root_id, window.id):
                return False
            window = parent
        return False
