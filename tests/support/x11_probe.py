"""Ask the X server (not pyautogui) what state the input devices are in, and act as the user would.

Tests use this to check what the performer left behind: where the pointer is, whether a mouse button
or a key is still held. Each call opens its own short connection to $DISPLAY.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from Xlib import X
from Xlib import display as xdisplay
from Xlib.ext import xtest
from Xlib.protocol import request

BUTTON_MASKS = {"left": X.Button1Mask, "middle": X.Button2Mask, "right": X.Button3Mask}


@contextmanager
def _connection() -> Iterator[Any]:
    connection = xdisplay.Display(os.environ["DISPLAY"])
    try:
        yield connection
    finally:
        connection.close()


def pointer() -> tuple[int, int, list[str]]:
    """The pointer's root position and the mouse buttons the server considers held."""
    with _connection() as connection:
        reply = connection.screen().root.query_pointer()
        held = [name for name, mask in BUTTON_MASKS.items() if reply.mask & mask]
        return reply.root_x, reply.root_y, held


def pressed_keycodes() -> list[int]:
    """Keycodes the server considers held down."""
    with _connection() as connection:
        keymap = connection.query_keymap()
    return [byte_index * 8 + bit for byte_index, byte in enumerate(keymap) for bit in range(8) if byte & (1 << bit)]


def move_pointer_like_the_user(x: int, y: int) -> None:
    """Move the pointer through XTEST from another client, as a real mouse would."""
    with _connection() as connection:
        xtest.fake_input(connection, X.MotionNotify, x=x, y=y)
        connection.sync()


def drop_clipboard_owner() -> None:
    """Leave the CLIPBOARD selection with no owner, as on a desktop where nothing was ever copied."""
    with _connection() as connection:
        request.SetSelectionOwner(
            display=connection.display,
            window=X.NONE,
            selection=connection.intern_atom("CLIPBOARD"),
            time=X.CurrentTime,
        )
        connection.sync()


def selection_owned(name: str) -> bool:
    """True when some client owns the selection `name` (WM_S0: a window manager; _NET_SYSTEM_TRAY_S0: a tray)."""
    with _connection() as connection:
        owner = connection.get_selection_owner(connection.intern_atom(name))
    return bool(owner != X.NONE)
