"""Where typed text goes: the focused window's rectangle and, where AT-SPI tells it, the caret's (X11 only).

The window that has the X input focus (or, when the focus follows the pointer, the deepest window
under it) is always known; app/gui/keep_clear.py keeps its bottom rows clear when nothing better is.
The caret itself is read through AT-SPI (app/gui/caret_place.py) from the application whose process
is the window's _NET_WM_PID, and trusted only when the accessible window's size matches the X
window's (once multiplied by a whole scale factor: GTK 3 under GDK_SCALE=2 gives coordinates halved)
and the caret then lies inside it: the check that the accessible and the X focus are the same
program and window, as far as it can be made cheaply. A terminal such as xterm offers no AT-SPI;
there, and wherever the read fails or takes too long, the caret is None.
Elsewhere (Wayland) this answers None and the panel keeps only the action's points clear.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from holodesk.app.gui.caret_place import CaretReader, caret_reader
from holodesk.automation.coords import Rect
from holodesk.automation.input.x11.selection import focused_window

log = logging.getLogger(__name__)

ANCESTORS_LOOKED_AT = 8  # from the focused window up to the top-level one that carries _NET_WM_PID
FRAME_SLACK_PX = 64  # how much larger the accessible window may be: a window manager's title bar and border


@dataclass(frozen=True, slots=True)
class TypingPlace:
    """Where the keys go, screen space (X root pixels): the focused window, and when known its caret and
    the text field the caret is in."""

    window: Rect
    caret: Rect | None = None
    field: Rect | None = None


def typing_place(own_windows: frozenset[int] = frozenset(), reader: CaretReader | None = None) -> TypingPlace | None:
    """The focused window and its caret; None without an X display, when keys go nowhere, or when the
    focus is on one of `own_windows` (Holodesk's own). `reader` defaults to the process's one."""
    found = _focused_window(own_windows)
    if found is None:
        return None
    window, owner = found
    if owner is None:
        log.debug("no caret: neither the focused window nor its ancestors carry _NET_WM_PID")
        return TypingPlace(window)
    pid, top_level = owner
    answer = (reader or caret_reader()).read(pid)
    if answer is None:
        return TypingPlace(window)
    scale = toolkit_scale(top_level, answer.window)
    if scale is None:
        log.info("AT-SPI's window %s is not the focused one %s: its caret is not trusted", answer.window, top_level)
        return TypingPlace(window)
    caret, field = scaled(answer.caret, scale), scaled(answer.field, scale)
    inside = window.left <= caret.left and caret.right <= window.right
    if not (inside and window.top <= caret.top and caret.bottom <= window.bottom):
        log.info("AT-SPI's caret %s lies outside the focused window %s: not trusted", caret, window)
        return TypingPlace(window)
    return TypingPlace(window, caret, field)


def toolkit_scale(x_window: Rect, accessible_window: Rect) -> int | None:
    """The whole factor the toolkit divides screen coordinates by (1 unscaled, 2 under GDK_SCALE=2):
    the X window's size over the accessible window's, within what a window manager's frame (the
    accessible window may include it) or a toolkit's shadow adds; None when they do not match."""
    across = x_window.width / accessible_window.width
    down = x_window.height / accessible_window.height
    scale = round((across + down) / 2)
    if scale < 1:
        return None
    slack = FRAME_SLACK_PX / scale
    if abs(x_window.width / scale - accessible_window.width) > slack:
        return None
    if abs(x_window.height / scale - accessible_window.height) > slack:
        return None
    return scale


def scaled(rect: Rect, scale: int) -> Rect:
    return Rect(rect.left * scale, rect.top * scale, rect.width * scale, rect.height * scale)


def _focused_window(own_windows: frozenset[int]) -> tuple[Rect, tuple[int, Rect] | None] | None:
    """The focused window's rectangle, and the _NET_WM_PID and rectangle of the first window from it
    upwards that carries one (its top-level window); None as typing_place says."""
    if not os.environ.get("DISPLAY"):
        return None
    window_id = focused_window()
    if window_id is None or window_id in own_windows:
        return None
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        connection = xdisplay.Display()
    except (xerror.DisplayError, OSError, KeyError) as exc:
        log.debug("no X display for the focused window's place: %s", exc)
        return None
    try:
        window = connection.create_resource_object("window", window_id)
        root = connection.screen().root
        pid_atom = connection.intern_atom("_NET_WM_PID")

        def rect_of(window: Any) -> Rect | None:
            geometry = window.get_geometry()
            if geometry.width <= 1 or geometry.height <= 1:
                return None
            origin = root.translate_coords(window, 0, 0)  # the window's top-left in root coordinates
            return Rect(int(origin.x), int(origin.y), int(geometry.width), int(geometry.height))

        rect: Rect | None = None
        owner: tuple[int, Rect] | None = None
        for _ in range(ANCESTORS_LOOKED_AT):
            # GTK 3 gives the focus to a 1x1 child of its top-level window: the first larger one counts.
            rect = rect or rect_of(window)
            prop = window.get_full_property(pid_atom, X.AnyPropertyType)
            if prop is not None and len(prop.value) > 0:
                top_level = rect_of(window)
                owner = (int(prop.value[0]), top_level) if top_level is not None else None
                break
            parent = window.query_tree().parent
            if not parent or int(parent.id) == int(root.id):
                break
            window = parent
        return None if rect is None else (rect, owner)
    except xerror.XError as exc:  # the window went away meanwhile
        log.debug("the focused window %#x has no geometry: %s", window_id, exc)
        return None
    finally:
        connection.close()
