"""Release keys and mouse buttons a killed run left held, and clear the keycodes it bound.

The input layer's side of automation/held_input.py: that module keeps the crash markers and says
what a dead run may have left held (`HeldInput`); this one sends the releases. On X11 it asks the
server what is really down and releases only those of the named buttons and keys (XTEST), and clears
a spare keycode only while it still carries the keysym the dead run bound; elsewhere (Windows, macOS)
there is no cheap way to ask, so it releases every named one through pyautogui (harmless if up).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from holodesk.automation.pyautogui_import import import_pyautogui

# X's state mask bits for buttons 1-5 (Button1Mask is 1 << 8); 6 and 7 are never reported held.
_BUTTON_MASK_SHIFT = 7


@dataclass(frozen=True, slots=True)
class HeldInput:
    """What a dead run may have left held: X button numbers, key names (pyautogui's, or typed
    characters), X keycodes, and spare keycodes it bound (keycode -> keysym)."""

    buttons: tuple[int, ...] = ()
    keys: tuple[str, ...] = ()
    keycodes: tuple[int, ...] = ()
    bound: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReleasedInput:
    """What `release_held` released (it was still down) and which bound keycodes it cleared."""

    buttons: tuple[int, ...] = ()
    keys: tuple[str, ...] = ()
    cleared_keycodes: tuple[int, ...] = ()


def release_held(held: HeldInput, display: str | None, platform: str = sys.platform) -> ReleasedInput:
    """Release what `held` names and is still down on `display` (X11), or all of it (elsewhere).

    Raises what the display raises (no display, a refused connection): the caller keeps its markers
    for the next try and says why.
    """
    if platform.startswith("linux"):
        return _release_on_x11(display, held)
    return _release_blindly(held)


def _release_on_x11(display: str | None, held: HeldInput) -> ReleasedInput:
    """Release the buttons and keys the X server reports held, among those named, and clear the
    spare keycodes still bound to the keysym named for them."""
    from Xlib import XK, X
    from Xlib import display as xdisplay
    from Xlib.ext import xtest

    buttons, keys, keycodes, bound = held.buttons, held.keys, held.keycodes, held.bound
    connection = xdisplay.Display(display)
    try:
        held_mask = connection.screen().root.query_pointer().mask
        released_buttons = tuple(b for b in buttons if 1 <= b <= 5 and held_mask & (1 << (_BUTTON_MASK_SHIFT + b)))
        for button in released_buttons:
            xtest.fake_input(connection, X.ButtonRelease, button)
        keymap = connection.query_keymap()
        released_keys: list[str] = []
        named = [(key, _keycodes(connection, XK, key)) for key in keys]
        named += [(f"keycode {code}", [code]) for code in keycodes if 8 <= code <= 255]
        for key, codes in named:
            for keycode in codes:
                if keymap[keycode // 8] & (1 << (keycode % 8)):
                    xtest.fake_input(connection, X.KeyRelease, keycode)
                    released_keys.append(key)
        first = connection.display.info.min_keycode
        rows = connection.get_keyboard_mapping(first, connection.display.info.max_keycode - first + 1)
        cleared: list[int] = []
        for code, keysym in sorted(bound.items()):
            if 0 <= code - first < len(rows) and rows[code - first] and rows[code - first][0] == keysym:
                connection.change_keyboard_mapping(code, [(0, 0)])  # still what the dead run bound: clear it
                cleared.append(code)
        connection.sync()
    finally:
        connection.close()
    return ReleasedInput(released_buttons, tuple(dict.fromkeys(released_keys)), tuple(cleared))


# pyautogui names whose X keysym is spelled differently (its X11 backend's table, for the keys we press).
_X11_KEYSYMS = {
    "ctrl": ("Control_L", "Control_R"), "ctrlleft": ("Control_L",), "ctrlright": ("Control_R",),
    "shift": ("Shift_L", "Shift_R"), "shiftleft": ("Shift_L",), "shiftright": ("Shift_R",),
    "alt": ("Alt_L", "Alt_R"), "altleft": ("Alt_L",), "altright": ("Alt_R",),
    "win": ("Super_L", "Super_R"), "winleft": ("Super_L",), "winright": ("Super_R",),
    "enter": ("Return",), "return": ("Return",), "\n": ("Return",), "\r": ("Return",), "\t": ("Tab",),
    "tab": ("Tab",), "esc": ("Escape",), "escape": ("Escape",), "backspace": ("BackSpace",),
    "delete": ("Delete",), "del": ("Delete",), "space": ("space",), " ": ("space",), "pageup": ("Prior",),
    "pagedown": ("Next",), "pgup": ("Prior",), "pgdn": ("Next",), "capslock": ("Caps_Lock",),
    "apps": ("Menu",), "printscreen": ("Print",), "up": ("Up",), "down": ("Down",), "left": ("Left",),
    "right": ("Right",), "home": ("Home",), "end": ("End",), "insert": ("Insert",),
}  # fmt: skip


def _keycodes(connection: Any, xk: Any, key: str) -> list[int]:
    """The keycodes that may carry `key` (a pyautogui name or a typed character) on this keymap."""
    if len(key) == 1:
        names: tuple[str, ...] = _X11_KEYSYMS.get(key, ())
        # A typed character: Latin-1 keysyms equal their code point, others are 0x01000000 + code point.
        keysyms = [ord(key) if ord(key) < 0x100 else 0x01000000 + ord(key)]
        if key.isalpha():
            keysyms.append(ord(key.lower()) if ord(key) < 0x100 else keysyms[0])
    else:
        lower = key.lower()
        names = _X11_KEYSYMS.get(lower) or ((lower.upper(),) if re.fullmatch(r"f\d{1,2}", lower) else (key,))
        keysyms = []
    keysyms += [xk.string_to_keysym(name) for name in names]
    codes = {connection.keysym_to_keycode(keysym) for keysym in keysyms if keysym}
    return sorted(code for code in codes if code)


def _release_blindly(held: HeldInput) -> ReleasedInput:
    """Windows and macOS: no cheap way to ask what is held, so release every named one (harmless if up)."""
    buttons, keys = held.buttons, held.keys
    pyautogui = import_pyautogui()
    names = {1: "left", 2: "middle", 3: "right"}
    for button in buttons:
        if button in names:
            pyautogui.mouseUp(button=names[button], _pause=False)
    for key in keys:
        pyautogui.keyUp(key, _pause=False)
    return ReleasedInput(tuple(b for b in buttons if b in names), tuple(keys))
