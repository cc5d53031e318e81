"""Where typed text goes: the focused window's rectangle and, where AT-SPI tells it, the caret's (X11 only).

The window that has the X input focus (or, when the focus follows the pointer, the deepest window
under it) is always known; app/gui/keep_clear.py keeps its bottom rows clear when nothing better is.
The caret itself is read through AT-SPI (app/gui/caret_place.py) from the application whose process
is the window's _NET_WM_PID, and trusted only when it lies inside that window: the check that the
accessible and the X focus are the same program, as far as it can be made cheaply. A terminal such
as xterm offers no AT-SPI; there, and wherever the read fails or takes too long, the caret is None.
Elsewhere (Wayland) this answers None and the panel keeps only the action's points clear.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from holodesk.app.gui.caret_place import CaretReader, caret_reader
from holodesk.automation.coords import Rect
from holodesk.automation.input.x11.selection import focused_window

log = logging.getLogger(__name__)

ANCESTORS_LOOKED_AT = 8  # from the focused window up to the top-level one that carries _NET_WM_PID


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
    found = _focused_window_and_pid(own_windows)
    if found is None:
        return None
    window, pid = found
    if pid is None:
        log.debug("no caret: the focused window carries no _NET_WM_PID")
        return TypingPlace(window)
    answer = (reader or caret_reader()).read(pid)
    if answer is None:
        return TypingPlace(window)
    caret = answer.caret
    if not (
        window.left <= caret.left
        and caret.right <= window.right
        and window.top <= caret.top
        and caret.bottom <= window.bottom
    ):
        log.info("AT-SPI's caret %s lies outside the focused window %s: not trusted", caret, window)
        return TypingPlace(window)
    return TypingPlace(window, caret, answer.field)


def focused_window_rect(own_windows: frozenset[int] = frozenset()) -> Rect | None:
    """The focused window's rectangle in screen space (X root pixels); None as typing_place says."""
    found = _focused_window_and_pid(own_windows)
    return None if found is None else found[0]


def _focused_window_and_pid(own_windows: frozenset[int]) -> tuple[Rect, int | None] | None:
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
        rect: Rect | None = None
        pid = None
        for _ in range(ANCESTORS_LOOKED_AT):
            if rect is None:
                # GTK 3 gives the focus to a 1x1 child of its top-level window: the first larger one counts.
                geometry = window.get_geometry()
                if geometry.width > 1 and geometry.height > 1:
                    origin = root.translate_coords(window, 0, 0)  # the window's top-left in root coordinates
                    rect = Rect(int(origin.x), int(origin.y), int(geometry.width), int(geometry.height))
            prop = window.get_full_property(pid_atom, X.AnyPropertyType)
            if prop is not None and len(prop.value) > 0:
                pid = int(prop.value[0])
            if rect is not None and pid is not None:
                break
            parent = window.query_tree().parent
            if not parent or int(parent.id) == int(root.id):
                break
            window = parent
        return None if rect is None else (rect, pid)
    except xerror.XError as exc:  # the window went away meanwhile
        log.debug("the focused window %#x has no geometry: %s", window_id, exc)
        return None
    finally:
        connection.close()
