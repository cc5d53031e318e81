"""Which desktop window a replayed step acts on, and where it is now (X11; elsewhere: not known).

A step's effect is judged inside the window it acted on (see `effects`): the top-level window under
a click's point, or the one the keys go to for typing and keys. On X11 the keys go to the focus
window; when the focus is the root or PointerRoot (no window manager set it), X delivers them to the
window under the pointer, so that one is the window typed into. No focus at all means the keys go
nowhere. Windows that bypass the window manager (override-redirect: menus, tooltips, Holodesk's own
click-through overlay) are never taken for the acted-on window.

Where the desktop cannot be asked (Wayland, no python-xlib, no $DISPLAY), `desktop_windows` returns
None and the effect is judged on the whole screen.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect

log = logging.getLogger(__name__)

try:  # python-xlib comes with pyautogui on Linux
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib import error as xerror
    from Xlib.xobject.drawable import Window as XWindow
except ImportError:  # pragma: no cover - non-Linux platforms
    X = None


@dataclass(frozen=True, slots=True)
class DesktopWindow:
    """A top-level window (its frame, under a window manager): id, screen rectangle, title."""

    id: int
    rect: Rect
    name: str

    def words(self) -> str:
        title = f" {self.name!r}" if self.name else ""
        r = self.rect
        return f"the window{title} ({r.width}x{r.height} at ({r.left}, {r.top}))"


@dataclass(frozen=True, slots=True)
class KeyboardWindow:
    """Where keys go now: a window, or nowhere (`window` None, `why` says why)."""

    window: DesktopWindow | None
    why: str = ""


class WindowProbe(Protocol):
    """Asks the desktop about its top-level windows (screen pixels)."""

    def window_at(self, x: int, y: int) -> DesktopWindow | None: ...

    def keyboard_window(self) -> KeyboardWindow: ...

    def window(self, window_id: int) -> DesktopWindow | None:
        """The window as it is now; None once it is closed or hidden."""
        ...


class X11Windows:
    """`WindowProbe` on this X display: each question opens its own short connection (a replay asks a
    few per step), so nothing is held between steps or left open after the run."""

    def window_at(self, x: int, y: int) -> DesktopWindow | None:
        with _connection() as (display, root):
            return _window_at(display, root, x, y)

    def keyboard_window(self) -> KeyboardWindow:
        with _connection() as (display, root):
            try:
                focus = display.get_input_focus().focus
                if isinstance(focus, int):  # X.NONE (0) or X.PointerRoot (1)
                    if focus == X.NONE:
                        return KeyboardWindow(None, "no window has the keyboard focus")
                    return _under_pointer(display, root)
                if focus.id == root.id:
                    return _under_pointer(display, root)
                top = _top_level(root, focus)
                described = _described(root, top) if top is not None else None
                if described is None:
                    return KeyboardWindow(None, "the window with the keyboard focus is not shown")
                return KeyboardWindow(described)
            except xerror.XError as exc:
                return KeyboardWindow(None, f"the keyboard focus could not be asked ({exc})")

    def window(self, window_id: int) -> DesktopWindow | None:
        with _connection() as (display, root):
            try:
                return _described(root, display.create_resource_object("window", window_id))
            except xerror.XError:
                return None


@contextmanager
def _connection() -> Iterator[tuple[xdisplay.Display, XWindow]]:
    display = xdisplay.Display()
    try:
        yield display, display.screen().root
    finally:
        display.close()


def _window_at(display: xdisplay.Display, root: XWindow, x: int, y: int) -> DesktopWindow | None:
    try:
        for child in reversed(root.query_tree().children):  # top of the stack first
            found = _described(root, child)
            if found is not None and found.rect.contains(Point(x, y)):
                return found
    except xerror.XError as exc:
        log.info("the window at (%d, %d) could not be asked: %s", x, y, exc)
    return None


def _under_pointer(display: xdisplay.Display, root: XWindow) -> KeyboardWindow:
    pointer = root.query_pointer()
    found = _window_at(display, root, pointer.root_x, pointer.root_y)
    if found is None:
        return KeyboardWindow(None, "the keys go to the window under the pointer, and there is none")
    return KeyboardWindow(found)


def _top_level(root: XWindow, window: XWindow) -> XWindow | None:
    """The ancestor of `window` that is a child of the root (the frame, under a window manager)."""
    current = window
    for _ in range(64):  # bounded: a tree is never this deep
        parent = current.query_tree().parent
        if parent is None or isinstance(parent, int) or parent.id == root.id:
            return current
        current = parent
    return None


def _described(root: XWindow, window: XWindow) -> DesktopWindow | None:
    """The window if it is a viewable top-level that takes part in the desktop (not override-redirect)."""
    try:
        attributes = window.get_attributes()
        if attributes.map_state != X.IsViewable or attributes.override_redirect:
            return None
        if attributes.win_class == X.InputOnly:
            return None
        geometry = window.get_geometry()
        origin = window.translate_coords(root, 0, 0)
        width, height = geometry.width + 2 * geometry.border_width, geometry.height + 2 * geometry.border_width
        rect = Rect(-origin.x - geometry.border_width, -origin.y - geometry.border_width, width, height)
        return DesktopWindow(window.id, rect, _title(window))
    except (xerror.XError, ValueError):
        return None


def _title(window: XWindow) -> str:
    """The window's title, or its client's (a frame has none of its own)."""
    for candidate in (window, *window.query_tree().children):
        name = candidate.get_wm_name()
        if isinstance(name, str) and name:
            return name
    return ""


def desktop_windows() -> X11Windows | None:
    """A probe of this desktop's windows, or None where it cannot be asked (then effects are judged on
    the whole screen)."""
    if X is None or not os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    try:
        with _connection():
            return X11Windows()
    except Exception as exc:  # python-xlib raises several kinds for a display it cannot open
        log.info("the desktop's windows cannot be asked: %s", exc)
        return None
