"""Key names: one canonical spelling per key, and the aliases models and users write.

Models say "Return", "Control", "cmd" or "Escape"; users write "ctrl+shift+t". Everything is
normalized here, before any key is pressed, so an unknown name is rejected up front.
"""

from __future__ import annotations

import string

from holodesk.automation.errors import ActionError

_NAMED_KEYS = frozenset(
    {
        "ctrl",
        "alt",
        "shift",
        "super",
        "altgr",
        "fn",
        "enter",
        "esc",
        "tab",
        "space",
        "backspace",
        "delete",
        "insert",
        "up",
        "down",
        "left",
        "right",
        "home",
        "end",
        "pageup",
        "pagedown",
        "capslock",
        "numlock",
        "scrolllock",
        "printscreen",
        "pause",
        "menu",
        "volumeup",
        "volumedown",
        "volumemute",
        "playpause",
        "nexttrack",
        "prevtrack",
    }
    | {f"f{n}" for n in range(1, 25)}
)

# Single printable characters are keys too ("a", "1", "/", ...); upper-case letters fold to lower
# case because a key combination names keys, not characters ("ctrl+T" means ctrl+t).
_CHARACTER_KEYS = frozenset(string.ascii_lowercase + string.digits + string.punctuation)

_ALIASES = {
    "control": "ctrl",
    "ctl": "ctrl",
    "lctrl": "ctrl",
    "rctrl": "ctrl",
    "ctrlleft": "ctrl",
    "ctrlright": "ctrl",
    "control_l": "ctrl",
    "control_r": "ctrl",
    "cmd": "super",
    "command": "super",
    "win": "super",
    "windows": "super",
    "meta": "super",
    "super_l": "super",
    "super_r": "super",
    "winleft": "super",
    "winright": "super",
    "os": "super",
    "option": "alt",
    "opt": "alt",
    "alt_l": "alt",
    "alt_r": "alt",
    "altleft": "alt",
    "altright": "alt",
    "shift_l": "shift",
    "shift_r": "shift",
    "shiftleft": "shift",
    "shiftright": "shift",
    "lshift": "shift",
    "rshift": "shift",
    "return": "enter",
    "ret": "enter",
    "kp_enter": "enter",
    "escape": "esc",
    "del": "delete",
    "forwarddelete": "delete",
    "ins": "insert",
    "bksp": "backspace",
    "back": "backspace",
    "back_space": "backspace",
    "spacebar": "space",
    " ": "space",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
    "uparrow": "up",
    "downarrow": "down",
    "leftarrow": "left",
    "rightarrow": "right",
    "pgup": "pageup",
    "page_up": "pageup",
    "prior": "pageup",
    "pgdn": "pagedown",
    "page_down": "pagedown",
    "next": "pagedown",
    "caps": "capslock",
    "caps_lock": "capslock",
    "prtsc": "printscreen",
    "prtscr": "printscreen",
    "print": "printscreen",
    "print_screen": "printscreen",
    "apps": "menu",
    "contextmenu": "menu",
    "plus": "+",
    "minus": "-",
    "comma": ",",
    "period": ".",
    "slash": "/",
    "backslash": "\\",
    "semicolon": ";",
    "quote": "'",
    "apostrophe": "'",
    "grave": "`",
    "backtick": "`",
    "equal": "=",
    "equals": "=",
    "bracketleft": "[",
    "bracketright": "]",
}

MODIFIERS = frozenset({"ctrl", "alt", "shift", "super", "altgr", "fn"})
# Modifiers with which programs read a letter key as a shortcut: a letter the active layout lacks is
# then read from the same key in another layout (Qt, GTK and Chromium do so), as a user's ctrl+c is.
SHORTCUT_MODIFIERS = frozenset({"ctrl", "alt", "super"})


def normalize_key(name: str) -> str:
    """Return the canonical name of a key, or raise ActionError naming the unknown key."""
    if not isinstance(name, str):
        raise ActionError(f"key name must be a string, got {type(name).__name__}")
    if len(name) == 1:
        lowered = name.lower()
        if lowered in _CHARACTER_KEYS:
            return lowered
        if name == " ":
            return "space"
        raise ActionError(f"unknown key name {name!r}")
    cleaned = name.strip().lower().replace("-", "").replace(" ", "")
    if cleaned in _NAMED_KEYS:
        return cleaned
    if cleaned in _ALIASES:
        return _ALIASES[cleaned]
    if name.strip().lower() in _ALIASES:
        return _ALIASES[name.strip().lower()]
    raise ActionError(f"unknown key name {name!r}")


def parse_combination(text: str) -> tuple[str, ...]:
    """Split "ctrl+shift+t" (or "ctrl shift t", or "ctrl-c") into canonical key names."""
    stripped = text.strip()
    if not stripped:
        raise ActionError("key combination is empty")
    if stripped in ("+", "-"):
        return (stripped,)
    # "+" separates keys, but "ctrl++" means ctrl and the plus key.
    if "+" in stripped:
        parts = stripped.split("+")
        if stripped.endswith("++"):
            parts = [*stripped[:-2].split("+"), "+"]
    elif " " in stripped:
        parts = stripped.split()
    elif "-" in stripped and len(stripped) > 1 and not stripped.endswith("--"):
        parts = stripped.split("-")
    else:
        parts = [stripped]
    if any(not part.strip() and part != " " for part in parts):
        raise ActionError(f"malformed key combination {text!r}")
    return tuple(normalize_key(part) for part in parts)
