"""Where typed text goes: the rectangle of the window that receives the keys (X11 only).

The caret itself is not read: Holodesk has no AT-SPI client, and a terminal such as xterm offers none.
The window that has the X input focus (or, when the focus follows the pointer, the deepest window
under it) is what is known; app/gui/keep_clear.py keeps its bottom rows clear as the caret's place.
Elsewhere (Wayland) this answers None and the panel keeps only the action's points clear.
"""

from __future__ import annotations

import logging
import os

from holodesk.automation.coords import Rect
from holodesk.automation.input.x11.selection import focused_window

log = logging.getLogger(__name__)


def focused_window_rect(own_windows: frozenset[int] = frozenset()) -> Rect | None:
    """The focused window's rectangle in screen space (X root pixels); None without an X display, when
    keys go nowhere, or when the focus is on one of `own_windows` (Holodesk's own)."""
    if not os.environ.get("DISPLAY"):
        return None
    window_id = focused_window()
    if window_id is None or window_id in own_windows:
        return None
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        connection = xdisplay.Display()
    except (xerror.DisplayError, OSError, KeyError) as exc:
        log.debug("no X display for the focused window's place: %s", exc)
        return None
    try:
        window = connection.create_resource_object("window", window_id)
        geometry = window.get_geometry()
        root = connection.screen().root
        origin = root.translate_coords(window, 0, 0)  # the window's top-left in root coordinates
        if geometry.width <= 1 or geometry.height <= 1:
            return None
        return Rect(int(origin.x), int(origin.y), int(geometry.width), int(geometry.height))
    except xerror.XError as exc:  # the window went away meanwhile
        log.debug("the focused window %#x has no geometry: %s", window_id, exc)
        return None
    finally:
        connection.close()
